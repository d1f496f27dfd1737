import re

import pytest

from plif.catalog import DATASETS, get_dataset
from plif.data.events.datasets import CIFAR10_CLASSES, list_samples


def touch(p, data=b"\x01\x02\x80\x00\x05"):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def test_registry():
    assert DATASETS["nmnist"].sensor_size == (34, 34) and DATASETS["nmnist"].T == 10
    assert DATASETS["cifar10-dvs"].sensor_size == (128, 128) and DATASETS["cifar10-dvs"].T == 20
    assert DATASETS["dvs128-gesture"].num_classes == 11 and DATASETS["dvs128-gesture"].sizes == (1176, 288)


def test_nmnist_listing(tmp_path):
    for split in ("Train", "Test"):
        for d in range(10):
            for k in (1, 2, 10):
                touch(tmp_path / "NMNIST" / split / str(d) / f"{k:05d}.bin" if d == 0 else
                      tmp_path / "NMNIST" / split / str(d) / f"{k}.bin")
    s = list_samples(get_dataset("nmnist"), tmp_path, train=True)
    assert len(s) == 30 and [x.label for x in s[:4]] == [0, 0, 0, 1]
    assert [p.path.rsplit("/", 1)[1] for p in s[3:6]] == ["1.bin", "2.bin", "10.bin"]  # numeric order
    assert len(list_samples(get_dataset("nmnist"), tmp_path / "NMNIST", train=False)) == 30
    (tmp_path / "NMNIST" / "Test" / "7").rename(tmp_path / "NMNIST" / "Test" / "seven")
    with pytest.raises(FileNotFoundError, match="Test/7"):
        list_samples(get_dataset("nmnist"), tmp_path, train=False)


def test_cifar10_dvs_paper_split(tmp_path):
    for cls in CIFAR10_CLASSES:
        for k in range(1, 11):
            touch(tmp_path / cls / f"cifar10_{cls}_{k}.aedat", b"#!AER-DAT2.0\r\n")
    train = list_samples(get_dataset("cifar10-dvs"), tmp_path, train=True)
    test = list_samples(get_dataset("cifar10-dvs"), tmp_path, train=False)
    assert len(train) == 90 and len(test) == 10
    assert [s.label for s in test] == list(range(10))
    assert all(s.path.endswith("_10.aedat") for s in test)  # by file number, not by name: 10 is last
    assert train[0].path.endswith("cifar10_airplane_1.aedat") and train[8].path.endswith("_9.aedat")
    assert len(list_samples(get_dataset("cifar10-dvs"), tmp_path, train=True, train_fraction=0.5)) == 50


def test_cifar10_dvs_missing_class(tmp_path):
    touch(tmp_path / "airplane" / "a_1.aedat")
    with pytest.raises(FileNotFoundError, match="automobile"):
        list_samples(get_dataset("cifar10-dvs"), tmp_path, train=True)


def test_gesture_listing_and_errors(tmp_path):
    d = tmp_path / "DvsGesture"
    d.mkdir()
    (d / "trials_to_train.txt").write_text("user01_natural.aedat\nuser02_led.aedat\n")
    for rec, rows in (("user01_natural", [(1, 0, 10), (11, 10, 20)]), ("user02_led", [(5, 3, 4)])):
        touch(d / f"{rec}.aedat", b"#!AER-DAT3.1\r\n#!END-HEADER\r\n")
        (d / f"{rec}_labels.csv").write_text("class,startTime_usec,endTime_usec\n" +
                                             "".join(f"{c},{a},{b}\n" for c, a, b in rows))
    s = list_samples(get_dataset("dvs128-gesture"), tmp_path, train=True)
    assert [(x.label, x.start, x.end) for x in s] == [(0, 0, 10), (10, 10, 20), (4, 3, 4)]
    assert s[2].path == str(d / "user02_led.aedat")
    with pytest.raises(FileNotFoundError, match="trials_to_test.txt"):
        list_samples(get_dataset("dvs128-gesture"), tmp_path, train=False)
    (d / "user02_led.aedat").unlink()
    with pytest.raises(FileNotFoundError, match="lists user02_led.aedat"):
        list_samples(get_dataset("dvs128-gesture"), tmp_path, train=True)
    with pytest.raises(ValueError, match="unknown event dataset 'n-caltech101'; valid: nmnist, cifar10-dvs"):
        list_samples(get_dataset("n-caltech101", events=True), tmp_path, train=True)
    with pytest.raises(ValueError, match="unknown event dataset 'mnist'"):  # a static dataset is refused too
        list_samples(get_dataset("mnist"), tmp_path, train=True)


