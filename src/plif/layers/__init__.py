"""Layers over ``[T, B, ...]`` tensors: time folding, time-invariant dropout, voting, BN folding."""
from .bn_fold import fold_bn_into
from .dropout import TimeInvariantDropout
from .fold import PerStepBatchNorm, TimeFolded
from .voting import Voting

__all__ = ["TimeFolded", "PerStepBatchNorm", "TimeInvariantDropout", "Voting", "fold_bn_into"]
