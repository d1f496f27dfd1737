"""The paper's networks by dataset name (supplement, Table 1), with the authors'-code variants and
the CPU-sized networks: the entries are the dataset records of :mod:`plif.catalog`."""
from __future__ import annotations

from ..catalog import get_dataset
from .network import SpikingNetwork, build_network

__all__ = ["build_zoo"]


def build_zoo(name: str, *, T: int | None = None, authors_code: bool = False, bn_per_step: bool = False,
              **kwargs) -> SpikingNetwork:
    """Build the paper's network for dataset ``name`` (``mnist``, ``cifar10``, ``dvs128-gesture``, ...:
    the names of :data:`plif.catalog.DATASETS`, whose records hold the networks, T and shapes).

    authors_code: use the authors' code's network where it differs from the paper (CIFAR-10 has
    only the first dropout; CIFAR10-DVS uses FC2048).  bn_per_step: BatchNorm statistics per
    time-step, as that code computes them.  Other keywords go to :func:`build_network`.

    Example: the DVS128 Gesture network, built on the meta device (layers and shapes, no weights):

    >>> import torch
    >>> from plif import build_zoo
    >>> with torch.device("meta"):
    ...     net = build_zoo("dvs128-gesture")
    >>> net.spec
    '{c128k3s1-BN-PLIF-MPk2s2}*5-DP-FC512-PLIF-DP-FC110-PLIF-APk10s10'
    >>> net.T, net.input_shape, net.info[-1].out_shape   # frames [T, B, 2, 128, 128] -> [T, B, 11]
    (20, (2, 128, 128), (11,))
    """
    e = get_dataset(name)
    return build_network(e.network_string(authors_code), e.input_shape, e.T if T is None else T,
                         bn_per_step=bn_per_step, **kwargs)
