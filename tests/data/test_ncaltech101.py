"""N-Caltech101, added as one record: ATIS .bin files up to 240x180, 101 class folders (the background
class included), the first 90% of each class by file number train; ``plif train --dataset ncaltech101``."""
import numpy as np
import pytest

from plif.catalog import ATIS_SENSOR, DATASETS, get_dataset
from plif.data.events.datasets import list_samples
from plif.data.events.nmnist import parse_nmnist
from plif.data.events.types import EventFormatError
from plif_testing import atis_bin, tiny_train_argv


D = DATASETS["ncaltech101"]


def test_reader_takes_the_atis_sensor_and_overflow_records():
    raw = atis_bin([(239, 179, 1, 100), (5, 240, 0, 0), (0, 0, 0, 50), (5, 240, 0, 0), (1, 2, 1, 7)])
    ev = parse_nmnist(raw, "x.bin", sensor=D.sensor_size)
    assert D.sensor_size == ATIS_SENSOR == (180, 240)  # the ATIS sensor is written once, in the catalog
    assert ev["x"].tolist() == [239, 0, 1] and ev["y"].tolist() == [179, 0, 2] and ev["p"].tolist() == [1, 0, 1]
    assert ev["t"].tolist() == [100, 50 + 8192, 7 + 2 * 8192]  # each overflow record adds 2**13 us
    with pytest.raises(EventFormatError, match="x=239, y=179 outside the 34x34 sensor"):
        parse_nmnist(raw, "x.bin")  # N-MNIST's sensor stays the default


