"""GPU speed switches: one home, parsed from ``$PLIF_GPU``, scoped by ``switched``; the candidates
the device run measures; the train-side switches keep what a network computes."""
import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from plif.kernels import gpu_switches
from plif.kernels.gpu_switches import GpuSwitches, current, parse, switched
from plif.kernels.triton_launch import Launch, launch_config

REPO = Path(__file__).resolve().parents[2]


def _candidates():
    """The candidates as the GPU script's ``candidates`` stage loads them (its own loader)."""
    spec = importlib.util.spec_from_file_location("gpu_stages", REPO / "benchmarks" / "gpu" / "gpu_stages.py")
    stages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stages)
    cands, note = stages.load_candidates(REPO / "benchmarks" / "gpu" / "candidates.py")
    assert cands and not note
    return sys.modules["plif_gpu_candidates"]


def test_defaults_are_what_the_first_h100_run_measured():
    assert GpuSwitches() == GpuSwitches(launch="default", prefetch=False, lean_eager=False, tf32=False,
                                        channels_last=False)
    assert launch_config(2 ** 20, 1) == Launch(1024, 4) and launch_config(100, 1) == Launch(128, 4)


def test_env_syntax_and_one_line_errors():
    assert parse("tf32, launch=fine,prefetch=0") == GpuSwitches(tf32=True, launch="fine")
    assert parse("") == GpuSwitches()
    with pytest.raises(ValueError, match="PLIF_GPU: unknown switch 'tf3'"):
        parse("tf3")
    with pytest.raises(ValueError, match="launch='huge'; valid: default, fine, wide"):
        parse("launch=huge")
    with pytest.raises(ValueError, match="prefetch='maybe' is not a yes/no value"):
        parse("prefetch=maybe")


def test_env_is_read_once_and_switched_restores(monkeypatch):
    monkeypatch.setattr(gpu_switches, "_current", None)
    monkeypatch.setenv("PLIF_GPU", "prefetch")
    assert current().prefetch and not current().tf32
    before = torch.backends.cuda.matmul.allow_tf32
    with switched(tf32=True, launch="wide") as s:
        assert s is current() and s.tf32 and s.prefetch and s.launch == "wide"
        assert torch.backends.cuda.matmul.allow_tf32
    assert current() == GpuSwitches(prefetch=True) and torch.backends.cuda.matmul.allow_tf32 == before
    with pytest.raises(ValueError, match="unknown GPU switch 'fast'"), switched(fast=True):
        pass


def test_fine_table_splits_only_layers_with_few_programs():
    """FC T8 B64 N2048 (128 programs of 1,024 under the default) gets 1,024 programs of 128; the
    28x28 and 128x128 cases already have more than 1,024 programs and keep their launch."""
    assert launch_config(64 * 2048, 1, "fine") == Launch(128, 1)
    assert launch_config(16 * 128 * 28 * 28, 1, "fine") == Launch(1024, 4)
    assert launch_config(16 * 28 * 28, 128, "fine") == Launch(1024, 4)  # one τ per channel
    assert launch_config(16 * 128 * 128 * 128, 1, "wide") == Launch(1024, 8)
    assert launch_config(40, 1, "fine") == Launch(64, 1)
    with pytest.raises(ValueError, match="unknown launch table 'x'"):
        launch_config(10, 1, "x")


def test_candidates_are_named_once_and_switch_on_and_off():
    mod = _candidates()
    names = [c.name for c in mod.CANDIDATES]
    assert len(names) == len(set(names)) and {c.kind for c in mod.CANDIDATES} == {"neuron", "train"}
    fields = set(GpuSwitches.__dataclass_fields__)
    covered = set()
    for c in mod.CANDIDATES:
        assert c.decides and "\n" not in c.decides and set(c.switches) <= fields
        covered |= set(c.switches)
        with c.apply():
            assert all(getattr(current(), k) == v for k, v in c.switches.items())
        assert current() == GpuSwitches()
    assert covered == fields  # every switch is measured by some candidate


def test_host_overhead_measures_both_dispatch_paths():
    pytest.importorskip("triton")
    r = _candidates().host_overhead(calls=5)
    assert set(r) == {"op", "lean"} and all(v["fwd_bwd_us"] > v["fwd_us"] > 0 for v in r.values())


def _narrow(**kw):
    from plif.models import build_network

    torch.manual_seed(0)
    return build_network("{c4k3s1-BN-PLIF-MPk2s2}*2-DP-FC16-PLIF-DP-FC20-PLIF-APk2s2", (3, 12, 12), 3,
                         backend="bptt", **kw)


def _step(net, x):
    torch.manual_seed(1)  # the same dropout draw
    out = net(x)
    out.sum().backward()
    return out.detach(), [p.grad for p in net.parameters()]


def test_channels_last_network_computes_what_the_default_one_does():
    """``channels_last`` converts the network build_network makes; in fp64 its spikes are the
    same and its gradients equal to rounding (dropout draws its mask in logical order)."""
    x = torch.randn(2, 3, 12, 12, dtype=torch.float64)
    ref = _narrow().double()
    with switched(channels_last=True):
        net = _narrow().double()
    assert net.layers[0].layer.weight.is_contiguous(memory_format=torch.channels_last)
    assert not ref.layers[0].layer.weight.is_contiguous(memory_format=torch.channels_last)
    out_r, g_r = _step(ref, x)
    out_c, g_c = _step(net, x)
    assert torch.equal(out_r, out_c)
    for a, b in zip(g_r, g_c):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


class _ConvMatmulDtypes(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if "convolution" in name or name.endswith(("mm", "addmm", "bmm")):
            self.seen.add((name, tuple(a.dtype for a in args if isinstance(a, torch.Tensor))))
        return func(*args, **(kwargs or {}))


def test_amp_bf16_already_runs_every_conv_and_matmul_in_bf16():
    """Issue 30 asks for bf16 in every conv and matmul under ``--amp bf16``: autocast already does
    it, forward and backward, so this is a fact to keep rather than a candidate."""
    from plif.train.graph import autocast_context

    net, x = _narrow(), torch.randn(2, 3, 12, 12)
    with _ConvMatmulDtypes() as log:
        with autocast_context(torch.device("cpu"), "bf16"):
            out = net(x)
        out.float().sum().backward()
    assert {n for n, _ in log.seen} >= {"aten.convolution", "aten.convolution_backward", "aten.mm"}
    assert all(set(dtypes) == {torch.bfloat16} for _, dtypes in log.seen), log.seen
