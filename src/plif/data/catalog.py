"""One description per dataset of the paper: everything else (zoo, presets, CLI, readers, dataset
listers) reads its facts from here, and ``tests/data/test_catalog.py`` checks that they agree.

Modelled on Tonic's dataset class attributes (``sensor_size``, ``classes``, ...).  Pure data, no
numpy or torch, so the light event CLI can import it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DatasetSpec", "DATASETS", "STATIC", "EVENT", "get_dataset", "CIFAR10_CLASSES", "GESTURE_CLASS_NAMES",
           "default_root"]

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
GESTURE_CLASS_NAMES = ("hand clap", "right hand wave", "left hand wave", "right arm clockwise",
                   "right arm counter-clockwise", "left arm clockwise", "left arm counter-clockwise",
                   "arm roll", "air drums", "air guitar", "other gestures")


@dataclass(frozen=True)
class DatasetSpec:
    """Facts of one dataset.

    ``input_shape``: one sample (static) or one frame (event) as ``(C, H, W)``; for event data
    ``(H, W)`` is the sensor size and C = 2 polarities.  ``T``: the paper's number of time steps
    (SPEC §2).  ``network``: the paper's network (supplement Table 1); ``authors_network``: the
    network of the authors' published code where it differs; ``cpu_network``: a narrow network of
    the same form that trains in minutes on a 2-core CPU (the ``cpu`` preset).  ``sizes``:
    (train, test) sample counts of the full dataset; ``split``: how they are made; ``layout``: the
    files the loader expects under ``--data-dir`` / ``--root``.
    """

    name: str
    kind: str  # "static" or "event"
    input_shape: tuple[int, int, int]
    classes: tuple[str, ...]
    T: int
    network: str
    cpu_network: str
    sizes: tuple[int, int]
    split: str
    layout: str
    authors_network: str | None = None

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def sensor_size(self) -> tuple[int, int]:
        """``(H, W)`` of the image or event sensor."""
        return tuple(self.input_shape[1:])

    def network_string(self, authors_code: bool = False, cpu: bool = False) -> str:
        if cpu:
            return self.cpu_network
        return self.authors_network if authors_code and self.authors_network else self.network


_DIGITS = tuple(str(d) for d in range(10))
_FASHION = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
_MNIST_NET = "{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10"
_CPU_SMALL = "{c32k3s1-BN-PLIF-MPk2s2}*2-DP-FC512-PLIF-DP-FC100-PLIF-APk10s10"
# 128x128 event frames: a 4x4 average pool first (counts per 4x4 patch), then three narrow blocks
_CPU_DVS = "APk4s4-{c32k3s1-BN-PLIF-MPk2s2}*3-DP-FC512-PLIF-DP-FC%d-PLIF-APk10s10"
_IDX_LAYOUT = ("train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz], "
               "t10k-labels-idx1-ubyte[.gz] in <root>, <root>/{name}/ or <root>/{name}/raw/")

DATASETS: dict[str, DatasetSpec] = {d.name: d for d in (
    DatasetSpec("mnist", "static", (1, 28, 28), _DIGITS, 8, _MNIST_NET, _CPU_SMALL, (60000, 10000),
                "official", _IDX_LAYOUT.format(name="mnist")),
    DatasetSpec("fashion-mnist", "static", (1, 28, 28), _FASHION, 8, _MNIST_NET, _CPU_SMALL, (60000, 10000),
                "official", _IDX_LAYOUT.format(name="fashion-mnist")),
    DatasetSpec("cifar10", "static", (3, 32, 32), CIFAR10_CLASSES, 8,
                "{{c256k3s1-BN-PLIF}*3-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10", _CPU_SMALL,
                (50000, 10000), "official",
                "cifar-10-python.tar.gz or cifar-10-batches-py/ in <root> or <root>/cifar10/",
                authors_network="{{c256k3s1-BN-PLIF}*3-MPk2s2}*2-DP-FC2048-PLIF-FC100-PLIF-APk10s10"),
    DatasetSpec("nmnist", "event", (2, 34, 34), _DIGITS, 10, _MNIST_NET, _CPU_SMALL, (60000, 10000),
                "official Train / Test folders",
                "Get N-MNIST (Orchard et al. 2015, Mendeley Data record 468j46mzdv), extract Train.zip and "
                "Test.zip so that <data-dir>/Train/<digit>/*.bin and <data-dir>/Test/<digit>/*.bin exist"),
    DatasetSpec("cifar10-dvs", "event", (2, 128, 128), CIFAR10_CLASSES, 20,
                "{c128k3s1-BN-PLIF-MPk2s2}*4-DP-FC512-PLIF-DP-FC100-PLIF-APk10s10", _CPU_DVS % 100,
                (9000, 1000), "paper: first 900 files of each class by file number train, last 100 test",
                "Get CIFAR10-DVS (Li et al. 2017, the AEDAT 2.0 release) and extract the ten class folders so "
                "that <data-dir>/airplane/*.aedat ... <data-dir>/truck/*.aedat exist",
                authors_network="{c128k3s1-BN-PLIF-MPk2s2}*4-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10"),
    DatasetSpec("dvs128-gesture", "event", (2, 128, 128), GESTURE_CLASS_NAMES, 20,
                "{c128k3s1-BN-PLIF-MPk2s2}*5-DP-FC512-PLIF-DP-FC110-PLIF-APk10s10", _CPU_DVS % 110,
                (1176, 288), "official trials_to_train.txt / trials_to_test.txt",
                "Get IBM's DVS128 Gesture (DvsGesture.tar.gz) and extract it so that <data-dir>/DvsGesture/ holds "
                "user*_*.aedat, user*_*_labels.csv, trials_to_train.txt and trials_to_test.txt"),
)}

STATIC = tuple(n for n, d in DATASETS.items() if d.kind == "static")
EVENT = tuple(n for n, d in DATASETS.items() if d.kind == "event")


def get_dataset(name: str) -> DatasetSpec:
    """The description of ``name``; the error lists the valid names."""
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}") from None


def default_root() -> Path:
    """``$PLIF_DATA_ROOT`` or ``~/.cache/plif/data``: where downloads go when no root is given."""
    return Path(os.environ.get("PLIF_DATA_ROOT", Path.home() / ".cache" / "plif" / "data"))
