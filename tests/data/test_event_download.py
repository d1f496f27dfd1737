"""Event datasets download from a (local) HTTP server, are checked, resumed and unpacked where the loaders look.

The archives are the dataset records' (plif.catalog); the tests point their URLs and MD5 sums at a
local server."""
import hashlib
import io
import tarfile
import zipfile
from dataclasses import replace

import pytest

pytest.importorskip("pooch")

from local_http import serve  # noqa: E402
from plif.cli.main import main  # noqa: E402
from plif.data import event_download as ed  # noqa: E402
from plif.data.archive import ArchiveError  # noqa: E402
from plif.catalog import DATASETS, NCALTECH101_CLASSES, get_dataset  # noqa: E402
from plif.data.events.datasets import list_samples  # noqa: E402


def _nmnist_bin(n_events: int, x: int) -> bytes:
    """N-MNIST events: x, y, polarity bit 7 + 23-bit time."""
    return b"".join(bytes([x, 3, 0x80, t >> 8, t & 255]) for t in range(n_events))


def _zip_bytes(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _md5(b):
    return hashlib.md5(b).hexdigest()


def _serve_archives(monkeypatch, name, url, blobs: dict, mirrors=()):
    """Point the record's archives at ``url/<file>`` (after ``mirrors``) with the MD5 of ``blobs[file]``."""
    archives = tuple(replace(a, urls=(*mirrors, f"{url}/{a.filename}"), md5=_md5(blobs[a.filename]))
                     for a in DATASETS[name].archives)
    monkeypatch.setitem(DATASETS, name, replace(DATASETS[name], archives=archives))


@pytest.fixture
def nmnist_server(monkeypatch):
    zips = {split: _zip_bytes({f"{split}/{d}/{i:05d}.bin": _nmnist_bin(4000 + i, d) for d in range(10) for i in range(2)})
            for split in ("Train", "Test")}  # 400 kB each: the cut below falls after whole 64 kB blocks
    with serve({f"/{s}.zip": z for s, z in zips.items()}, cut={"/Train.zip": 150_000}) as (url, srv):
        _serve_archives(monkeypatch, "nmnist", url, {f"{s}.zip": z for s, z in zips.items()}, (url + "/missing",))
        yield srv


def test_nmnist_downloads_resumes_unpacks_and_loads(tmp_path, nmnist_server):
    lines = []
    folder = ed.download_event_dataset(get_dataset("nmnist"), tmp_path / "nm", progress=False, log=lines.append)
    nmnist = get_dataset("nmnist")
    assert len(list_samples(nmnist, folder, train=True)) == 20 and len(list_samples(nmnist, folder, train=False)) == 20
    # the first mirror 404s, the cut transfer of Train.zip is resumed with a Range request
    assert [r for p, r in nmnist_server.requests if p == "/Train.zip"][-1].startswith("bytes=")
    assert sorted(p.name for p in folder.iterdir()) == [".plif-unpacked", "Test", "Train"]  # archives removed
    n = len(nmnist_server.requests)
    ed.download_event_dataset(get_dataset("nmnist"), folder, progress=False, log=lines.append)
    assert len(nmnist_server.requests) == n and lines[-1].startswith("nmnist: already downloaded and unpacked")


def test_cli_download_and_a_checksum_mismatch(tmp_path, nmnist_server, monkeypatch, capsys):
    assert main(["data", "download", "nmnist", "--root", str(tmp_path / "a"), "--quiet", "--keep-archives"]) == 0
    assert (tmp_path / "a" / "Train.zip").is_file() and (tmp_path / "a" / "Test" / "9" / "00001.bin").is_file()
    bad = tuple(replace(a, md5="0" * 32) for a in DATASETS["nmnist"].archives)
    monkeypatch.setitem(DATASETS, "nmnist", replace(DATASETS["nmnist"], archives=bad))
    assert main(["data", "download", "nmnist", "--root", str(tmp_path / "b"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not download Train.zip" in err and "!= expected 000" in err
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == []  # nothing half-written


def test_an_unreachable_server_is_named_once(tmp_path, monkeypatch):
    url = "http://127.0.0.1:9/Train.zip"  # the discard port: nothing listens there
    one = (replace(DATASETS["nmnist"].archives[0], urls=(url,), md5="0" * 32),)
    monkeypatch.setitem(DATASETS, "nmnist", replace(DATASETS["nmnist"], archives=one))
    with pytest.raises(OSError) as e:
        ed.download_event_dataset(get_dataset("nmnist"), tmp_path, progress=False, log=lambda *_: None)
    msg = str(e.value)
    assert msg.count(url) == 1 and "attempts failed" in msg and "nothing received" in msg
    assert [p.name for p in tmp_path.iterdir()] == []


def test_a_dataset_unpacked_by_hand_is_not_downloaded_again(tmp_path, nmnist_server):
    for split in ("Train", "Test"):
        for d in range(10):
            f = tmp_path / split / str(d) / "1.bin"
            f.parent.mkdir(parents=True)
            f.write_bytes(_nmnist_bin(3, d))
    lines = []
    ed.download_event_dataset(get_dataset("nmnist"), tmp_path, log=lines.append)
    assert nmnist_server.requests == [] and "unpacked by hand" in lines[-1]


def test_cifar10_dvs_record_has_ten_class_zips():
    table = DATASETS["cifar10-dvs"].archives
    assert [a.filename for a in table][:2] == ["airplane.zip", "automobile.zip"] and len(table) == 10
    assert all(a.urls[0].startswith("https://ndownloader.figshare.com/files/7712") and len(a.md5) == 32 for a in table)
    assert table[0].holds == ("airplane/*.aedat",)


def test_every_event_record_says_how_to_get_its_files(capsys):
    """An event dataset's download is its record: archives with MD5s and the members they hold; the help
    texts of plif data download and plif train --download are made from the records."""
    for name, d in DATASETS.items():
        if d.is_event:
            assert d.archives and all(len(a.md5) == 32 and a.urls and a.holds for a in d.archives), name
    assert ed.download_help() == "nmnist, cifar10-dvs, ncaltech101, shd, ssc; dvs128-gesture, asl-dvs, dvs-lip: prints the manual steps"
    for argv in (["data", "--help"], ["train", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps after a hyphen
        assert "nmnist, cifar10-dvs, ncaltech101, shd, ssc; dvs128-gesture, asl-dvs, dvs-lip: prints the manual steps" in text, argv


def test_ncaltech101_downloads_from_its_record(tmp_path, monkeypatch):
    """Caltech101.zip (Tonic's Mendeley file, SpikingJelly's MD5) unpacks to Caltech101/<class>/image_XXXX.bin."""
    blob = _zip_bytes({f"Caltech101/{c}/image_{i:04d}.bin": _nmnist_bin(3, 5) for c in NCALTECH101_CLASSES
                       for i in range(1, 11 if c == "accordion" else 2)})
    assert DATASETS["ncaltech101"].archives[0].filename == "Caltech101.zip"
    assert DATASETS["ncaltech101"].archives[0].md5 == "66201824eabb0239c7ab992480b50ba3"
    with serve({"/Caltech101.zip": blob}) as (url, _):
        _serve_archives(monkeypatch, "ncaltech101", url, {"Caltech101.zip": blob})
        folder = ed.download_event_dataset(get_dataset("ncaltech101"), tmp_path / "nc", progress=False,
                                           log=lambda *_: None)
    assert len(list_samples(get_dataset("ncaltech101"), folder, train=True)) == 100 + 9  # 9 of accordion's 10 train
    assert [s.path for s in list_samples(get_dataset("ncaltech101"), folder, train=False)] == [
        str(folder / "Caltech101" / "accordion" / "image_0010.bin")]


def test_an_archive_with_the_right_md5_but_not_the_layout_is_refused(tmp_path, monkeypatch):
    """A Train.zip without Train/ is refused before it is unpacked, and nothing is stamped."""
    bad = _zip_bytes({f"Foo/{d}/1.bin": _nmnist_bin(3, d) for d in range(10)})
    good = _zip_bytes({f"Test/{d}/1.bin": _nmnist_bin(3, d) for d in range(10)})
    with serve({"/Train.zip": bad, "/Test.zip": good}) as (url, _):
        _serve_archives(monkeypatch, "nmnist", url, {"Train.zip": bad, "Test.zip": good})
        with pytest.raises(ArchiveError, match=r"Train.zip: holds no file like 'Train/0/\*.bin' \(10 of the 10 "
                                               r"entries needed are missing; its top level: Foo\)"):
            ed.download_event_dataset(get_dataset("nmnist"), tmp_path, progress=False, log=lambda *_: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Train.zip"]  # kept for a look; nothing unpacked or stamped


def test_unpacked_archives_that_the_loaders_do_not_find_are_not_called_ready(tmp_path, monkeypatch):
    """The layout is checked per archive; the whole dataset once more by the loaders, every time."""
    zips = {s: _zip_bytes({f"{s}/{d}/1.bin": _nmnist_bin(3, d) for d in range(10)}) for s in ("Train", "Test")}
    with serve({f"/{s}.zip": z for s, z in zips.items()}) as (url, _):
        _serve_archives(monkeypatch, "nmnist", url, {f"{s}.zip": z for s, z in zips.items()})
        ed.download_event_dataset(get_dataset("nmnist"), tmp_path, progress=False, log=lambda *_: None)
    (tmp_path / "Test" / "7" / "1.bin").unlink()
    with pytest.raises(ValueError, match=r"loaders do not find the dataset there now \(nmnist: no \*.bin files in "
                                         r"class folder .*7: an empty class is refused\); remove .*\.plif-unpacked"):
        ed.download_event_dataset(get_dataset("nmnist"), tmp_path, progress=False, log=lambda *_: None)


def test_gesture_prints_manual_steps_then_unpacks_the_archive_put_there(tmp_path, monkeypatch, capsys):
    assert main(["data", "download", "dvs128-gesture", "--root", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert "cannot be downloaded automatically" in err and "https://ibm.ent.box.com/" in err
    assert f"download DvsGesture.tar.gz (md5 8a5c71fb11e24e5ca5b11866ca6c00a1) into {tmp_path / 'g'}/" in err
    assert "(IBM's box folder needs a browser)" in err  # the record's reason
    assert not (tmp_path / "g").exists()  # nothing made before the file is there
    members = {"DvsGesture/trials_to_train.txt": b"user01_natural.aedat\n",
               "DvsGesture/trials_to_test.txt": b"user02_led.aedat\n"}
    for rec in ("user01_natural", "user02_led"):
        members[f"DvsGesture/{rec}.aedat"] = b"#!AER-DAT3.1\r\n#!END-HEADER\r\n"
        members[f"DvsGesture/{rec}_labels.csv"] = b"class,startTime_usec,endTime_usec\n1,0,10\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    (tmp_path / "DvsGesture.tar.gz").write_bytes(buf.getvalue())
    with pytest.raises(ValueError, match="DvsGesture.tar.gz: md5 .* != expected 8a5c71fb"):
        ed.download_event_dataset(get_dataset("dvs128-gesture"), tmp_path, log=lambda *_: None)
    _serve_archives(monkeypatch, "dvs128-gesture", "https://ibm.example", {"DvsGesture.tar.gz": buf.getvalue()})
    ed.download_event_dataset(get_dataset("dvs128-gesture"), tmp_path, log=lambda *_: None)
    assert (tmp_path / "DvsGesture" / "trials_to_train.txt").read_bytes() == b"user01_natural.aedat\n"


def test_train_download_checks_options_first_then_fetches(tmp_path, nmnist_server, monkeypatch, capsys):
    import plif.train.run

    assert main(["train", "--dataset", "nmnist", "--data-dir", str(tmp_path / "d"), "--lr", "-1", "--download"]) == 2
    assert "--lr must be positive" in capsys.readouterr().err and nmnist_server.requests == []
    seen = []
    monkeypatch.setattr(plif.train.run, "train_status", lambda cfg, resume=False, **kw: (seen.append(cfg), None))
    assert main(["train", "--dataset", "nmnist", "--data-dir", str(tmp_path / "d"), "--download"]) == 0
    assert len(seen) == 1 and len(list_samples(get_dataset("nmnist"), tmp_path / "d", train=True)) == 20


def test_folders_of_the_right_names_holding_no_event_files_are_never_called_ready(tmp_path, monkeypatch):
    """Issue 45: such a download was stamped ready, and only the next prepare refused it.  A sample of
    each split's recordings is read first; a second call refuses it too instead of 'already downloaded'."""
    zips = {split: _zip_bytes({f"{split}/{d}/{i:05d}.bin": (_nmnist_bin(50, d) if i else b"<html>not found</html>\n")
                               for d in range(10) for i in range(2)}) for split in ("Train", "Test")}
    with serve({f"/{s}.zip": z for s, z in zips.items()}) as (url, _):
        _serve_archives(monkeypatch, "nmnist", url, {f"{s}.zip": z for s, z in zips.items()})
        lines = []
        with pytest.raises(ValueError) as e:
            ed.download_event_dataset(get_dataset("nmnist"), tmp_path / "nm", progress=False, log=lines.append)
    first = str(tmp_path / "nm" / "Train" / "0" / "00000.bin")
    assert "the loaders do not find the dataset" in str(e.value) and first in str(e.value)
    assert "not a recognised event file" in str(e.value) and not any("ready" in ln for ln in lines)
    with pytest.raises(ValueError, match="the archives were unpacked .* but the loaders do not find the dataset"):
        ed.download_event_dataset(get_dataset("nmnist"), tmp_path / "nm", progress=False, log=lines.append)


def test_the_sample_read_spreads_over_the_list():
    assert ed._spread(list("abcdefg"), 3) == ["a", "d", "g"] and ed._spread(list("ab"), 3) == ["a", "b"]
    assert ed._spread(list("abc"), 1) == ["a"]


def test_shd_downloads_its_zipped_splits_and_loads_them(tmp_path, monkeypatch):
    """SHD's archives are the published shd_*.h5.zip, each holding its split's one HDF5 file."""
    pytest.importorskip("h5py")
    from plif_testing import write_shd

    files = write_shd(tmp_path / "made", train=6, test=3)
    zips = {f"{n}.zip": _zip_bytes({n: (files / n).read_bytes()}) for n in ("shd_train.h5", "shd_test.h5")}
    with serve({f"/{k}": v for k, v in zips.items()}) as (url, _):
        _serve_archives(monkeypatch, "shd", url, zips)
        folder = ed.download_event_dataset(get_dataset("shd"), tmp_path / "shd", progress=False, log=lambda *a: None)
    shd = get_dataset("shd")
    assert [s.index for s in list_samples(shd, folder, train=True)] == list(range(6))
    assert len(list_samples(shd, folder, train=False)) == 3


def test_a_download_whose_recordings_are_all_empty_is_never_called_ready(tmp_path, monkeypatch):
    """Issue 53.10: recordings of 0 bytes read as no events and no error, so such a download was called
    ready; the second call refuses it too instead of 'already downloaded'."""
    zips = {split: _zip_bytes({f"{split}/{d}/{i:05d}.bin": b"" for d in range(10) for i in range(2)})
            for split in ("Train", "Test")}
    with serve({f"/{s}.zip": z for s, z in zips.items()}) as (url, _):
        _serve_archives(monkeypatch, "nmnist", url, {f"{s}.zip": z for s, z in zips.items()})
        lines = []
        with pytest.raises(ValueError) as e:
            ed.download_event_dataset(get_dataset("nmnist"), tmp_path / "nm", progress=False, log=lines.append)
    assert "the loaders do not find the dataset" in str(e.value) and "empty (0 bytes), not a recording" in str(e.value)
    assert "\n" not in str(e.value) and not any("ready" in ln for ln in lines)
    with pytest.raises(ValueError, match="the archives were unpacked .* but the loaders do not find the dataset"):
        ed.download_event_dataset(get_dataset("nmnist"), tmp_path / "nm", progress=False, log=lines.append)
