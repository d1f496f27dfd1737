"""Inference and deployment: BN folding, spike-only inference, SynOps/energy statistics, NIR export.

``nir`` is an optional dependency, imported only by the NIR functions.
"""
from .._lazy import lazy_names
from .bn_folding import fold_batchnorm
from ..runs import load_run
from .spike_inference import spike_fed_layers, to_spike_inference
from .spike_ops import GatherConv2d, GatherLinear, gather_conv2d, gather_linear
from .stats import ENERGY_SOURCE, NetworkStats, collect_stats, render_stats

__all__ = ["fold_batchnorm", "load_run", "to_spike_inference", "spike_fed_layers", "GatherLinear", "GatherConv2d",
           "gather_linear", "gather_conv2d", "collect_stats", "render_stats", "NetworkStats", "ENERGY_SOURCE",
           "export_nir", "export_nir_all", "to_nir", "read_nir", "from_nir"]


# NIR helpers load lazily so ``import plif.deploy`` works without the nir package
__getattr__, __dir__ = lazy_names(__name__, {"export_nir": ".nir_export", "export_nir_all": ".nir_export",
                                             "to_nir": ".nir_export",
                                             "read_nir": ".nir_import", "from_nir": ".nir_import"}, globals())
