"""Event datasets download from a (local) HTTP server, are checked, resumed and unpacked where the loaders look."""
import hashlib
import io
import tarfile
import zipfile

import pytest

pytest.importorskip("pooch")

from local_http import serve  # noqa: E402
from plif.cli.main import main  # noqa: E402
from plif.data import event_download as ed  # noqa: E402
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


@pytest.fixture
def nmnist_server(monkeypatch):
    zips = {split: _zip_bytes({f"{split}/{d}/{i:05d}.bin": _nmnist_bin(4000 + i, d) for d in range(10) for i in range(2)})
            for split in ("Train", "Test")}  # 400 kB each: the cut below falls after whole 64 kB blocks
    with serve({f"/{s}.zip": z for s, z in zips.items()}, cut={"/Train.zip": 150_000}) as (url, srv):
        monkeypatch.setitem(ed.EVENT_ARCHIVES, "nmnist", tuple(
            ed.Archive(f"{s}.zip", (url + "/missing", url + f"/{s}.zip"), _md5(z)) for s, z in zips.items()))
        yield srv


def test_nmnist_downloads_resumes_unpacks_and_loads(tmp_path, nmnist_server):
    lines = []
    folder = ed.download_event_dataset("nmnist", tmp_path / "nm", progress=False, log=lines.append)
    assert len(list_samples("nmnist", folder, train=True)) == 20 and len(list_samples("nmnist", folder, train=False)) == 20
    # the first mirror 404s, the cut transfer of Train.zip is resumed with a Range request
    assert [r for p, r in nmnist_server.requests if p == "/Train.zip"][-1].startswith("bytes=")
    assert sorted(p.name for p in folder.iterdir()) == [".plif-unpacked", "Test", "Train"]  # archives removed
    n = len(nmnist_server.requests)
    ed.download_event_dataset("nmnist", folder, progress=False, log=lines.append)
    assert len(nmnist_server.requests) == n and lines[-1].startswith("nmnist: already downloaded and unpacked")


def test_cli_download_and_a_checksum_mismatch(tmp_path, nmnist_server, monkeypatch, capsys):
    assert main(["data", "download", "nmnist", "--root", str(tmp_path / "a"), "--quiet", "--keep-archives"]) == 0
    assert (tmp_path / "a" / "Train.zip").is_file() and (tmp_path / "a" / "Test" / "9" / "00001.bin").is_file()
    bad = tuple(ed.Archive(a.filename, a.urls, "0" * 32) for a in ed.EVENT_ARCHIVES["nmnist"])
    monkeypatch.setitem(ed.EVENT_ARCHIVES, "nmnist", bad)
    assert main(["data", "download", "nmnist", "--root", str(tmp_path / "b"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not download Train.zip" in err and "!= expected 000" in err
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == []  # nothing half-written


def test_an_unreachable_server_is_named_once(tmp_path, monkeypatch):
    url = "http://127.0.0.1:9/Train.zip"  # the discard port: nothing listens there
    monkeypatch.setitem(ed.EVENT_ARCHIVES, "nmnist", (ed.Archive("Train.zip", (url,), "0" * 32),))
    with pytest.raises(OSError) as e:
        ed.download_event_dataset("nmnist", tmp_path, progress=False, log=lambda *_: None)
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
    ed.download_event_dataset("nmnist", tmp_path, log=lines.append)
    assert nmnist_server.requests == [] and "unpacked by hand" in lines[-1]


def test_cifar10_dvs_table_has_ten_class_zips():
    table = ed.EVENT_ARCHIVES["cifar10-dvs"]
    assert [a.filename for a in table][:2] == ["airplane.zip", "automobile.zip"] and len(table) == 10
    assert all(a.urls[0].startswith("https://ndownloader.figshare.com/files/7712") and len(a.md5) == 32 for a in table)


def test_gesture_prints_manual_steps_then_unpacks_the_archive_put_there(tmp_path, monkeypatch, capsys):
    assert main(["data", "download", "dvs128-gesture", "--root", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert "cannot be downloaded automatically" in err and "https://ibm.ent.box.com/" in err
    assert f"DvsGesture.tar.gz (md5 8a5c71fb11e24e5ca5b11866ca6c00a1) into {tmp_path / 'g'}/" in err
    assert not (tmp_path / "g").exists()  # nothing made before the file is there
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("DvsGesture/trials_to_train.txt")
        info.size = 4
        tf.addfile(info, io.BytesIO(b"none"))
    (tmp_path / "DvsGesture.tar.gz").write_bytes(buf.getvalue())
    with pytest.raises(ValueError, match="DvsGesture.tar.gz: md5 .* != expected 8a5c71fb"):
        ed.download_event_dataset("dvs128-gesture", tmp_path, log=lambda *_: None)
    monkeypatch.setitem(ed.MANUAL_ARCHIVES, "dvs128-gesture",
                        (ed.Archive("DvsGesture.tar.gz", ("https://ibm.example",), _md5(buf.getvalue())),))
    ed.download_event_dataset("dvs128-gesture", tmp_path, log=lambda *_: None)
    assert (tmp_path / "DvsGesture" / "trials_to_train.txt").read_bytes() == b"none"


def test_train_download_checks_options_first_then_fetches(tmp_path, nmnist_server, monkeypatch, capsys):
    import plif.train.run

    assert main(["train", "--dataset", "nmnist", "--data-dir", str(tmp_path / "d"), "--lr", "-1", "--download"]) == 2
    assert "--lr must be positive" in capsys.readouterr().err and nmnist_server.requests == []
    seen = []
    monkeypatch.setattr(plif.train.run, "train_status", lambda cfg, resume=False, **kw: (seen.append(cfg), None))
    assert main(["train", "--dataset", "nmnist", "--data-dir", str(tmp_path / "d"), "--download"]) == 0
    assert len(seen) == 1 and len(list_samples("nmnist", tmp_path / "d", train=True)) == 20