def _nmnist_tree(root, n=2):
    for split in ("Train", "Test"):
        for d in range(10):
            for k in range(1, n + 1):
                touch(root / split / str(d) / f"{k:05d}.bin")
    return root


def test_empty_class_folder_is_refused_in_every_dataset(tmp_path):
    root = _nmnist_tree(tmp_path / "nm")
    for f in (root / "Train" / "4").iterdir():
        f.unlink()
    with pytest.raises(FileNotFoundError, match=r"nmnist: no \*.bin files in class folder .*Train/4: an empty class"):
        list_samples(get_dataset("nmnist"), root, train=True)
    for cls in CIFAR10_CLASSES:
        (tmp_path / "c" / cls).mkdir(parents=True)
        if cls != "dog":
            touch(tmp_path / "c" / cls / f"cifar10_{cls}_1.aedat")
    with pytest.raises(FileNotFoundError, match=r"cifar10-dvs: no \*.aedat/\*.aedat4 files in class folder .*dog: an empty"):
        list_samples(get_dataset("cifar10-dvs"), tmp_path / "c", train=True)


@pytest.mark.parametrize("names,said", [
    (["cifar10_cat_1.aedat", "cifar10_cat_01.aedat"], "holds cifar10_cat_01.aedat and cifar10_cat_1.aedat, both number 1"),
    (["cifar10_cat_1.aedat", "cifar10_cat_1.aedat4"], "holds cifar10_cat_1.aedat and cifar10_cat_1.aedat4, both number 1"),
    (["cifar10_cat_x.aedat"], "cifar10_cat_x.aedat: file name does not end in a number"),
])
def test_cifar10_dvs_file_numbers(tmp_path, names, said):
    for cls in CIFAR10_CLASSES:
        touch(tmp_path / cls / f"cifar10_{cls}_2.aedat")
    for n in names:
        touch(tmp_path / "cat" / n)
    with pytest.raises(ValueError, match=re.escape(said)):
        list_samples(get_dataset("cifar10-dvs"), tmp_path, train=True)


def test_nmnist_duplicate_number_and_linked_test_folder(tmp_path):
    root = _nmnist_tree(tmp_path / "nm")
    touch(root / "Train" / "3" / "1.bin")  # beside 00001.bin
    with pytest.raises(ValueError, match=r"Train/3 holds 00001.bin and 1.bin, both number 1"):
        list_samples(get_dataset("nmnist"), root, train=True)
    (root / "Train" / "3" / "1.bin").unlink()
    import shutil
    shutil.rmtree(root / "Test" / "5")
    (root / "Test" / "5").symlink_to(root / "Train" / "5")
    with pytest.raises(ValueError, match=r"Train/5/00001.bin is in both the train and the test split \(2 such\)"):
        list_samples(get_dataset("nmnist"), root, train=False)


def _gesture(tmp_path, train_list, test_list, head=b"#!AER-DAT3.1\r\n#!END-HEADER\r\n"):
    d = tmp_path / "DvsGesture"
    d.mkdir(exist_ok=True)
    (d / "trials_to_train.txt").write_text("".join(f"{r}\n" for r in train_list))
    (d / "trials_to_test.txt").write_text("".join(f"{r}\n" for r in test_list))
    for rec in set(train_list + test_list):
        touch(d / rec, head)
        (d / rec.replace(".aedat", "_labels.csv")).write_text("class,startTime_usec,endTime_usec\n1,0,10\n")
    return d


