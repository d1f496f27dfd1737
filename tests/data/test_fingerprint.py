"""A file's fingerprint: the edges hash reads at most 128 KiB and sees the size; byte-identical
files of two lists are found by size first and read only when alike."""
import hashlib
import os

from plif.data.events import fingerprint
from plif.data.events.fingerprint import EDGE, edges_hash, file_hash, same_bytes, same_content


def _write(p, data: bytes):
    p.write_bytes(data)
    return p


def test_edges_cover_a_small_file_whole_and_a_large_ones_ends(tmp_path):
    small = bytes(range(256)) * (2 * EDGE // 256)  # exactly two edges: every byte counts
    a = _write(tmp_path / "a", small)
    b = _write(tmp_path / "b", small[:EDGE] + b"\x01" + small[EDGE + 1:])
    assert edges_hash(a) != edges_hash(b)
    large = os.urandom(3 * EDGE)
    c = _write(tmp_path / "c", large)
    middle = _write(tmp_path / "d", large[:EDGE + 5] + bytes([large[EDGE + 5] ^ 1]) + large[EDGE + 6:])
    end = _write(tmp_path / "e", large[:-1] + bytes([large[-1] ^ 1]))
    assert edges_hash(c) == edges_hash(middle) and file_hash(c) != file_hash(middle)  # what only verify sees
    assert edges_hash(c) != edges_hash(end)
    assert edges_hash(_write(tmp_path / "f", b"\0" * 10)) != edges_hash(_write(tmp_path / "g", b"\0" * 11))


def test_an_edit_with_the_stat_put_back_fails_the_content_check(tmp_path):
    f = _write(tmp_path / "r.bin", b"abcdef" * 1000)
    fp = fingerprint.fingerprint(f)
    st = f.stat()
    with open(f, "r+b") as out:
        out.write(b"X")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert fingerprint.file_stat(f) == fp["stat"]
    assert not same_content(f, fp)


def test_same_bytes_compares_sizes_then_hashes_only_the_alike(tmp_path, monkeypatch):
    ours = [_write(tmp_path / "a1", b"one"), _write(tmp_path / "a2", b"three"), _write(tmp_path / "a3", b""),
            _write(tmp_path / "a4", b"sevens!")]
    theirs = [_write(tmp_path / "b1", b"two"), _write(tmp_path / "b2", b"three"), _write(tmp_path / "b3", b""),
              _write(tmp_path / "b4", b"three")]
    hashed = []
    for name in ("_head_hash", "file_hash"):
        real = getattr(fingerprint, name)
        monkeypatch.setattr(fingerprint, name, lambda p, real=real: hashed.append(os.path.basename(p)) or real(p))
    assert same_bytes(ours, theirs) == [(str(tmp_path / "a2"), str(tmp_path / "b2"))]
    # a4 (no file of its size) and the empty files are never read; b1 ("two") differs from a1 in its head
    assert hashed.count("a1") == hashed.count("b1") == 1 and set(hashed) == {"a1", "a2", "b1", "b2", "b4"}
    assert same_bytes(ours[:1], theirs[2:]) == []
    sizes = {str(p): os.path.getsize(p) for p in ours + theirs}
    with monkeypatch.context() as m:
        m.setattr(fingerprint.os, "stat", None)  # the sizes the caller stat'ed are not stat'ed again
        assert same_bytes(ours, theirs, sizes) == [(str(tmp_path / "a2"), str(tmp_path / "b2"))]


def _old_file_hash(path):  # fingerprint.file_hash as it was before file_hashes (fad3546)
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _old_edges_hash(path):  # fingerprint.edges_hash as it was before file_hashes (fad3546)
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        h.update(size.to_bytes(8, "little"))
        h.update(f.read(EDGE))
        if size > 2 * EDGE:
            f.seek(size - EDGE)
        h.update(f.read(EDGE))
    return h.hexdigest()


def test_one_pass_gives_the_digests_of_the_two_reads_it_replaced(tmp_path):
    """What meta.json records (and every cache built before keeps) is unchanged: sizes at and around
    the edges, and files of several 1 MiB blocks whose last edge starts in one block and ends in the next."""
    block = 1 << 20
    data = os.urandom(3 * block + EDGE)
    for n in (0, 1, EDGE - 1, EDGE, EDGE + 1, 2 * EDGE - 1, 2 * EDGE, 2 * EDGE + 1, 3 * EDGE, block,
              block + EDGE // 2, 3 * block + 17):
        f = _write(tmp_path / f"{n}.bin", data[:n])
        want = (_old_file_hash(f), _old_edges_hash(f))
        assert fingerprint.file_hashes(f) == want and (file_hash(f), edges_hash(f)) == want, n
        assert fingerprint.fingerprint(f) == {"stat": fingerprint.file_stat(f), "hash": want[0], "edges": want[1]}
