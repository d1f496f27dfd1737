import gzip
import hashlib

import numpy as np
import pytest

from plif.data.idx import read_idx
from plif_testing import idx_bytes


@pytest.fixture
def images():
    return np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)


def test_raw_and_gzip_read_byte_exact(tmp_path, images):
    raw = idx_bytes(images)
    assert raw[:4] == b"\x00\x00\x08\x03" and raw[4:8] == b"\x00\x00\x00\x02" and len(raw) == 16 + 24
    (tmp_path / "a").write_bytes(raw)
    (tmp_path / "b.idx").write_bytes(gzip.compress(raw))  # gzip detected by content, not name
    for name in ("a", "b.idx"):
        out = read_idx(tmp_path / name, expect_type=0x08, expect_ndim=3)
        assert out.dtype == np.uint8 and out.shape == (2, 3, 4)
        np.testing.assert_array_equal(out, images)


def test_labels_and_wider_types(tmp_path):
    labels = np.array([7, 2, 1, 0], dtype=np.uint8)
    (tmp_path / "l").write_bytes(idx_bytes(labels))
    np.testing.assert_array_equal(read_idx(tmp_path / "l", 0x08, 1), labels)
    ints = np.array([[1, -2], [70000, 3]], dtype=np.int32)
    (tmp_path / "i").write_bytes(idx_bytes(ints, 0x0C))
    out = read_idx(tmp_path / "i")
    assert out.dtype == np.dtype("i4") and out.dtype.isnative
    np.testing.assert_array_equal(out, ints)


def test_truncated_payload_names_offset(tmp_path, images):
    (tmp_path / "t").write_bytes(idx_bytes(images)[:-5])
    with pytest.raises(ValueError, match=r"t: payload truncated: 19 bytes from byte offset 16, expected 24"):
        read_idx(tmp_path / "t")
    (tmp_path / "x").write_bytes(idx_bytes(images) + b"\0")
    with pytest.raises(ValueError, match="trailing"):
        read_idx(tmp_path / "x")


def test_truncated_header_and_bad_magic(tmp_path, images):
    (tmp_path / "h").write_bytes(idx_bytes(images)[:10])
    with pytest.raises(ValueError, match=r"truncated at byte offset 10: header with 3 sizes needs 16"):
        read_idx(tmp_path / "h")
    (tmp_path / "m").write_bytes(b"\x00\x01\x08\x03" + idx_bytes(images)[4:])
    with pytest.raises(ValueError, match=r"bad IDX magic 0x00010803 at byte offset 0"):
        read_idx(tmp_path / "m")
    (tmp_path / "g").write_bytes(gzip.compress(b"\x00\x00\x07\x01" + bytes(8)))
    with pytest.raises(ValueError, match=r"decompressed byte offset 0"):
        read_idx(tmp_path / "g")
    (tmp_path / "s").write_bytes(b"\x00\x00")
    with pytest.raises(ValueError, match="truncated at byte offset 2"):
        read_idx(tmp_path / "s")


def test_expectations_and_broken_gzip(tmp_path, images):
    (tmp_path / "a").write_bytes(idx_bytes(images))
    with pytest.raises(ValueError, match="3 dimensions.*expected 1"):
        read_idx(tmp_path / "a", expect_ndim=1)
    (tmp_path / "z").write_bytes(gzip.compress(idx_bytes(images))[:-12])
    with pytest.raises(ValueError, match="z: corrupt or truncated gzip"):
        read_idx(tmp_path / "z")


def test_real_mnist_test_split(shared_data):
    d = shared_data("mnist_idx")
    labels = read_idx(d / "t10k-labels-idx1-ubyte.gz", 0x08, 1)
    assert labels.shape == (10000,) and list(labels[:8]) == [7, 2, 1, 0, 4, 1, 4, 9]
    assert list(np.bincount(labels)) == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    images = read_idx(d / "t10k-images-idx3-ubyte.gz", 0x08, 3)
    assert images.shape == (10000, 28, 28) and abs(images.mean() - 33.79) < 0.01
    raw = gzip.decompress((d / "t10k-images-idx3-ubyte.gz").read_bytes())
    assert hashlib.md5(raw).hexdigest() == "2646ac647ad5339dbf082846283269ea"
    train_labels = read_idx(d / "train-labels-idx1-ubyte.gz")
    assert train_labels.shape == (60000,) and list(train_labels[:8]) == [5, 0, 4, 1, 9, 2, 1, 3]
