
import pytest

from plif.data.events.datasets import CIFAR10_CLASSES, EVENT_DATASETS, list_samples


def touch(p, data=b"\x01\x02\x80\x00\x05"):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def test_registry():
    assert EVENT_DATASETS["nmnist"].sensor_size == (34, 34) and EVENT_DATASETS["nmnist"].T == 10
    assert EVENT_DATASETS["cifar10-dvs"].sensor_size == (128, 128) and EVENT_DATASETS["cifar10-dvs"].T == 20
    assert EVENT_DATASETS["dvs128-gesture"].num_classes == 11 and EVENT_DATASETS["dvs128-gesture"].sizes == (1176, 288)


def test_nmnist_listing(tmp_path):
    for split in ("Train", "Test"):
        for d in range(10):
            for k in (1, 2, 10):
                touch(tmp_path / "NMNIST" / split / str(d) / f"{k:05d}.bin" if d == 0 else
                      tmp_path / "NMNIST" / split / str(d) / f"{k}.bin")
    s = list_samples("nmnist", tmp_path, train=True)
    assert len(s) == 30 and [x.label for x in s[:4]] == [0, 0, 0, 1]
    assert [p.path.rsplit("/", 1)[1] for p in s[3:6]] == ["1.bin", "2.bin", "10.bin"]  # numeric order
    assert len(list_samples("nmnist", tmp_path / "NMNIST", train=False)) == 30
    (tmp_path / "NMNIST" / "Test" / "7").rename(tmp_path / "NMNIST" / "Test" / "seven")
    with pytest.raises(FileNotFoundError, match="Test/7"):
        list_samples("nmnist", tmp_path, train=False)


def test_cifar10_dvs_paper_split(tmp_path):
    for cls in CIFAR10_CLASSES:
        for k in range(1, 11):
            touch(tmp_path / cls / f"cifar10_{cls}_{k}.aedat", b"#!AER-DAT2.0\r\n")
    train = list_samples("cifar10-dvs", tmp_path, train=True)
    test = list_samples("cifar10-dvs", tmp_path, train=False)
    assert len(train) == 90 and len(test) == 10
    assert [s.label for s in test] == list(range(10))
    assert all(s.path.endswith("_10.aedat") for s in test)  # by file number, not by name: 10 is last
    assert train[0].path.endswith("cifar10_airplane_1.aedat") and train[8].path.endswith("_9.aedat")
    assert len(list_samples("cifar10-dvs", tmp_path, train=True, train_fraction=0.5)) == 50


def test_cifar10_dvs_missing_class(tmp_path):
    touch(tmp_path / "airplane" / "a_1.aedat")
    with pytest.raises(FileNotFoundError, match="automobile"):
        list_samples("cifar10-dvs", tmp_path, train=True)


def test_gesture_listing_and_errors(tmp_path):
    d = tmp_path / "DvsGesture"
    d.mkdir()
    (d / "trials_to_train.txt").write_text("user01_natural.aedat\nuser02_led.aedat\n")
    for rec, rows in (("user01_natural", [(1, 0, 10), (11, 10, 20)]), ("user02_led", [(5, 3, 4)])):
        touch(d / f"{rec}.aedat", b"#!AER-DAT3.1\r\n#!END-HEADER\r\n")
        (d / f"{rec}_labels.csv").write_text("class,startTime_usec,endTime_usec\n" +
                                             "".join(f"{c},{a},{b}\n" for c, a, b in rows))
    s = list_samples("dvs128-gesture", tmp_path, train=True)
    assert [(x.label, x.start, x.end) for x in s] == [(0, 0, 10), (10, 10, 20), (4, 3, 4)]
    assert s[2].path == str(d / "user02_led.aedat")
    with pytest.raises(FileNotFoundError, match="trials_to_test.txt"):
        list_samples("dvs128-gesture", tmp_path, train=False)
    (d / "user02_led.aedat").unlink()
    with pytest.raises(FileNotFoundError, match="lists user02_led.aedat"):
        list_samples("dvs128-gesture", tmp_path, train=True)
    with pytest.raises(ValueError, match="unknown event dataset"):
        list_samples("n-caltech101", tmp_path, train=True)
