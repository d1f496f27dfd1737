"""plif: Parametric Leaky Integrate-and-Fire spiking neural networks (Fang et al., ICCV 2021)."""
from .models import build_network, build_zoo, parse
from .neurons import IF, LIF, PLIF, NeuronConfig, multi_step

__version__ = "0.1.0"
__all__ = ["IF", "LIF", "PLIF", "NeuronConfig", "multi_step", "build_network", "build_zoo", "parse", "__version__"]
