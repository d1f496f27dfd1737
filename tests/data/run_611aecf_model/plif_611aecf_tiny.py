"""A network written by hand with plif's layers, for the run folder plif 611aecf trained with
``--model plif_611aecf_tiny:tiny`` (this folder on the path) (tests/data/run_611aecf_model)."""
from torch import nn

from plif.layers import TimeFolded, Voting
from plif.neurons import PLIF


def tiny(input_shape, num_classes):
    return nn.Sequential(
        TimeFolded(nn.Conv2d(input_shape[0], 4, 3, padding=1, bias=False)), TimeFolded(nn.BatchNorm2d(4)), PLIF(),
        TimeFolded(nn.MaxPool2d(4, 4)), TimeFolded(nn.Flatten()),
        TimeFolded(nn.Linear(4 * (input_shape[1] // 4) * (input_shape[2] // 4), num_classes * 2, bias=False)), PLIF(),
        Voting(2))
