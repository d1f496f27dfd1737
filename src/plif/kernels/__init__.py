"""Fused kernels: the neuron's, listed in :data:`plif.neurons.dispatch.FUSED`, and the conv block's,
listed in :data:`.block_backends.BLOCK_BACKENDS`; both tables name modules and functions only, and
one loader, :func:`plif.neurons.dispatch.load_kernel_module`, imports them lazily.

- ``triton``: GPU kernels (:mod:`.triton_neuron`);
- ``cpu``: a compiled C++/OpenMP loop (:mod:`.cpu_neuron`), built on first use.

Both are exposed as ``torch.library`` custom operators (``plif::*``) so that ``torch.compile``
traces through them.  This package imports nothing from :mod:`plif.neurons.dispatch`, and
importing it never needs a GPU, Triton or a compiler: a backend that cannot load is reported by
:func:`plif.neurons.backend_status` with its reason.
"""
