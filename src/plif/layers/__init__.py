"""Layers over ``[T, B, ...]`` tensors: time folding, time-invariant dropout, voting, BN folding,
the memory-saving forms of conv/linear/pooling/BN on spikes, and the spiking transformers' attention."""
from .attention import QKAttention, SpikeDrivenSelfAttention, SpikingSelfAttention
from .bn_fold import fold_bn_into
from .dropout import TimeInvariantDropout
from .fold import PerStepBatchNorm, TimeFolded, unwrap
from .max_pool import MaxPool2d
from .saved_dtype import BF16SavedPotential
from .spike_input import SpikeConv2d, SpikeConvBN, SpikeLinear
from .spike_pool import SpikeMaxPool2d, spike_max_pool2d
from .voting import Voting

__all__ = ["TimeFolded", "PerStepBatchNorm", "TimeInvariantDropout", "Voting", "fold_bn_into",
           "MaxPool2d", "SpikeMaxPool2d", "spike_max_pool2d", "SpikeConv2d", "SpikeLinear", "SpikeConvBN",
           "BF16SavedPotential", "unwrap",
           "SpikingSelfAttention", "QKAttention", "SpikeDrivenSelfAttention"]
