"""The one test of whether a module's hooks make a run of layers go as written.

A hook sees what the composed layers compute: a forward hook their outputs (firing-rate counts,
recorded spikes, a conv's output, which the fused block may make without its module or overwrite
with ``∂y``), a backward hook their gradients (which the fused block computes in one function,
never calling the modules' backward).  So where any of a run's layers, or a module inside one,
has a forward or backward hook (pre-hooks included, ``register_full_backward_hook`` and the older
``register_backward_hook`` alike), or torch's global module hooks are set, the run goes as written.
"""
from __future__ import annotations

from typing import Iterable

from torch import nn
from torch.nn.modules import module as _torch_module

__all__ = ["hook_kind"]


def hook_kind(modules: Iterable[nn.Module]) -> str:
    """``""`` when none of ``modules`` (each taken as it is, not its submodules) has a hook, else which
    kind the first one has: ``"a forward hook"``, ``"a backward hook"`` or ``"a global module hook"``
    (``torch.nn.modules.module.register_module_forward_hook`` and its kin, which every module runs)."""
    if (_torch_module._global_forward_hooks or _torch_module._global_forward_pre_hooks
            or _torch_module._global_backward_hooks or _torch_module._global_backward_pre_hooks):
        return "a global module hook"
    for m in modules:
        if m._forward_hooks or m._forward_pre_hooks:
            return "a forward hook"
        if m._backward_hooks or m._backward_pre_hooks:
            return "a backward hook"
    return ""
