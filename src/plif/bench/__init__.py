"""Benchmarks as library code: each module times one thing and returns rows the CLI prints.

- :mod:`.neuron`: one neuron layer on every backend (``plif bench neuron``).
- ``train`` (a separate module, :mod:`plif.bench.train`, when present): end-to-end training speed.
"""
