"""One record per dataset: the only place a dataset's facts are written.

Everything else reads them from here: the zoo (networks, T, input shape), the presets and the CLI,
the static loaders (files, checksums, mirrors, normalisation), the augmentations, the event
listers (folders, class order, split) and readers (options), the event downloads (archives,
checksums, what each archive must hold, the steps for one that needs a browser), and the paper's
reported accuracies.
Code that differs per dataset is a plug-in keyed by a field of the record (``loader``,
``augment``), so a dataset whose files look like another's is one more record here.

Modelled on Tonic's dataset class attributes (``sensor_size``, ``classes``, ...).  Pure data, no
numpy or torch, so the light event CLI can import it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Archive", "DatasetSpec", "DATASETS", "get_dataset", "as_dataset", "CIFAR10_CLASSES", "GESTURE_CLASS_NAMES",
           "NCALTECH101_CLASSES", "ATIS_SENSOR", "default_root", "dataset_folder", "env_folder"]

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
GESTURE_CLASS_NAMES = ("hand clap", "right hand wave", "left hand wave", "right arm clockwise",
                   "right arm counter-clockwise", "left arm clockwise", "left arm counter-clockwise",
                   "arm roll", "air drums", "air guitar", "other gestures")


@dataclass(frozen=True)
class Archive:
    """One published archive of an event dataset: its file name, mirrors (tried in turn) and MD5.

    ``holds``: what the loaders need from it, as ``/``-separated glob patterns (``Train/0/*.bin``)
    that must each match a file in it; they are checked before anything is unpacked, so an archive
    with the right checksum but another layout is refused rather than unpacked and called ready.
    """

    filename: str
    urls: tuple[str, ...]
    md5: str
    holds: tuple[str, ...] = ()


@dataclass(frozen=True)
class DatasetSpec:
    """Facts of one dataset.

    ``input_shape``: one sample (static) or one frame (event) as ``(C, H, W)``; for event data
    ``(H, W)`` is the sensor size (the largest one where recordings differ) and C = 2 polarities;
    ``(C,)`` for a 1-d sensor of C channels without polarity (SHD / SSC's 700 cochlea channels).
    ``T``: the paper's number of time steps (its time-step table, ``tab:previous stoa T``).  ``network``: the paper's network
    (supplement Table 1); ``authors_network``: the network of the authors' published code where it
    differs; ``cpu_network``: a narrow network of the same form that trains in minutes on a 2-core
    CPU (the ``cpu`` preset).  ``sizes``: (train, test) sample counts of the full dataset (None
    where they follow from a fraction of each class); ``split``: how they are made; ``layout``:
    the files the loader expects under ``--data-dir``.

    ``loader``: the plug-in that finds and reads the files (``plif.data.static`` for static
    datasets, ``plif.data.events.datasets`` for event datasets); ``folders``: names the files are
    kept under below the root besides ``name`` (torchvision's, Tonic's, the archive's).
    ``classes`` are folder names where the loader reads classes from folders.  ``suffixes`` and
    ``train_fraction``: the event files of a class folder, and the share of each class (first by
    file number) that trains.  ``reader_options``: options of ``plif data prepare`` that go to the
    file reader, not the lister.  Static only: ``mean`` / ``std`` per channel on pixels in [0, 1],
    ``augment`` (a name in ``plif.data.transforms``), ``files`` (role -> published file name),
    ``md5`` (file -> checksum) and ``urls`` (mirrors; a file's URL is mirror + name).  Event only:
    ``archives`` (what ``plif data download`` fetches, checks and unpacks) and ``manual`` (why the
    archives must be fetched by hand, e.g. with a browser; None when plif downloads them),
    ``files`` (split -> file name, where a split is one file: SHD / SSC's HDF5) and ``slicing``
    (how training cuts a recording into the T frames: ``count``, the paper's, or ``time``);
    ``split_dirs``: the train and test folders of a ``split-folders`` dataset.
    ``paper_accuracy``: the paper's (A, B) accuracies in % (Table 3 and the supplement's
    ``tab:ACC VAL``), None for datasets it did not report.
    """

    name: str
    kind: str  # "static" or "event": ask it through ``is_event``
    input_shape: tuple[int, ...]  # (C, H, W), or (C,) for a 1-d sensor
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
    archives: tuple[Archive, ...] = ()
    manual: str | None = None
    slicing: str = "count"
    split_dirs: tuple[str, str] = ("Train", "Test")
    paper_accuracy: tuple[float, float] | None = None

    def __post_init__(self):
        if self.kind not in ("static", "event"):
            raise ValueError(f"{self.name}: kind {self.kind!r}, expected 'static' or 'event'")

    @property
    def is_event(self) -> bool:
        """Event data (frames from recordings) rather than static images: the one way code asks."""
        return self.kind == "event"

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def sensor_size(self) -> tuple[int, ...]:
        """``(H, W)`` of the image or event sensor; ``(C,)`` of a 1-d sensor of C channels."""
        return tuple(self.input_shape[1:]) if len(self.input_shape) == 3 else tuple(self.input_shape)

    @property
    def search_dirs(self) -> tuple[str, ...]:
        """Folder names below the root that may hold the dataset: its name, then ``folders``."""
        return (self.name, *(f for f in self.folders if f != self.name))

    def of_kind(self, events: bool) -> "DatasetSpec":
        """This record when it is event data (``events=True``) or static data (``False``); otherwise the
        error :func:`get_dataset` gives a name of the other kind (the valid names of the kind asked)."""
        if self.is_event != events:
            raise _unknown(self.name, events)
        return self

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
ATIS_SENSOR = (180, 240)  # (H, W) of the whole ATIS sensor (N-Caltech101's frames): the largest a .bin recording can be
_MENDELEY = "https://data.mendeley.com/public-files/datasets/"
_FIGSHARE = "https://ndownloader.figshare.com/files/"
_CIFAR10_DVS_FILES = {  # class -> (figshare file id, md5), as SpikingJelly's CIFAR10DVS.resource_url_md5
    "airplane": ("7712788", "0afd5c4bf9ae06af762a77b180354fdd"),
    "automobile": ("7712791", "8438dfeba3bc970c94962d995b1b9bdd"),
    "bird": ("7712794", "a9c207c91c55b9dc2002dc21c684d785"),
    "cat": ("7712812", "52c63c677c2b15fa5146a8daf4d56687"),
    "deer": ("7712815", "b6bf21f6c04d21ba4e23fc3e36c8a4a3"),
    "dog": ("7712818", "f379ebdf6703d16e0a690782e62639c3"),
    "frog": ("7712842", "cad6ed91214b1c7388a5f6ee56d08803"),
    "horse": ("7712851", "e7cbbf77bec584ffbf913f00e682782a"),
    "ship": ("7712836", "41c7bd7d6b251be82557c6cce9a7d5c9"),
    "truck": ("7712839", "89f3922fd147d9aeff89e76a2b0b70a7"),
}


def _in_class_folders(top: str, classes, suffix: str) -> tuple[str, ...]:
    """``holds`` of an archive with one folder of recordings per class under ``top``."""
    return tuple(f"{top}/{c}/*{suffix}" for c in classes)


_DVS_NET = "{c128k3s1-BN-PLIF-MPk2s2}*4-DP-FC512-PLIF-DP-FC%d-PLIF-APk10s10"  # the paper's CIFAR10-DVS network
# SHD / SSC: the fully connected network of Hammouamri, Khalfaoui-Hassani & Masquelier (ICLR 2024, "Learning
# delays in SNNs using dilated convolutions with learnable spacings"), its model without delays ('snn' of their
# code's best_config_SHD.py: 2 hidden layers of 256, Linear -> BatchNorm1d -> LIF/PLIF -> Dropout 0.4, no bias),
# with a spiking readout whose firing rate is the prediction (theirs reads the last layer's membrane potential)
_AUDIO_NET = "FC256-BN-PLIF-DP0.4-FC256-BN-PLIF-DP0.4-FC%d-PLIF"
_CPU_AUDIO = "FC64-BN-PLIF-FC%d-PLIF"
_ZENKELAB = "https://zenkelab.org/datasets/"
# the .h5.zip archives with the MD5 sums Tonic's hsd.py (SHD, SSC) and SpikingJelly 2.0's shd.py (SHD) list;
# each unpacks to the one .h5 file of its split
_HSD_ZIPS = {"shd_train.h5": "f3252aeb598ac776c1b526422d90eecb", "shd_test.h5": "1503a5064faa34311c398fb0a1ed0a6f",
             "ssc_train.h5": "d102be95e7144fcc0553d1f45ba94170", "ssc_valid.h5": "b4eee3516a4a90dd0c71a6ac23a8ae43",
             "ssc_test.h5": "a35ff1e9cffdd02a20eb850c17c37748"}


def _hsd_archives(*names: str) -> tuple[Archive, ...]:
    return tuple(Archive(f"{n}.zip", (f"{_ZENKELAB}{n}.zip",), _HSD_ZIPS[n], (n,)) for n in names)


ASL_DVS_CLASSES = tuple("abcdefghiklmnopqrstuvwxy")  # the 24 static ASL letters: no j or z (they move)
# DVS-Lip's 100 words (Tan et al. 2022), sorted as their folders are (Tonic's DVSLip.classes, SpikingJelly's
# folder order); a class's label is its position here
DVS_LIP_CLASSES = (
    "accused", "action", "allow", "allowed", "america", "american", "another", "around", "attacks", "banks",
    "become", "being", "benefit", "benefits", "between", "billion", "called", "capital", "challenge", "change",
    "chief", "couple", "court", "death", "described", "difference", "different", "during", "economic", "education",
    "election", "england", "evening", "everything", "exactly", "general", "germany", "giving", "ground", "happen",
    "happened", "having", "heavy", "house", "hundreds", "immigration", "judge", "labour", "leaders", "legal",
    "little", "london", "majority", "meeting", "military", "million", "minutes", "missing", "needs", "number",
    "numbers", "paying", "perhaps", "point", "potential", "press", "price", "question", "really", "right",
    "russia", "russian", "saying", "security", "several", "should", "significant", "spend", "spent", "started",
    "still", "support", "syria", "syrian", "taken", "taking", "terms", "these", "thing", "think",
    "times", "tomorrow", "under", "warning", "water", "welcome", "words", "worst", "years", "young")
_HSD_LAYOUT = ("Get {what} (Cramer et al. 2020, zenkelab.org/datasets) and unpack {zips} (or gunzip the "
               ".h5.gz files) so that {files} exist in <data-dir> (or <data-dir>/{name}/)")

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
                "split-folders", folders=("NMNIST", "N-MNIST"), suffixes=(".bin",),
                archives=(  # the Mendeley Data files with the MD5 sums Tonic's NMNIST lists
                    Archive("Train.zip", (_MENDELEY + "468j46mzdv/files/39c25547-014b-4137-a934-9d29fa53c7a0/"
                                          "file_downloaded",), "20959b8e626244a1b502305a9e6e2031",
                            _in_class_folders("Train", _DIGITS, ".bin")),
                    Archive("Test.zip", (_MENDELEY + "468j46mzdv/files/05a4d654-7e03-4c15-bdfa-9bb2bcbea494/"
                                         "file_downloaded",), "69ca8762b2fe404d9b9bad1103e97832",
                            _in_class_folders("Test", _DIGITS, ".bin"))),
                paper_accuracy=(99.61, 99.57)),
    DatasetSpec("cifar10-dvs", "event", (2, 128, 128), CIFAR10_CLASSES, 20, _DVS_NET % 100, _CPU_DVS % 100,
                (9000, 1000), "paper: first 900 files of each class by file number train, last 100 test",
                "Get CIFAR10-DVS (Li et al. 2017, the AEDAT 2.0 release) and extract the ten class folders so "
                "that <data-dir>/airplane/*.aedat ... <data-dir>/truck/*.aedat exist", "class-folders",
                authors_network="{c128k3s1-BN-PLIF-MPk2s2}*4-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10",
                folders=("CIFAR10-DVS", "CIFAR10DVS"), suffixes=(".aedat", ".aedat4"), train_fraction=0.9,
                reader_options=("flip_x",),
                archives=tuple(Archive(f"{c}.zip", (_FIGSHARE + _CIFAR10_DVS_FILES[c][0],), _CIFAR10_DVS_FILES[c][1],
                                       (f"{c}/*.aedat",)) for c in CIFAR10_CLASSES),
                paper_accuracy=(74.80, 69.00)),
    DatasetSpec("dvs128-gesture", "event", (2, 128, 128), GESTURE_CLASS_NAMES, 20,
                "{c128k3s1-BN-PLIF-MPk2s2}*5-DP-FC512-PLIF-DP-FC110-PLIF-APk10s10", _CPU_DVS % 110,
                (1176, 288), "official trials_to_train.txt / trials_to_test.txt",
                "Get IBM's DVS128 Gesture (DvsGesture.tar.gz) and extract it so that <data-dir>/DvsGesture/ holds "
                "user*_*.aedat, user*_*_labels.csv, trials_to_train.txt and trials_to_test.txt", "gesture-trials",
                folders=("DvsGesture", "DVS128Gesture"),
                archives=(Archive("DvsGesture.tar.gz",
                                  ("https://ibm.ent.box.com/s/3hiq58ww1pbbjrinh367ykfdf60xsfm8/folder/50167556794",),
                                  "8a5c71fb11e24e5ca5b11866ca6c00a1",  # as SpikingJelly's DVS128Gesture
                                  ("DvsGesture/trials_to_train.txt", "DvsGesture/trials_to_test.txt",
                                   "DvsGesture/user*.aedat", "DvsGesture/user*_labels.csv")),),
                manual="IBM's box folder needs a browser", paper_accuracy=(97.57, 96.53)),
    # not in the paper: the event benchmark most later papers report, with the paper's CIFAR10-DVS network
    DatasetSpec("ncaltech101", "event", (2, *ATIS_SENSOR), NCALTECH101_CLASSES, 20, _DVS_NET % 1010, _CPU_DVS % 1010,
                None, "no official split: the first ceil(0.9 n) of each class's n files by file number train, "
                "the rest test (SpikingJelly's split_to_train_test_set, train_ratio=0.9, without shuffling)",
                "Get N-Caltech101 (Orchard et al. 2015, Mendeley Data record cy6cvx3ryv), extract Caltech101.zip "
                "so that <data-dir>/Caltech101/<class>/image_XXXX.bin exist for the 101 class folders "
                "(BACKGROUND_Google included)", "class-folders", folders=("Caltech101", "N-Caltech101", "NCaltech101"),
                suffixes=(".bin",), train_fraction=0.9,
                # Tonic's NCALTECH101 file (Mendeley Data cy6cvx3ryv); its MD5 is SpikingJelly's Caltech101.zip,
                # which unpacks to Caltech101/<class>/image_XXXX.bin
                archives=(Archive("Caltech101.zip", (_MENDELEY + "cy6cvx3ryv/files/36b5c52a-b49d-4853-addb-a836a8883e49/"
                                                     "file_downloaded",), "66201824eabb0239c7ab992480b50ba3",
                                  _in_class_folders("Caltech101", NCALTECH101_CLASSES, ".bin")),)),
    # not in the paper: the audio benchmarks of later spiking-network papers, 700 cochlea channels of spikes;
    # classes by label number (each file's extra/keys names them); frames cut each recording's span in T
    # equal durations (slicing "time"), T = 100 about the 10 ms bins of Hammouamri et al. on ~1 s recordings
    DatasetSpec("shd", "event", (700,), tuple(str(i) for i in range(20)), 100, _AUDIO_NET % 20, _CPU_AUDIO % 20,
                (8156, 2264), "official shd_train.h5 / shd_test.h5",
                _HSD_LAYOUT.format(what="the Spiking Heidelberg Digits", zips="shd_train.h5.zip and shd_test.h5.zip",
                                   files="shd_train.h5 and shd_test.h5", name="shd"),
                "hdf5-splits", folders=("SHD", "hsd"), files={"train": "shd_train.h5", "test": "shd_test.h5"},
                archives=_hsd_archives("shd_train.h5", "shd_test.h5"), slicing="time"),
    DatasetSpec("ssc", "event", (700,), tuple(str(i) for i in range(35)), 100, _AUDIO_NET % 35, _CPU_AUDIO % 35,
                (75466, 20382), "official ssc_train.h5 / ssc_test.h5 (ssc_valid.h5, the published validation split, "
                "is not read: --val-split holds out part of the training split)",
                _HSD_LAYOUT.format(what="the Spiking Speech Commands", zips="ssc_train.h5.zip and ssc_test.h5.zip",
                                   files="ssc_train.h5 and ssc_test.h5", name="ssc"),
                "hdf5-splits", folders=("SSC",), files={"train": "ssc_train.h5", "test": "ssc_test.h5"},
                archives=_hsd_archives("ssc_train.h5", "ssc_test.h5"), slicing="time"),
    # not in the paper: a DAVIS240c dataset of 24 hand-shape letters, 4200 recordings each, no official split;
    # the paper's CIFAR10-DVS network and T on its whole sensor (no published PLIF configuration for it)
    DatasetSpec("asl-dvs", "event", (2, *ATIS_SENSOR), ASL_DVS_CLASSES, 20, _DVS_NET % 240, _CPU_DVS % 240, None,
                "no official split: the first ceil(0.8 n) of each letter's n files by file number train, the rest "
                "test (Bi et al. 2019 report an 80 / 20 split)",
                "Get ASL-DVS (Bi et al. 2019, ICCV2019_DVS_dataset.zip) and unpack it and the per-letter archives "
                "inside it so that <data-dir>/a/*.mat ... <data-dir>/y/*.mat exist (24 letters, no j or z)",
                "class-folders", folders=("ASL-DVS", "ASLDVS", "asl-dvs"), suffixes=(".mat",), train_fraction=0.8,
                # Tonic's ASLDVS archive and MD5 (SpikingJelly warns that Dropbox repacks it, so its MD5 can change)
                archives=(Archive("ASLDVS.zip", ("https://www.dropbox.com/sh/ibq0jsicatn7l6r/"
                                                 "AACNrNELV56rs1YInMWUs9CAa?dl=1",),
                                  "20f1dbf961f9a45179f6e489e93c8f2c", ("*.zip",)),),
                manual="the Dropbox link has expired; SpikingJelly points to the OpenI mirror (pip install openi; "
                       "openi dataset download OpenI/ASLDVS), whose per-letter zips must be unpacked by hand"),
    # not in the paper: lip reading of 100 words on a 128 x 128 DVS, official train / test folders
    DatasetSpec("dvs-lip", "event", (2, 128, 128), DVS_LIP_CLASSES, 20, _DVS_NET % 1000, _CPU_DVS % 1000,
                (14896, 4975), "official train / test folders",
                "Get DVS-Lip (Tan et al. 2022, DVS-Lip.zip from the authors' Google Drive) and extract it so that "
                "<data-dir>/DVS-Lip/train/<word>/*.npy and <data-dir>/DVS-Lip/test/<word>/*.npy exist",
                "split-folders", folders=("DVS-Lip", "DVSLip"), suffixes=(".npy",), split_dirs=("train", "test"),
                archives=(Archive("DVS-Lip.zip", ("https://drive.google.com/file/d/1dBEgtmctTTWJlWnuWxFtk8gfOdVVpkQ0/view",),
                                  "2dcb959255122d4cdeb6094ca282494b",  # Tonic's and SpikingJelly's DVSLip
                                  ("DVS-Lip/train/*/*.npy", "DVS-Lip/test/*/*.npy")),),
                manual="Google Drive needs a browser"),
)}
"""Every dataset's record by name: the one place its facts (shapes, T, networks, files, splits) live."""



def get_dataset(name: str, events: bool | None = None) -> DatasetSpec:
    """The record of ``name``; the error lists the valid names.  ``events``: only an event dataset
    (True) or only a static one (False) is accepted; the error then lists the names of that kind."""
    d = DATASETS.get(name)
    if d is None:
        raise _unknown(name, events)
    return d if events is None else d.of_kind(events)


def as_dataset(dataset: "str | DatasetSpec", events: bool | None = None) -> DatasetSpec:
    """The record a public entry point of :mod:`plif.data` was given as ``dataset``: a record as it
    is, or a name looked up as :func:`get_dataset` does (so ``load_static("mnist")`` and
    ``load_static(get_dataset("mnist"))`` are one call); ``events`` as there.  Anything else is a
    one-line ``TypeError``."""
    if isinstance(dataset, str):
        return get_dataset(dataset, events)
    if not isinstance(dataset, DatasetSpec):
        raise TypeError(f"dataset: expected a dataset name such as 'mnist' or its record (get_dataset(name)), "
                        f"got {type(dataset).__module__}.{type(dataset).__qualname__}")
    return dataset if events is None else dataset.of_kind(events)


def _unknown(name, events: bool | None) -> ValueError:
    kind = "" if events is None else "event " if events else "static "
    valid = [n for n, e in DATASETS.items() if events is None or e.is_event == events]
    return ValueError(f"unknown {kind}dataset {name!r}; valid: {', '.join(valid)}")


def dataset_folder(root: str | Path) -> Path:
    """``root`` (``~`` expanded) as the folder that holds, or will receive, a dataset; a path that
    exists and is not a folder is refused, naming it (a mkdir would only say "File exists")."""
    path = Path(root).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path}: is a file, not a folder (--data-dir names the folder that holds or receives "
                         "the dataset)")
    return path


def env_folder(name: str, default: Path) -> Path:
    """The folder environment variable ``name`` names, or ``default`` where it is unset, empty or only
    blanks: every reader of plif's folder variables (``PLIF_DATA_ROOT``, ``PLIF_CACHE_DIR``) asks here,
    so a blank value never becomes a folder named by blanks, or the working directory itself."""
    value = os.environ.get(name, "")
    return Path(value) if value.strip() else Path(default)


def default_root() -> Path:
    """``$PLIF_DATA_ROOT`` or ``~/.cache/plif/data``: where downloads go when no root is given."""
    return env_folder("PLIF_DATA_ROOT", Path.home() / ".cache" / "plif" / "data")
