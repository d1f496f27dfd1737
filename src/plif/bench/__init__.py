"""Benchmarks as library code: each module times one thing and returns rows the CLI prints.

- :mod:`.neuron`: one neuron layer on every backend (``plif bench neuron``);
- :mod:`.train`: one training step per variant (``plif bench train``);
- :mod:`.memory`: peak memory of one training step per memory configuration (``plif bench memory``);
- :mod:`.block`: the fused conv block's Triton kernels against the composed layers (the GPU script);
- helpers: :mod:`.alternate` (steps timed in turns), :mod:`.kernels` (kernels per call and their
  device time), :mod:`.bound` (a step's FLOPs and bytes against a GPU's peaks), :mod:`.twin` and
  :mod:`.spikingjelly` (the SpikingJelly comparison).
"""
