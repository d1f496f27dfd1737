"""The paper's networks by dataset name (supplement, Table 1), with the authors'-code variants."""
from __future__ import annotations

from dataclasses import dataclass

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

    def network_string(self, authors_code: bool = False) -> str:
        return self.authors_spec if authors_code and self.authors_spec else self.spec


_MNIST = "{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10"

ZOO: dict[str, ZooEntry] = {
    e.name: e
    for e in (
        ZooEntry("mnist", _MNIST, (1, 28, 28), 8, 10),
        ZooEntry("fashion-mnist", _MNIST, (1, 28, 28), 8, 10),
        ZooEntry("nmnist", _MNIST, (2, 34, 34), 10, 10),
        ZooEntry("cifar10", "{{c256k3s1-BN-PLIF}*3-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10",
                 (3, 32, 32), 8, 10,
                 authors_spec="{{c256k3s1-BN-PLIF}*3-MPk2s2}*2-DP-FC2048-PLIF-FC100-PLIF-APk10s10"),
        ZooEntry("cifar10-dvs", "{c128k3s1-BN-PLIF-MPk2s2}*4-DP-FC512-PLIF-DP-FC100-PLIF-APk10s10",
                 (2, 128, 128), 20, 10,
                 authors_spec="{c128k3s1-BN-PLIF-MPk2s2}*4-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10"),
        ZooEntry("dvs128-gesture", "{c128k3s1-BN-PLIF-MPk2s2}*5-DP-FC512-PLIF-DP-FC110-PLIF-APk10s10",
                 (2, 128, 128), 20, 11),
    )
}


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
