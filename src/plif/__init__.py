"""plif: Parametric Leaky Integrate-and-Fire spiking neural networks (Fang et al., ICCV 2021)."""
from ._lazy import lazy_names

__version__ = "0.1.0"
__all__ = ["IF", "LIF", "PLIF", "NeuronConfig", "multi_step", "build_network", "build_zoo", "parse", "__version__"]

# imported on first use, so that torch-free parts (the event readers behind `plif data info`) stay light
_WHERE = {"build_network": ".models", "build_zoo": ".models", "parse": ".models", "IF": ".neurons",
          "LIF": ".neurons", "PLIF": ".neurons", "NeuronConfig": ".neurons", "multi_step": ".neurons"}


__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals())
