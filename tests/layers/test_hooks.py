"""The one hook test (plif.layers.hooks.hook_kind) that makes a fused run go as written."""
import pytest
import torch
from torch import nn

from plif.layers.hooks import hook_kind


@pytest.mark.filterwarnings("ignore:.*non-full backward hook")
@pytest.mark.parametrize("register, kind", [
    ("register_forward_hook", "a forward hook"), ("register_forward_pre_hook", "a forward hook"),
    ("register_full_backward_hook", "a backward hook"), ("register_full_backward_pre_hook", "a backward hook"),
    ("register_backward_hook", "a backward hook")])
def test_every_kind_of_module_hook_is_seen(register, kind):
    m = nn.Linear(2, 2)
    assert hook_kind([m]) == ""
    handle = getattr(m, register)(lambda *a: None)
    assert hook_kind([nn.Identity(), m]) == kind
    handle.remove()
    assert hook_kind([m]) == ""


def test_a_global_module_hook_is_seen():
    handle = torch.nn.modules.module.register_module_full_backward_hook(lambda *a: None)
    try:
        assert hook_kind([nn.Identity()]) == "a global module hook"
    finally:
        handle.remove()
    assert hook_kind([nn.Identity()]) == ""
