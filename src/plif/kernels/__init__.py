"""Fused kernels: the neuron's and the conv block's, listed in one table, :data:`plif.kernel_table.KERNELS`
(modules and functions by name), whose one loader imports them lazily and keeps why one did not load.

- ``triton``: GPU kernels (:mod:`.triton_neuron`);
- ``cpu``: a compiled C++/OpenMP loop (:mod:`.cpu_neuron`), built on first use.

Both are exposed as ``torch.library`` custom operators (``plif::*``) so that ``torch.compile``
traces through them.  Importing this package never needs a GPU, Triton or a compiler: a kernel
that cannot load is reported by :func:`plif.kernel_table.status` (the neuron's also by
:func:`plif.neurons.backend_status`) with its reason.
"""
