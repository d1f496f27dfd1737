"""The paper's networks by dataset name (supplement, Table 1), with the authors'-code variants and
the CPU-sized networks: the entries are the dataset records of :mod:`plif.data.catalog`."""
from __future__ import annotations

from ..data.catalog import get_dataset
from .network import SpikingNetwork, build_network

__all__ = ["build_zoo"]


def build_zoo(name: str, *, T: int | None = None, authors_code: bool = False, bn_per_step: bool = False,
              **kwargs) -> SpikingNetwork:
    """Build the paper's network for dataset ``name`` (``mnist``, ``cifar10``, ``dvs128-gesture``, ...:
    the names of :data:`plif.data.catalog.DATASETS`, whose records hold the networks, T and shapes).

    authors_code: use the authors' code's network where it differs from the paper (CIFAR-10 has
    only the first dropout; CIFAR10-DVS uses FC2048).  bn_per_step: BatchNorm statistics per
    time-step, as that code computes them.  Other keywords go to :func:`build_network`.
    """
    e = get_dataset(name)
    return build_network(e.network_string(authors_code), e.input_shape, e.T if T is None else T,
                         bn_per_step=bn_per_step, **kwargs)
