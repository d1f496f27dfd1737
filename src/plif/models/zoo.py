"""The paper's networks by dataset name (supplement, Table 1), with the authors'-code variants and
the CPU-sized networks, all read from :mod:`plif.data.catalog`."""
from __future__ import annotations

from dataclasses import dataclass

from ..data.catalog import DATASETS
from .network import SpikingNetwork, build_network

__all__ = ["ZooEntry", "ZOO", "get_entry", "build_zoo"]


@dataclass(frozen=True)
class ZooEntry:
    """One paper configuration: network string, per-sample input shape, T and classes.

    ``authors_spec`` is the network as the authors' published code builds it, where it differs.
    """

    name: str
    spec: str
    input_shape: tuple
    T: int
    num_classes: int
    authors_spec: str | None = None
    cpu_spec: str | None = None  # the narrow network of the ``cpu`` preset

    def network_string(self, authors_code: bool = False, cpu: bool = False) -> str:
        if cpu and self.cpu_spec:
            return self.cpu_spec
        return self.authors_spec if authors_code and self.authors_spec else self.spec


def _entry(d) -> ZooEntry:
    return ZooEntry(d.name, d.network, tuple(d.input_shape), d.T, d.num_classes, d.authors_network, d.cpu_network)


# every fact comes from the one description of each dataset (plif.data.catalog)
ZOO: dict[str, ZooEntry] = {name: _entry(d) for name, d in DATASETS.items()}


def get_entry(name: str) -> ZooEntry:
    """Look a configuration up by dataset name; the error lists the valid names."""
    try:
        return ZOO[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(ZOO)}") from None


def build_zoo(name: str, *, T: int | None = None, authors_code: bool = False, bn_per_step: bool = False,
              **kwargs) -> SpikingNetwork:
    """Build the paper's network for ``name``.

    authors_code: use the authors' code's network where it differs from the paper (CIFAR-10 has
    only the first dropout; CIFAR10-DVS uses FC2048).  bn_per_step: BatchNorm statistics per
    time-step, as that code computes them.  Other keywords go to :func:`build_network`.
    """
    e = get_entry(name)
    return build_network(e.network_string(authors_code), e.input_shape, e.T if T is None else T,
                         bn_per_step=bn_per_step, **kwargs)
