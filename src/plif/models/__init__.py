"""The paper's network notation, the network builder and the zoo of paper configurations."""
from .network import LayerInfo, SpikingNetwork, build_network
from .notation import NotationError, Token, parse
from .summary import layer_table
from .zoo import ZOO, ZooEntry, build_zoo, get_entry

__all__ = ["parse", "Token", "NotationError", "build_network", "SpikingNetwork", "LayerInfo",
           "layer_table", "ZOO", "ZooEntry", "get_entry", "build_zoo"]