def test_gesture_leak_duplicate_and_wrong_format(tmp_path):
    _gesture(tmp_path, ["user01_led.aedat", "user02_led.aedat"], ["user02_led.aedat"])
    with pytest.raises(ValueError, match=r"user02_led.aedat is in both the train and the test split \(1 such\)"):
        list_samples(get_dataset("dvs128-gesture"), tmp_path, train=True)
    with pytest.raises(ValueError, match="a train/test leak"):
        list_samples(get_dataset("dvs128-gesture"), tmp_path, train=False)
    _gesture(tmp_path, ["user01_led.aedat", "user01_led.aedat"], ["user03_led.aedat"])
    with pytest.raises(ValueError, match=r"user01_led.aedat is listed twice in .*trials_to_train.txt"):
        list_samples(get_dataset("dvs128-gesture"), tmp_path, train=True)
    _gesture(tmp_path, ["user04_led.aedat"], ["user05_led.aedat"], head=b"#!AER-DAT2.0\r\n# AEChip: DVS128\r\n")
    with pytest.raises(ValueError, match=r"user04_led.aedat: dvs128-gesture recordings are AEDAT 3.1 .*"
                                         r"its first line is '#!AER-DAT2.0'"):
        list_samples(get_dataset("dvs128-gesture"), tmp_path, train=True)
    (tmp_path / "DvsGesture" / "user05_led_labels.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"lists user05_led.aedat, but its label file .*user05_led_labels.csv is missing"):
        list_samples(get_dataset("dvs128-gesture"), tmp_path, train=False)


def test_no_samples_says_what_was_looked_for(tmp_path):
    d = _gesture(tmp_path, ["user01_led.aedat"], ["user02_led.aedat"])
    (d / "user01_led_labels.csv").write_text("class,startTime_usec,endTime_usec\n")
    with pytest.raises(ValueError, match=r"dvs128-gesture: no train samples under .* \(.*trials_to_train.txt"):
        list_samples(get_dataset("dvs128-gesture"), tmp_path, train=True)


def test_odd_entries_in_a_class_folder_are_refused(tmp_path):
    root = _nmnist_tree(tmp_path / "nm")
    (root / "Train" / "8" / "00009.bin").mkdir()
    with pytest.raises(ValueError, match=r"Train/8/00009.bin is not a regular file"):
        list_samples(get_dataset("nmnist"), root, train=True)
    (root / "Train" / "8" / "00009.bin").rmdir()
    (root / "Train" / "8" / "00009.bin").symlink_to(tmp_path / "gone.bin")
    with pytest.raises(ValueError, match=r"Train/8/00009.bin is a dangling link"):
        list_samples(get_dataset("nmnist"), root, train=True)


def test_the_cache_advice_names_the_folder_the_recordings_were_listed_from(nmnist_root, tmp_path):
    """The build stores the folder it listed (``data_dir``, outside the folder's key: the parent or the
    dataset's own folder make one cache), the advice's --data-dir lists the same samples again; a cache
    whose meta.json holds none (built by an older plif) is advised ``--data-dir DIR``."""
    import json
    import shlex

    from plif.data.events.cache import rebuild_advice
    from plif.data.events.load import prepare_event_frames

    root = nmnist_root[0].rename(tmp_path / "NMNIST")  # a folder name the lister looks for under a parent
    kw = dict(T=1, train=True, cache_dir=tmp_path / "c", workers=0, progress=False)
    folder = prepare_event_frames(get_dataset("nmnist"), root.parent, **kw)  # the parent given
    assert prepare_event_frames("nmnist", root, **kw) == folder
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["params"]["data_dir"] == str(root.parent)
    advised = shlex.split(rebuild_advice(folder, meta).split("rebuild it: ", 1)[1].split(", or delete ", 1)[0])
    assert list_samples(get_dataset("nmnist"), advised[advised.index("--data-dir") + 1], train=True) == \
        list_samples(get_dataset("nmnist"), root, train=True)
    del meta["params"]["data_dir"]
    assert "--data-dir DIR, or delete" in rebuild_advice(folder, meta)
    meta["params"]["dataset"] = "a-dataset-no-lister-knows"  # only stored text is read: no lookup to fail
    assert "plif data prepare a-dataset-no-lister-knows --verify" in rebuild_advice(folder, meta)


def test_real_paths_are_realpath_with_each_folder_resolved_once(tmp_path):
    """Files, links to files, files in a linked folder, links to links, a dangling link: as os.path.realpath."""
    import os

    from plif.data.events.datasets import _real_paths

    touch(tmp_path / "a" / "1.bin")
    touch(tmp_path / "a" / "2.bin")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "1.bin").symlink_to(tmp_path / "a" / "1.bin")
    (tmp_path / "b" / "3.bin").symlink_to(tmp_path / "b" / "1.bin")
    (tmp_path / "b" / "4.bin").symlink_to(tmp_path / "gone.bin")
    (tmp_path / "c").symlink_to(tmp_path / "a")
    paths = [tmp_path / "a" / "1.bin", tmp_path / "b" / "1.bin", tmp_path / "b" / "3.bin", tmp_path / "b" / "4.bin",
             tmp_path / "c" / "2.bin", tmp_path / "c" / "1.bin", tmp_path / "a" / "missing.bin"]
    assert _real_paths(paths) == [os.path.realpath(p) for p in paths]
    assert len(set(_real_paths(paths[:3]))) == 1
