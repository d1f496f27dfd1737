"""plif: Parametric Leaky Integrate-and-Fire spiking neural networks (Fang et al., ICCV 2021).

Tensors are time-first everywhere: a layer takes and returns ``[T, B, ...]``.  Where the pieces live:

- `plif.neurons`: ``IF``, ``LIF``, ``PLIF`` layers, their pure step functions and ``multi_step``;
- `plif.surrogate`: the surrogate-gradient registry, ``plif.surrogate.register_surrogate``;
- `plif.layers`: ``plif.layers.TimeFolded``, ``plif.layers.TimeInvariantDropout``,
  ``plif.layers.Voting``, ``plif.layers.SpikeMaxPool2d``, ...;
- `plif.models`: the paper's network notation, ``build_network`` and the zoo (``build_zoo``), and
  ``fuse`` / ``fused_blocks`` for the networks you write yourself, ``step`` to run any of them frame by frame;
- `plif.data`, `plif.data.events`, `plif.data.frames`: datasets, event-file readers, frame integration;
- `plif.encoding`: encoders of static images over T (``plif.encoding.PoissonEncoder``, latency, direct);
- `plif.monitor`: ``plif.monitor.FiringRateMonitor``, per-layer firing rates of any model;
- `plif.train`: ``plif.train.TrainConfig`` and ``plif.train.train``;
- `plif.deploy`: ``plif.deploy.load_run``, BN folding, spike-only inference, NIR export;
- `plif.experiments`: the ablation sweep, the report and the figures;
- `plif.interop`: ``plif.from_spikingjelly``, a SpikingJelly 2.0 model as plif layers.
"""
from ._lazy import lazy_names

__version__ = "0.1.0"
__all__ = ["IF", "LIF", "PLIF", "NeuronConfig", "multi_step", "build_network", "build_zoo", "parse", "fuse",
           "fused_blocks", "step", "PoissonEncoder", "LatencyEncoder", "DirectEncoder", "FiringRateMonitor",
           "from_spikingjelly", "__version__"]

# imported on first use, so that torch-free parts (the event readers behind `plif data info`) stay light
_WHERE = {"build_network": ".models", "build_zoo": ".models", "parse": ".models", "fuse": ".models",
          "fused_blocks": ".models", "step": ".models", "IF": ".neurons",
          "LIF": ".neurons", "PLIF": ".neurons", "NeuronConfig": ".neurons", "multi_step": ".neurons",
          "PoissonEncoder": ".encoding", "LatencyEncoder": ".encoding", "DirectEncoder": ".encoding",
          "FiringRateMonitor": ".monitor", "from_spikingjelly": ".interop"}


__getattr__, __dir__ = lazy_names(__name__, _WHERE, globals())
