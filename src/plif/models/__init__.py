"""The paper's network notation, the network builder, the zoo of paper configurations, and
:func:`fuse` for networks written by hand."""
from .fusion import fuse, fused_blocks
from .memory import MEMORY_PRESETS, MemoryOptions
from .network import LayerInfo, SpikingNetwork, build_network
from .module_stepping import ModuleState, step
from .stepping import NetworkState
from .notation import NotationError, Token, parse
from .summary import layer_table
from .zoo import build_zoo

__all__ = ["parse", "Token", "NotationError", "build_network", "SpikingNetwork", "LayerInfo", "NetworkState",
           "ModuleState", "step", "layer_table", "MemoryOptions", "MEMORY_PRESETS", "build_zoo", "fuse", "fused_blocks"]
