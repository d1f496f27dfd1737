"""Archives unpack only when every member is safe, and only whole: traversal, links and bombs are refused."""
import io
import stat
import tarfile
import zipfile

import pytest

from plif.data.archive import ArchiveError, Limits, extract_archive


def _zip(path, members, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_unpacks_into_place_and_leaves_no_temporary(tmp_path):
    a = _zip(tmp_path / "a.zip", {"Train/0/1.bin": b"abc", "Train/1/2.bin": b"de", "Train/empty/": b""})
    made = extract_archive(a, tmp_path / "out")
    assert made == [tmp_path / "out" / "Train"]
    assert (tmp_path / "out/Train/0/1.bin").read_bytes() == b"abc" and (tmp_path / "out/Train/empty").is_dir()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["Train"]


@pytest.mark.parametrize("name", ["../evil.txt", "a/../../evil.txt", "/etc/evil.txt", "C:/evil.txt", "a\\..\\evil.txt"])
def test_path_traversal_is_refused_before_anything_is_written(tmp_path, name):
    a = _zip(tmp_path / "a.zip", {"ok/x.bin": b"1", name: b"2"})
    with pytest.raises(ArchiveError, match="refused"):
        extract_archive(a, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == [] and not (tmp_path / "evil.txt").exists()


def test_symlink_members_are_refused(tmp_path):
    a = tmp_path / "a.zip"
    with zipfile.ZipFile(a, "w") as z:
        info = zipfile.ZipInfo("cls/link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, "/etc/passwd")
    with pytest.raises(ArchiveError, match="'cls/link' is a link or special file"):
        extract_archive(a, tmp_path / "out")
    t = tmp_path / "a.tar"
    with tarfile.open(t, "w") as tf:
        info = tarfile.TarInfo("DvsGesture/link")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(info)
    with pytest.raises(ArchiveError, match="'DvsGesture/link' is a link"):
        extract_archive(t, tmp_path / "out")


def test_zip_bomb_and_size_caps(tmp_path):
    bomb = _zip(tmp_path / "bomb.zip", {"c/zeros.bin": bytes(4 << 20)}, zipfile.ZIP_DEFLATED)
    with pytest.raises(ArchiveError, match=r"'c/zeros.bin' expands [\d,]+ times .* more than 200; refused"):
        extract_archive(bomb, tmp_path / "out")
    a = _zip(tmp_path / "a.zip", {"c/1": b"x" * 600, "c/2": b"y" * 600})
    with pytest.raises(ArchiveError, match="unpacks to 1,200 bytes, more than the limit of 1,000"):
        extract_archive(a, tmp_path / "out", Limits(max_bytes=1000))
    with pytest.raises(ArchiveError, match="3 members, more than the limit of 2"):
        extract_archive(_zip(tmp_path / "b.zip", {"c/1": b"", "c/2": b"", "c/3": b""}), tmp_path / "out",
                        Limits(max_members=2))
    assert list((tmp_path / "out").iterdir()) == []


def test_a_member_larger_than_declared_stops_and_cleans_up(tmp_path):
    a = _zip(tmp_path / "a.zip", {"c/1.bin": b"0123456789"})
    raw = a.read_bytes()
    # the central directory and local header both say 10 bytes; make them say 4 (a lying header)
    raw = raw.replace((10).to_bytes(4, "little") * 2, (10).to_bytes(4, "little") + (4).to_bytes(4, "little"))
    a.write_bytes(raw)
    with pytest.raises(ArchiveError, match="'c/1.bin'"):
        extract_archive(a, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_existing_entries_are_not_overwritten_and_garbage_is_named(tmp_path):
    a = _zip(tmp_path / "a.zip", {"airplane/1.aedat": b"new"})
    (tmp_path / "out" / "airplane").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="airplane already exist"):
        extract_archive(a, tmp_path / "out")
    (tmp_path / "junk.zip").write_bytes(b"not an archive at all")
    with pytest.raises(ArchiveError, match="junk.zip: neither a zip nor a tar archive"):
        extract_archive(tmp_path / "junk.zip", tmp_path / "o2")
    truncated = tmp_path / "t.zip"
    truncated.write_bytes(a.read_bytes()[:30])
    with pytest.raises(ArchiveError):
        extract_archive(truncated, tmp_path / "o3")


def test_tar_gz_unpacks(tmp_path):
    t = tmp_path / "DvsGesture.tar.gz"
    with tarfile.open(t, "w:gz") as tf:
        info = tarfile.TarInfo("DvsGesture/trials_to_train.txt")
        info.size = 3
        tf.addfile(info, io.BytesIO(b"abc"))
    extract_archive(t, tmp_path / "g")
    assert (tmp_path / "g/DvsGesture/trials_to_train.txt").read_bytes() == b"abc"


def test_two_members_with_one_name_are_refused(tmp_path):
    """Which copy would land on disk depends on the unpacker: refused before anything is written."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns "Duplicate name" while writing the test archive
        dup = _zip(tmp_path / "dup.zip", {"a/x.bin": b"1", "a/./x.bin": b"2"})
    with pytest.raises(ArchiveError, match="dup.zip: two members named 'a/x.bin'"):
        extract_archive(dup, tmp_path / "out")
    nested = _zip(tmp_path / "nested.zip", {"a/x": b"1", "a/x/y.bin": b"2"})
    with pytest.raises(ArchiveError, match="'a/x' is a file, and member 'a/x/y.bin' is inside it"):
        extract_archive(nested, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []
    ok = _zip(tmp_path / "ok.zip", {"a/": b"", "a/x.bin": b"1"})  # a folder listed twice is harmless
    with warnings.catch_warnings(), zipfile.ZipFile(ok, "a") as z:
        warnings.simplefilter("ignore")
        z.writestr("a/", b"")
    assert extract_archive(ok, tmp_path / "out") == [tmp_path / "out" / "a"]


def test_required_members_are_checked_before_unpacking(tmp_path):
    a = _zip(tmp_path / "a.zip", {"Train/0/1.bin": b"1", "Train/1/x.txt": b"2"})
    with pytest.raises(ArchiveError, match=r"holds no file like 'Train/1/\*.bin' \(1 of the 2 entries needed"):
        extract_archive(a, tmp_path / "out", require=("Train/0/*.bin", "Train/1/*.bin"))
    assert list((tmp_path / "out").iterdir()) == []
    assert extract_archive(a, tmp_path / "out", require=("Train/*/*.bin", "Train/1/*.txt")) == [tmp_path / "out" / "Train"]