@pytest.fixture
def caltech(tmp_path, monkeypatch):
    """Caltech101/<class>/image_XXXX.bin: ten files in 'accordion', one in every other class."""
    monkeypatch.setenv("PLIF_DATA_ROOT", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    for cls in D.classes:
        for k in range(1, (11 if cls == "accordion" else 2)):
            t = np.sort(rng.integers(0, 300_000, 30))
            ev = [(int(rng.integers(240)), int(rng.integers(180)), int(rng.integers(2)), int(v)) for v in t]
            f = tmp_path / "Caltech101" / cls / f"image_{k:04d}.bin"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(atis_bin(ev))
    (tmp_path / "Caltech101" / "accordion" / "notes.txt").write_text("not an event file")
    return tmp_path


def test_layout_classes_and_split(caltech):
    train, test = list_samples(D, caltech, True), list_samples(D, caltech, False)
    assert len(D.classes) == 101 and D.classes[:2] == ("BACKGROUND_Google", "Faces_easy")
    acc = D.classes.index("accordion")
    names = lambda samples: [s.path.rsplit("/", 1)[1] for s in samples if s.label == acc]
    assert names(train) == [f"image_{k:04d}.bin" for k in range(1, 10)]  # by number: 0010 is last
    assert names(test) == ["image_0010.bin"]
    assert {s.label for s in train} == set(range(101))  # BACKGROUND_Google is class 0
    assert len(train) == 9 + 100 and len(test) == 1  # ceil(0.9 * 1) = 1 train file
    assert list_samples(D, caltech / "Caltech101", True) == train  # the folder or its parent


def test_split_is_spikingjelly_ceil_of_ninety_percent(tmp_path):
    """SpikingJelly's split_to_train_test_set (train_ratio=0.9, unshuffled), which the docs name: the first
    ceil(0.9 n) files of each class train.  A class of 5 splits 5/0 (no test sample), 47 splits 43/4."""
    sizes = {"accordion": 5, "airplanes": 47, "anchor": 10, "ant": 9}
    for cls in D.classes:
        for k in range(1, sizes.get(cls, 1) + 1):
            f = tmp_path / "Caltech101" / cls / f"image_{k:04d}.bin"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.touch()
    train, test = list_samples(D, tmp_path, True), list_samples(D, tmp_path, False)
    for cls, (n_train, n_test) in {"accordion": (5, 0), "airplanes": (43, 4), "anchor": (9, 1), "ant": (9, 0),
                                   "bass": (1, 0)}.items():
        label = D.classes.index(cls)
        assert (sum(s.label == label for s in train), sum(s.label == label for s in test)) == (n_train, n_test), cls
    from plif.data.events.datasets import train_count

    assert train_count(1000, 0.9) == 900 and train_count(100, 0.55) == 55  # 0.55 * 100 is 55.00000000000001


def test_classes_too_small_for_a_test_sample_are_named_with_the_size_the_split_needs(tmp_path, capsys):
    """The folders are there, every class below 10 files: the message says the split rule, not "extract
    Caltech101.zip" (issue 40)."""
    from plif.cli.main import main

    for cls in D.classes:
        for k in range(1, (7 if cls == "ant" else 3)):
            f = tmp_path / "Caltech101" / cls / f"image_{k:04d}.bin"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.touch()
    assert len(list_samples(get_dataset("ncaltech101"), tmp_path, True)) == 100 * 2 + 6
    want = (f"ncaltech101: no test samples under {tmp_path / 'Caltech101'}: of each class's n recordings the first "
            "ceil(0.9·n) by file number train, the rest test; the largest class here, ant, has 6, and a class needs "
            "at least 10 recordings to give one test sample")
    with pytest.raises(ValueError) as e:
        list_samples(get_dataset("ncaltech101"), tmp_path, False)
    assert str(e.value) == want
    with pytest.raises(ValueError, match="at a train fraction of 1 no class gives a test sample"):
        list_samples(get_dataset("ncaltech101"), tmp_path, False, train_fraction=1.0)
    assert len(list_samples(get_dataset("ncaltech101"), tmp_path, False, train_fraction=0.5)) == 100 + 3
    assert main(["data", "prepare", "ncaltech101", "--data-dir", str(tmp_path), "--test-only", "--T", "2"]) == 2
    err = capsys.readouterr().err
    assert err == f"plif data: error: {want}\n" and "extract" not in err


def test_plif_train_ncaltech101(caltech, tmp_path, capsys):
    """The dataset's own CPU network (CIFAR10-DVS's form, 1010 voting outputs) trains end to end on
    the whole sensor, 16 of the 109 training files and the one test file."""
    import json

    from plif.cli.main import main
    from plif.runs import read_metrics
    from plif.train.config import TrainConfig, resolve_config

    paper = resolve_config(TrainConfig(dataset="ncaltech101", preset="paper"))
    assert paper.network == DATASETS["cifar10-dvs"].network.replace("FC100-", "FC1010-") and paper.T == 20
    out = tmp_path / "run"
    capsys.readouterr()
    assert main(tiny_train_argv(caltech, out, dataset="ncaltech101", network=None, epochs=1, batch_size=8,
                                max_train_samples=16)) == 0
    assert "ncaltech101: 16 train, 0 val, 1 test samples on cpu" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["network"] == D.cpu_network and "FC1010-PLIF-APk10s10" in D.cpu_network
    assert config["num_classes"] == 101 and tuple(config["input_shape"]) == (2, 180, 240)
    (m,) = read_metrics(out)
    assert m["epoch"] == 1 and m["test_acc"] in (0.0, 1.0) and np.isfinite(m["train_loss"])  # one test file
    assert len(m["firing_rates"]) == 5  # {c-BN-PLIF-MP}*3 and two FC-PLIF


def test_a_recording_may_begin_with_the_byte_of_a_hash(tmp_path):
    """x = 35 is '#': an N-Caltech101 file is still events, not a refused text header."""
    from plif.data.events.detect import read_events

    f = tmp_path / "image_0001.bin"
    f.write_bytes(atis_bin([(35, 33, 1, 10), (200, 150, 0, 20)]))
    assert read_events(f, sensor_size=D.sensor_size)["x"].tolist() == [35, 200]


def test_text_is_not_an_atis_recording(tmp_path):
    """ATIS .bin has no magic number and ASCII fits the 240x180 sensor, so time order tells text apart:
    a recording's timestamps never go backwards (the overflow records count on it)."""
    text = b"N-Caltech101 recordings are binary; this line of text is not one. It is 100 bytes long, see here!!!\n"
    assert len(text) % 5 == 0
    f = tmp_path / "image_0001.bin"
    f.write_bytes(text)
    with pytest.raises(EventFormatError, match=r"image_0001.bin: byte offset 10: not an ATIS recording: its time goes "
                                               r"backwards at event 2 \(\d+ us after \d+ us; 10 such\)"):
        parse_nmnist(text, f, sensor=D.sensor_size)
    from plif.cli.main import main

    assert main(["data", "frames", str(f), "--T", "2", "--sensor", "180,240", "--out", str(tmp_path / "o.npy")]) == 2
    assert not (tmp_path / "o.npy").exists()


def test_info_takes_the_sensor_it_is_given_and_frames_suggest_it(tmp_path, capsys):
    """--sensor replaces the stated size for info as for frames; a header-less file that does not fit
    N-MNIST's 34x34 is answered with the option that reads it."""
    import json

    from plif.cli.main import main

    f = tmp_path / "image_0001.bin"
    f.write_bytes(atis_bin([(239, 179, 1, 10), (3, 4, 0, 20)]))
    assert main(["data", "info", str(f), "--sensor", "180,240", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["events"] == 2 and info["sensor_size"] == [180, 240] and info["observed_size"] == [180, 240]
    for argv in (["data", "frames", str(f), "--T", "2", "--out", str(tmp_path / "o.npy")], ["data", "info", str(f)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "outside the 34x34 sensor" in err and "give its sensor size: --sensor H,W (N-Caltech101: --sensor 180,240)" in err
        assert len(err.strip().splitlines()) == 1
    assert main(["data", "info", str(f), "--sensor", "100,100"]) == 2  # the given size is still checked
    assert "x=239, y=179 do not fit sensor (H, W) = (100, 100)" in capsys.readouterr().err
