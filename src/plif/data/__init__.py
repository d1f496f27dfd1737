"""Datasets of the paper: static images (MNIST, Fashion-MNIST, CIFAR-10) and event streams
(N-MNIST, CIFAR10-DVS, DVS128 Gesture) with their raw-format readers, frames and cache.

Readers know nothing of training; transforms are pure functions; dataset code only finds files,
labels and splits.
"""
from .idx import read_idx
from .split import stratified_split
from .static import STATIC_DATASETS, StaticDataset, load_static
from .transforms import augment_for, normalize, random_affine, random_crop_flip

__all__ = ["read_idx", "load_static", "STATIC_DATASETS", "StaticDataset", "normalize", "random_affine",
           "random_crop_flip", "augment_for", "stratified_split"]
