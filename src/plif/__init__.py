"""plif: Parametric Leaky Integrate-and-Fire spiking neural networks (Fang et al., ICCV 2021)."""
import importlib

__version__ = "0.1.0"
__all__ = ["IF", "LIF", "PLIF", "NeuronConfig", "multi_step", "build_network", "build_zoo", "parse", "__version__"]

# imported on first use, so that torch-free parts (the event readers behind `plif data info`) stay light
_WHERE = {"build_network": ".models", "build_zoo": ".models", "parse": ".models", "IF": ".neurons",
          "LIF": ".neurons", "PLIF": ".neurons", "NeuronConfig": ".neurons", "multi_step": ".neurons"}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
