"""One record per dataset: the only place a dataset's facts are written.

Everything else reads them from here: the zoo (networks, T, input shape), the presets and the CLI,
the static loaders (files, checksums, mirrors, normalisation), the augmentations, the event
listers (folders, class order, split) and readers (options), and the paper's reported accuracies.
Code that differs per dataset is a plug-in keyed by a field of the record (``loader``,
``augment``), so a dataset whose files look like another's is one more record here.

Modelled on Tonic's dataset class attributes (``sensor_size``, ``classes``, ...).  Pure data, no
numpy or torch, so the light event CLI can import it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DatasetSpec", "DATASETS", "STATIC", "EVENT", "get_dataset", "CIFAR10_CLASSES", "GESTURE_CLASS_NAMES",
           "NCALTECH101_CLASSES", "default_root"]

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
GESTURE_CLASS_NAMES = ("hand clap", "right hand wave", "left hand wave", "right arm clockwise",
                   "right arm counter-clockwise", "left arm clockwise", "left arm counter-clockwise",
                   "arm roll", "air drums", "air guitar", "other gestures")


@dataclass(frozen=True)
class DatasetSpec:
    """Facts of one dataset.

    ``input_shape``: one sample (static) or one frame (event) as ``(C, H, W)``; for event data
    ``(H, W)`` is the sensor size (the largest one where recordings differ) and C = 2 polarities.
    ``T``: the paper's number of time steps (its time-step table, ``tab:previous stoa T``).  ``network``: the paper's network
    (supplement Table 1); ``authors_network``: the network of the authors' published code where it
    differs; ``cpu_network``: a narrow network of the same form that trains in minutes on a 2-core
    CPU (the ``cpu`` preset).  ``sizes``: (train, test) sample counts of the full dataset (None
    where they follow from a fraction of each class); ``split``: how they are made; ``layout``:
    the files the loader expects under ``--data-dir`` / ``--root``.

    ``loader``: the plug-in that finds and reads the files (``plif.data.static`` for static
    datasets, ``plif.data.events.datasets`` for event datasets); ``folders``: names the files are
    kept under below the root besides ``name`` (torchvision's, Tonic's, the archive's).
    ``classes`` are folder names where the loader reads classes from folders.  ``suffixes`` and
    ``train_fraction``: the event files of a class folder, and the share of each class (first by
    file number) that trains.  ``reader_options``: options of ``plif data prepare`` that go to the
    file reader, not the lister.  Static only: ``mean`` / ``std`` per channel on pixels in [0, 1],
    ``augment`` (a name in ``plif.data.transforms``), ``files`` (role -> published file name),
    ``md5`` (file -> checksum) and ``urls`` (mirrors; a file's URL is mirror + name).
    ``paper_accuracy``: the paper's (A, B) accuracies in % (Table 3 and the supplement's
    ``tab:ACC VAL``), None for datasets it did not report.
    """

    name: str
    kind: str  # "static" or "event"
    input_shape: tuple[int, int, int]
    classes: tuple[str, ...]
    T: int
    network: str
    cpu_network: str
    sizes: tuple[int, int] | None
    split: str
    layout: str
    loader: str
    authors_network: str | None = None
    folders: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    train_fraction: float | None = None
    reader_options: tuple[str, ...] = ()
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    augment: str = "none"
    files: dict[str, str] = field(default_factory=dict, hash=False)
    md5: dict[str, str] = field(default_factory=dict, hash=False)
    urls: tuple[str, ...] = ()
    paper_accuracy: tuple[float, float] | None = None

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def sensor_size(self) -> tuple[int, int]:
        """``(H, W)`` of the image or event sensor."""
        return tuple(self.input_shape[1:])

    @property
    def search_dirs(self) -> tuple[str, ...]:
        """Folder names below the root that may hold the dataset: its name, then ``folders``."""
        return (self.name, *(f for f in self.folders if f != self.name))

    def network_string(self, authors_code: bool = False, cpu: bool = False) -> str:
        """The network to build: the paper's, the authors' code's (where it differs) or the CPU one."""
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

_IDX_FILES = {"train_images": "train-images-idx3-ubyte.gz", "train_labels": "train-labels-idx1-ubyte.gz",
              "test_images": "t10k-images-idx3-ubyte.gz", "test_labels": "t10k-labels-idx1-ubyte.gz"}
# N-Caltech101's folders (Orchard et al. 2015): the 100 Caltech101 object classes it converted and the
# background class, sorted as Tonic and SpikingJelly sort them (a class's label is its position here)
NCALTECH101_CLASSES = (
    "BACKGROUND_Google", "Faces_easy", "Leopards", "Motorbikes", "accordion", "airplanes", "anchor", "ant", "barrel",
    "bass", "beaver", "binocular", "bonsai", "brain", "brontosaurus", "buddha", "butterfly", "camera", "cannon",
    "car_side", "ceiling_fan", "cellphone", "chair", "chandelier", "cougar_body", "cougar_face", "crab", "crayfish",
    "crocodile", "crocodile_head", "cup", "dalmatian", "dollar_bill", "dolphin", "dragonfly", "electric_guitar",
    "elephant", "emu", "euphonium", "ewer", "ferry", "flamingo", "flamingo_head", "garfield", "gerenuk", "gramophone",
    "grand_piano", "hawksbill", "headphone", "hedgehog", "helicopter", "ibis", "inline_skate", "joshua_tree",
    "kangaroo", "ketch", "lamp", "laptop", "llama", "lobster", "lotus", "mandolin", "mayfly", "menorah", "metronome",
    "minaret", "nautilus", "octopus", "okapi", "pagoda", "panda", "pigeon", "pizza", "platypus", "pyramid",
    "revolver", "rhino", "rooster", "saxophone", "schooner", "scissors", "scorpion", "sea_horse", "snoopy",
    "soccer_ball", "stapler", "starfish", "stegosaurus", "stop_sign", "strawberry", "sunflower", "tick", "trilobite",
    "umbrella", "watch", "water_lilly", "wheelchair", "wild_cat", "windsor_chair", "wrench", "yin_yang")
_DVS_NET = "{c128k3s1-BN-PLIF-MPk2s2}*4-DP-FC512-PLIF-DP-FC%d-PLIF-APk10s10"  # the paper's CIFAR10-DVS network

DATASETS: dict[str, DatasetSpec] = {d.name: d for d in (
    DatasetSpec("mnist", "static", (1, 28, 28), _DIGITS, 8, _MNIST_NET, _CPU_SMALL, (60000, 10000),
                "official", _IDX_LAYOUT.format(name="mnist"), "idx", folders=("MNIST",),
                mean=(0.1307,), std=(0.3081,), augment="affine", files=_IDX_FILES,
                md5={"train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                     "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
                     "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
                     "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c"},
                urls=("https://ossci-datasets.s3.amazonaws.com/mnist/", "https://storage.googleapis.com/cvdf-datasets/mnist/"),
                paper_accuracy=(99.72, 99.63)),
    DatasetSpec("fashion-mnist", "static", (1, 28, 28), _FASHION, 8, _MNIST_NET, _CPU_SMALL, (60000, 10000),
                "official", _IDX_LAYOUT.format(name="fashion-mnist"), "idx", folders=("FashionMNIST",),
                mean=(0.2860,), std=(0.3530,), files=_IDX_FILES,
                md5={"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                     "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
                     "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
                     "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310"},
                urls=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
                paper_accuracy=(94.38, 93.85)),
    DatasetSpec("cifar10", "static", (3, 32, 32), CIFAR10_CLASSES, 8,
                "{{c256k3s1-BN-PLIF}*3-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10", _CPU_SMALL,
                (50000, 10000), "official",
                "cifar-10-python.tar.gz or cifar-10-batches-py/ in <root> or <root>/cifar10/", "cifar-python",
                authors_network="{{c256k3s1-BN-PLIF}*3-MPk2s2}*2-DP-FC2048-PLIF-FC100-PLIF-APk10s10",
                folders=("CIFAR10",), mean=(0.4914, 0.4822, 0.4465), std=(0.2023, 0.1994, 0.2010),
                augment="crop_flip", files={"archive": "cifar-10-python.tar.gz"},
                md5={"cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a"},
                urls=("https://www.cs.toronto.edu/~kriz/",), paper_accuracy=(93.50, 92.58)),
    DatasetSpec("nmnist", "event", (2, 34, 34), _DIGITS, 10, _MNIST_NET, _CPU_SMALL, (60000, 10000),
                "official Train / Test folders",
                "Get N-MNIST (Orchard et al. 2015, Mendeley Data record 468j46mzdv), extract Train.zip and "
                "Test.zip so that <data-dir>/Train/<digit>/*.bin and <data-dir>/Test/<digit>/*.bin exist",
                "split-folders", folders=("NMNIST", "N-MNIST"), suffixes=(".bin",), paper_accuracy=(99.61, 99.57)),
    DatasetSpec("cifar10-dvs", "event", (2, 128, 128), CIFAR10_CLASSES, 20, _DVS_NET % 100, _CPU_DVS % 100,
                (9000, 1000), "paper: first 900 files of each class by file number train, last 100 test",
                "Get CIFAR10-DVS (Li et al. 2017, the AEDAT 2.0 release) and extract the ten class folders so "
                "that <data-dir>/airplane/*.aedat ... <data-dir>/truck/*.aedat exist", "class-folders",
                authors_network="{c128k3s1-BN-PLIF-MPk2s2}*4-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10",
                folders=("CIFAR10-DVS", "CIFAR10DVS"), suffixes=(".aedat", ".aedat4"), train_fraction=0.9,
                reader_options=("flip_x",), paper_accuracy=(74.80, 69.00)),
    DatasetSpec("dvs128-gesture", "event", (2, 128, 128), GESTURE_CLASS_NAMES, 20,
                "{c128k3s1-BN-PLIF-MPk2s2}*5-DP-FC512-PLIF-DP-FC110-PLIF-APk10s10", _CPU_DVS % 110,
                (1176, 288), "official trials_to_train.txt / trials_to_test.txt",
                "Get IBM's DVS128 Gesture (DvsGesture.tar.gz) and extract it so that <data-dir>/DvsGesture/ holds "
                "user*_*.aedat, user*_*_labels.csv, trials_to_train.txt and trials_to_test.txt", "gesture-trials",
                folders=("DvsGesture", "DVS128Gesture"), paper_accuracy=(97.57, 96.53)),
    # not in the paper: the event benchmark most later papers report, with the paper's CIFAR10-DVS network
    DatasetSpec("ncaltech101", "event", (2, 180, 240), NCALTECH101_CLASSES, 20, _DVS_NET % 1010, _CPU_DVS % 1010,
                None, "no official split: the first 90% of each class by file number train, the rest test "
                "(SpikingJelly's train_ratio=0.9 without shuffling)",
                "Get N-Caltech101 (Orchard et al. 2015, Mendeley Data record cy6cvx3ryv), extract Caltech101.zip "
                "so that <data-dir>/Caltech101/<class>/image_XXXX.bin exist for the 101 class folders "
                "(BACKGROUND_Google included)", "class-folders", folders=("Caltech101", "N-Caltech101", "NCaltech101"),
                suffixes=(".bin",), train_fraction=0.9),
)}
"""Every dataset's record by name: the one place its facts (shapes, T, networks, files, splits) live."""

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
