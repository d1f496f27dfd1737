import hashlib

import pytest

pytest.importorskip("pooch")

from local_http import serve  # noqa: E402
from plif.data.download import download_file, file_md5  # noqa: E402


def _blob(n=300_000, seed=3):
    return bytes((i * 7 + seed + i // 251) % 256 for i in range(n))


def _md5(b):
    return hashlib.md5(b).hexdigest()


def test_download_writes_the_file_with_its_checksum(tmp_path):
    data = _blob()
    with serve({"/d/train.gz": data}) as (url, srv):
        path = download_file([url + "/d/train.gz"], tmp_path / "cache" / "train.gz", _md5(data), progress=False)
    assert path == tmp_path / "cache" / "train.gz" and path.read_bytes() == data
    assert file_md5(path) == _md5(data)
    assert srv.requests == [("/d/train.gz", None)]
    assert sorted(p.name for p in path.parent.iterdir()) == ["train.gz"]  # no temporary or .part left


def test_an_interrupted_transfer_resumes_with_a_range_request(tmp_path):
    data, cut = _blob(), 123_457
    with serve({"/f.bin": data}, cut={"/f.bin": cut}) as (url, srv):
        path = download_file([url + "/f.bin"], tmp_path / "f.bin", _md5(data), progress=False)
    assert path.read_bytes() == data
    (first, no_range), (second, asked) = srv.requests
    assert first == second == "/f.bin" and no_range is None
    start = int(asked.removeprefix("bytes=").removesuffix("-"))
    assert 0 < start <= cut  # resumed from what had been kept (whole received blocks), not from 0


def test_a_part_left_by_an_earlier_run_is_resumed(tmp_path):
    data = _blob()
    (tmp_path / "f.bin.part").write_bytes(data[:1000])
    with serve({"/f.bin": data}) as (url, srv):
        download_file([url + "/f.bin"], tmp_path / "f.bin", _md5(data), progress=False)
    assert (tmp_path / "f.bin").read_bytes() == data and srv.requests == [("/f.bin", "bytes=1000-")]
    assert not (tmp_path / "f.bin.part").exists()


def test_a_server_without_range_support_restarts_the_file(tmp_path):
    data = _blob()
    (tmp_path / "f.bin.part").write_bytes(b"stale bytes from somewhere else")
    with serve({"/f.bin": data}, ranges=False) as (url, srv):
        download_file([url + "/f.bin"], tmp_path / "f.bin", _md5(data), progress=False)
    assert (tmp_path / "f.bin").read_bytes() == data


def test_a_partial_answer_for_the_wrong_range_is_not_appended(tmp_path):
    data = _blob()
    (tmp_path / "f.bin.part").write_bytes(data[:1000])
    with serve({"/f.bin": data}, wrong_range=True) as (url, srv):
        download_file([url + "/f.bin"], tmp_path / "f.bin", _md5(data), progress=False)
    assert (tmp_path / "f.bin").read_bytes() == data
    assert [r for _, r in srv.requests] == ["bytes=1000-", None]  # refused, then the whole file


def test_hash_mismatch_is_a_clear_error_and_leaves_no_file(tmp_path):
    data = _blob()
    with serve({"/f.bin": data}) as (url, srv):
        with pytest.raises(OSError) as e:
            download_file([url + "/f.bin"], tmp_path / "f.bin", "0" * 32, progress=False)
    msg = str(e.value)
    assert f"{url}/f.bin" in msg and f"md5 {_md5(data)} != expected {'0' * 32}" in msg
    assert list(tmp_path.iterdir()) == []


def test_mirrors_are_tried_in_turn_and_every_failure_is_reported(tmp_path):
    data = _blob(5000)
    with serve({"/ok.bin": data}) as (url, srv):
        path = download_file([url + "/missing.bin", url + "/ok.bin"], tmp_path / "x.bin", _md5(data), progress=False)
        assert path.read_bytes() == data
        with pytest.raises(OSError, match="404.*; .*404"):
            download_file([url + "/a", url + "/b"], tmp_path / "y.bin", None, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.bin"]


def test_a_url_pooch_cannot_fetch_is_reported_as_such(tmp_path):
    with pytest.raises(OSError, match=r"^nonsense://x/f\.bin: .*(protocol|nonsense)"):
        download_file(["nonsense://x/f.bin"], tmp_path / "f.bin", "0" * 32, progress=False)
    assert list(tmp_path.iterdir()) == []
