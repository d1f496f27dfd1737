"""plif.layers.attention: the products of spikes against the papers' token-first formulas, by hand on a tiny
case and on random spikes; the layers' shapes, heads and refusals."""
from __future__ import annotations

import pytest
import torch

from plif.layers.attention import (QKAttention, SpikeDrivenSelfAttention, SpikingSelfAttention, qk_attention_input,
                                   spike_driven_attention_input, spiking_self_attention, split_heads)


def _spikes(*shape, seed=0):
    return (torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) > 0.5).double()


def test_ssa_by_hand():
    """One head, d=2 channels, L=2 tokens: Q = [[1,0],[1,1]] (token-first), K = [[1,1],[0,1]], V = [[1,0],[0,1]];
    Q Kᵀ = [[1,0],[2,1]], Q Kᵀ V = [[1,0],[2,1]]; channel-first out = its transpose · 0.125."""
    q = torch.tensor([[1.0, 0.0], [1.0, 1.0]]).T
    k = torch.tensor([[1.0, 1.0], [0.0, 1.0]]).T
    v = torch.eye(2)
    out = spiking_self_attention(q, k, v, 0.125)
    assert out.tolist() == [[0.125, 0.25], [0.0, 0.125]]


def test_ssa_is_the_papers_token_first_product():
    q, k, v = (_spikes(2, 3, 4, 5, 7, seed=s) for s in range(3))  # [T, B, heads, d, L]
    Q, K, V = (t.transpose(-1, -2) for t in (q, k, v))  # [T, B, heads, L, d]
    want = (Q @ K.transpose(-1, -2) @ V * 0.125).transpose(-1, -2)
    torch.testing.assert_close(spiking_self_attention(q, k, v, 0.125), want, rtol=0, atol=0)


def test_qk_and_spike_driven_sums():
    q = _spikes(2, 1, 3, 4, 6)  # [T, B, heads, d, L]
    assert torch.equal(qk_attention_input(q, "token"), q.sum(3, keepdim=True))  # per token, over its channels
    assert torch.equal(qk_attention_input(q, "channel"), q.sum(4, keepdim=True))  # per channel, over the tokens
    k, v = _spikes(2, 1, 3, 6, 4, seed=1), _spikes(2, 1, 3, 6, 4, seed=2)  # token-first [.., L, d]
    want = torch.stack([(k[..., j] * v[..., j]).sum(-1) for j in range(4)], -1).unsqueeze(-2)
    assert torch.equal(spike_driven_attention_input(k, v), want)


def test_split_heads_is_a_view_in_channel_order():
    x = torch.arange(2 * 1 * 6 * 3.0).reshape(2, 1, 6, 3)
    h = split_heads(x, 3)
    assert h.shape == (2, 1, 3, 2, 3) and h.data_ptr() == x.data_ptr()
    assert torch.equal(h[:, :, 1], x[:, :, 2:4])


def test_layers_map_shapes():
    x = _spikes(3, 2, 16, 5).float()
    assert SpikingSelfAttention(16, 4)(x).shape == x.shape
    assert QKAttention(16, 2, "channel")(x).shape == x.shape
    maps = torch.rand(3, 2, 16, 2, 3)
    assert SpikeDrivenSelfAttention(16, 4)(maps).shape == maps.shape
    layer = SpikingSelfAttention(16, 4)
    assert layer.attn_lif.cfg.v_threshold == 0.5 and layer.qkv_lif.cfg.v_threshold == 1.0
    assert layer.qkv_lif.cfg.surrogate == "sigmoid" and layer.qkv_lif.tau == 2.0


@pytest.mark.parametrize("call,match", [
    (lambda: SpikingSelfAttention(16, 3), r"num_heads must be a positive integer dividing dim 16, got 3"),
    (lambda: QKAttention(16, 2, "pixel"), r"kind must be 'token' or 'channel', got 'pixel'"),
    (lambda: SpikingSelfAttention(16, 2)(torch.rand(2, 16, 5)), r"SpikingSelfAttention takes tokens \[T, B, C, L\]"),
    (lambda: SpikeDrivenSelfAttention(16, 2)(torch.rand(2, 1, 16, 5)), r"takes feature maps \[T, B, C, H, W\]"),
])
def test_refusals(call, match):
    with pytest.raises(ValueError, match=match):
        call()
