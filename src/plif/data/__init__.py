"""Datasets of the paper: static images (MNIST, Fashion-MNIST, CIFAR-10) and event streams
(N-MNIST, CIFAR10-DVS, DVS128 Gesture) with their raw-format readers, frames and cache.

Readers know nothing of training; transforms are pure functions; dataset code only finds files,
labels and splits.  :mod:`plif.catalog` (below every package) holds every dataset's facts; :mod:`.pipeline` turns a dataset into
network input (splits resident on the device or streamed, batches, normalisation) for train, deploy
and experiments.  Names are imported on first use, so that the event readers and frames (numpy only) never import torch.
"""
from .._lazy import lazy_names

_WHERE = {"read_idx": ".idx", "stratified_split": ".split",
          "load_static": ".static", "augment_for": ".transforms", "normalize": ".transforms",
          "random_affine": ".transforms", "random_crop_flip": ".transforms", "DATASETS": "..catalog",
          "DatasetSpec": "..catalog", "get_dataset": "..catalog", "load_train_data": ".pipeline",
          "load_test_split": ".pipeline", "Split": ".pipeline", "TrainData": ".pipeline"}

__all__ = sorted(_WHERE)


__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals())
