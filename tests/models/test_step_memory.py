"""The least memory of a training step (plif.models.step_memory): the rules by hand on a small network,
never more than what a real step saves for backward in any memory mode, and cheap on the meta device
at any T (issue 53: --T 100000 was OOM-killed, --T 20000 --batch-size 32 ended in the allocator's error)."""
import pytest
import torch

from plif.models import build_network
from plif.models.memory import MEMORY_PRESETS
from plif.models.step_memory import step_memory

SPEC = "c4k3s1-BN-PLIF-MPk2s2-FC10-PLIF"  # on (2, 8, 8): conv 4x8x8 = 256, pool 4x4x4 = 64, FC 10


def _net(T=3, spec=SPEC, shape=(2, 8, 8), **kw):
    torch.manual_seed(0)
    return build_network(spec, shape, T, **kw)


@pytest.mark.parametrize("mode, want", [
    # per sample and step (T*B = 6): conv input skipped (the network's own); none: BN input 4x256, H 4x256,
    # max-pool offsets 1x64, FC input 4x64, H 4x10
    ("none", 4 * 256 + 4 * 256 + 1 * 64 + 4 * 64 + 4 * 10),
    # spikes: the pool keeps a byte per output, the FC its spike input as a byte
    ("spikes", 4 * 256 + 4 * 256 + 1 * 64 + 1 * 64 + 4 * 10),
    # fused: the first block's conv may be made again (few-tap): the pooled byte; then FC's byte, H
    ("fused", 64 + 64 + 40),
    ("exact", 64 + 64 + 40),
    ("low", 64 + 40),  # the first block time-chunked: nothing beyond its input
    ("all", 64 + 2 * 10),  # and H in bf16
    ("checkpoint", 4 * 64 + 4 * 10),  # the block keeps its (network) input: the FC's input and H remain
])
def test_the_rules_by_hand_on_event_frames(mode, want):
    net = _net()
    m = step_memory(net, 2, MEMORY_PRESETS[mode])
    assert m.activations == 6 * want
    assert m.input == 6 * 4 * 128  # [T, B, 2, 8, 8] fp32
    assert m.weights == 16 * sum(p.numel() for p in net.parameters())
    assert m.total == m.input + m.activations + m.weights


def test_a_static_image_is_counted_once_and_bf16_halves_what_autocast_casts():
    net = _net()
    fused = step_memory(net, 2, MEMORY_PRESETS["fused"], static=True)
    # the hoisted first conv's output y [B, 4, 8, 8] kept once, then the pooled byte, FC's byte and H over T*B
    assert fused.input == 2 * 4 * 128 and fused.activations == 2 * 4 * 256 + 6 * (64 + 64 + 40)
    none = step_memory(net, 2, MEMORY_PRESETS["none"])
    bf16 = step_memory(net, 2, MEMORY_PRESETS["none"], amp="bf16")
    assert none.activations - bf16.activations == 6 * 2 * (256 + 64)  # BN's and FC's inputs in two bytes
    poisson = _net(encoder="poisson")  # an encoder's spikes are [T, B, ...]
    assert step_memory(poisson, 2, MEMORY_PRESETS["fused"], static=True).input == 6 * 4 * 128


def _saved_bytes(net, x, monkeypatch) -> int:
    """What a real training step saves for backward: the bytes of the distinct tensors autograd keeps
    and the inputs of checkpointed blocks, the parameters and the network's input left out."""
    from plif.models import memory

    seen, skip = {}, {p.data_ptr() for p in net.parameters()} | {x.data_ptr()}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip:
            seen[ptr] = max(seen.get(ptr, 0), t.untyped_storage().nbytes())
        return t

    real = memory.checkpoint

    def checkpoint(fn, x, *args, **kw):  # what a checkpointed block keeps: its input
        pack(x)
        return real(fn, x, *args, **kw)

    monkeypatch.setattr(memory, "checkpoint", checkpoint)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = net(x)
    out.float().mean().backward()
    return sum(seen.values())


@pytest.mark.parametrize("mode", list(MEMORY_PRESETS))
@pytest.mark.parametrize("static", [False, True])
def test_never_more_than_a_real_step_saves(mode, static, monkeypatch):
    net = _net(T=4, spec="c8k3s1-BN-PLIF-MPk2s2-c8k3s1-BN-PLIF-MPk2s2-DP-FC32-PLIF-FC10-PLIF", shape=(2, 16, 16),
               memory=MEMORY_PRESETS[mode]).train()
    g = torch.Generator().manual_seed(1)
    x = torch.rand(3, 2, 16, 16, generator=g) if static else (torch.rand(4, 3, 2, 16, 16, generator=g) > 0.7).float()
    estimate = step_memory(net, 3, MEMORY_PRESETS[mode], static=static)
    assert 0 < estimate.activations <= _saved_bytes(net, x, monkeypatch)


def test_cheap_at_any_T_on_the_meta_device():
    with torch.device("meta"):
        net = build_network("{c128k3s1-BN-PLIF-MPk2s2}*2-DP-FC2048-PLIF-DP-FC100-PLIF-APk10s10", (1, 28, 28), 100_000)
    m = step_memory(net, 16, MEMORY_PRESETS["fused"], static=True)
    # the first block's pooled byte alone: 100000 * 16 * 128 * 14 * 14 bytes
    assert m.activations >= 100_000 * 16 * 128 * 14 * 14 > 2**35
