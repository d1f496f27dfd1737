import copy
import math
import re

import pytest
import torch
from torch import nn

from plif.deploy.bn_folding import fold_batchnorm
from plif.catalog import get_dataset
from plif.data.pipeline import eval_batches, load_test_split
from plif.deploy.op_counts import synops
from plif.deploy.stats import E_AC_PJ, E_MAC_PJ, ann_macs, collect_stats, render_stats
from plif.deploy.synthetic import random_batches
from plif.models import build_zoo
from plif.neurons import SpikingNeuron


def test_conv_synops_is_spikes_times_actual_fanout():
    conv = nn.Conv2d(2, 5, 3, stride=2, padding=1)
    s = (torch.rand(3, 2, 7, 6) < 0.4).float()
    # brute force: for every output position and channel, count the active inputs it reads
    padded = nn.functional.pad(s, (1, 1, 1, 1))
    count = 0
    for oy in range(4):
        for ox in range(3):
            count += padded[:, :, 2 * oy:2 * oy + 3, 2 * ox:2 * ox + 3].sum().item() * 5
    assert float(synops(conv, s)) == count


@pytest.mark.parametrize("conv", [nn.Conv2d(4, 6, 3, padding=1, groups=2), nn.Conv2d(3, 6, 3, stride=2, groups=3),
                                  nn.Conv1d(4, 8, 3, padding=2, dilation=2, groups=4),
                                  nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular")],
                         ids=["grouped", "depthwise", "conv1d-depthwise-dilated", "circular"])
def test_synops_of_grouped_depthwise_1d_and_padded_convolutions(conv):
    """A grouped convolution raised; each spike reaches the outputs of its group's channels only.  The
    expected count from first principles: with every weight 1, d(sum of outputs)/d(input) is the number
    of (output channel, position) pairs that read each input."""
    s = (torch.rand(2, conv.in_channels, *([7] * len(conv.kernel_size)), generator=torch.Generator().manual_seed(0))
         < 0.5).float()
    ones = conv.__class__(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                          conv.dilation, conv.groups, bias=False, padding_mode=conv.padding_mode)
    nn.init.ones_(ones.weight)
    x = torch.zeros_like(s, requires_grad=True)
    ones(x).sum().backward()
    assert float(synops(conv, s)) == (s * x.grad).sum().item() > 0


def test_counts_from_first_principles_on_a_tiny_module():
    """A hand-checkable network: a 3x3 conv of ones on a 4x4 image of halves (real-valued; every output >= 2:
    its IF fires at every step), then a linear layer charging its IF by 0.4 a step (a spike at t = 2 of 3)."""
    from plif import IF
    from plif.layers import TimeFolded
    from plif.models.inputs import repeat_over_time

    model = nn.Sequential(TimeFolded(nn.Conv2d(1, 2, 3, padding=1, bias=False)), IF(),
                          TimeFolded(nn.Flatten()), TimeFolded(nn.Linear(32, 3, bias=False)), IF())
    nn.init.ones_(model[0].layer.weight)
    nn.init.constant_(model[3].layer.weight, 0.4 / 32)
    x = repeat_over_time(torch.full((2, 1, 4, 4), 0.5), 3)  # a static image fed at each of T = 3 steps (stride 0)
    st = collect_stats(model, [x], T=3)
    assert [(ls.name, ls.kind, ls.neurons) for ls in st.layers] == [("0", "conv", 0), ("1", "IF", 32), ("3", "fc", 0),
                                                                   ("4", "IF", 3)]
    conv, sn1, fc, sn2 = st.layers
    assert (conv.macs, conv.synops, conv.ann_macs, conv.spike_input) == (2 * 2 * 16 * 9, 0, 2 * 2 * 16 * 9, False)
    assert st.firing_rate(sn1) == 1.0 and sn1.spikes == 2 * 3 * 32
    assert (fc.synops, fc.macs, fc.ann_macs, fc.spike_input) == (2 * 3 * 32 * 3, 0, 2 * 32 * 3, True)
    assert sn2.spikes == 2 * 3 and st.firing_rate(sn2) == pytest.approx(1 / 3)
    assert st.totals["synops"] == 3 * 32 * 3 and st.totals["snn_macs"] == 16 * 2 * 9


def test_the_same_network_as_a_module_and_in_the_notation_counts_the_same():
    """One path: a network written as a module (fed the image over T as a stride-0 view, as a --model run
    is) and the same layers in the paper's notation (fed the image itself) give the same rows, numbers and
    names; the image's first convolution counted once a sample in both."""
    from plif import build_network
    from plif.models.inputs import repeat_over_time

    torch.manual_seed(0)
    net = build_network("c4k3s1-BN-PLIF-MPk4s4-FC100-PLIF-APk10s10", (1, 28, 28), 2)
    with torch.no_grad():
        for p in net.parameters():
            p.uniform_(-0.5, 1.0)  # every layer fires, not always
    model = nn.Sequential(*net.layers)  # the same modules, named 0, 1, ... as layers.0, layers.1, ...
    images = [(torch.rand(5, 1, 28, 28, generator=torch.Generator().manual_seed(i)), torch.arange(5)) for i in (1, 2)]
    ref = collect_stats(net, images)
    got = collect_stats(model, [(repeat_over_time(x, 2), y) for x, y in images], T=2)
    assert got.samples == ref.samples == 10 and got.correct == ref.correct
    assert got.totals == ref.totals and ref.totals["synops"] > 0 and ref.totals["snn_macs"] == 28 * 28 * 4 * 9
    assert [f"layers.{ls.name}" for ls in got.layers] == [ls.name for ls in ref.layers] == \
        ["layers.0", "layers.2", "layers.5", "layers.6"]
    rates = lambda st: [st.firing_rate(ls) for ls in st.layers if ls.neurons]  # noqa: E731
    assert rates(got) == rates(ref) and all(0 < r < 1 for r in rates(ref))


def test_a_paper_like_network_counts_what_mains_layer_walk_counted():
    """The values main's notation walk (deploy/stats.py before the hooks, 54a87dd) gave on this network,
    input and seed: the counting by hooks gives them all (static images, then binary event frames)."""
    from plif.deploy.synthetic import random_batches
    from plif_testing import small_net

    net = small_net("{c16k3s1-BN-PLIF-MPk2s2}*2-DP-FC64-PLIF-DP-FC20-PLIF-APk2s2", (1, 28, 28), T=4)
    st = collect_stats(net, random_batches((1, 28, 28), 8, batch_size=4))
    assert {k: st.totals[k] for k in ("synops", "snn_macs", "ann_macs")} == \
        {"synops": 569044.0, "snn_macs": 112896.0, "ann_macs": 615936.0}
    assert [(ls.spikes, ls.neurons) for ls in st.layers if ls.neurons] == [(39142.0, 12544), (6563.0, 3136), (112.0, 64),
                                                                           (47.0, 20)]
    assert [(ls.synops, ls.macs, ls.ann_macs) for ls in st.layers if ls.ann_macs] == [
        (0.0, 903168.0, 903168.0), (4181600.0, 0.0, 3612672.0), (368512.0, 0.0, 401408.0), (2240.0, 0.0, 10240.0)]
    frames = (torch.rand(4, 3, 1, 28, 28, generator=torch.Generator().manual_seed(2)) < 0.2).float()
    st = collect_stats(net, [frames])
    assert (st.totals["synops"], st.totals["snn_macs"]) == (111796.0, 0.0)
    assert [ls.spikes for ls in st.layers if ls.neurons] == [305.0, 1049.0, 3.0, 0.0]


def test_counting_reads_the_device_once_not_once_a_layer(make_net, monkeypatch):
    """No host sync in a hook: every count stays a tensor until the end, then one read for every count
    (operations, spikes, correct predictions), none a layer or a batch."""
    net = make_net().eval()
    reads = []
    real = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append(t.numel()) or real(t))
    for name in ("item", "__bool__", "__float__", "__int__"):
        monkeypatch.setattr(torch.Tensor, name, lambda t, *a: pytest.fail(f"a host read ({name}) while counting"))
    collect_stats(net, [(torch.randn(3, 1, 16, 16), torch.tensor([0, 1, 0]))] * 3)
    assert len(reads) == 1


def test_ann_macs_of_the_mnist_network():
    net = fold_batchnorm(build_zoo("mnist"))
    macs = [ann_macs(l.layer, i.out_shape) for l, i in zip(net.layers, net.info) if hasattr(l, "layer")]
    want = 128 * 28 * 28 * 9 + 128 * 14 * 14 * 128 * 9 + 128 * 7 * 7 * 2048 + 2048 * 100
    assert sum(macs) == want


def test_collect_stats_counts_spikes_synops_and_macs(make_net):
    net = make_net().eval()
    x = torch.randn(10, 1, 16, 16)
    st = collect_stats(net, [x])
    folded = fold_batchnorm(net)
    # independent recount: run layer by layer on the repeated input
    h, rates, syn = x.unsqueeze(0).expand(net.T, *x.shape), [], 0.0
    with torch.no_grad():
        for i, layer in enumerate(folded.layers):
            if i > 0 and isinstance(getattr(layer, "layer", None), nn.Linear):
                syn += h.sum().item() * layer.layer.out_features
            if i > 0 and isinstance(getattr(layer, "layer", None), nn.Conv2d):
                syn += float(synops(layer.layer, h.flatten(0, 1)))
            h = layer(h)
            if isinstance(layer, SpikingNeuron):
                rates.append(h.mean().item())
    got_rates = [st.firing_rate(ls) for ls in st.layers if ls.neurons]
    assert got_rates == pytest.approx(rates, rel=1e-6) and min(rates) > 0
    t = st.totals
    assert t["synops"] == pytest.approx(syn / 10, rel=1e-9)
    encoder = 8 * 16 * 16 * 9
    assert t["snn_macs"] == encoder  # static image: the encoder runs once per sample
    assert t["ann_macs"] == encoder + 8 * 8 * 8 * 8 * 9 + 8 * 4 * 4 * 40 + 40 * 20
    assert t["energy_snn_uJ"] == pytest.approx((encoder * E_MAC_PJ + t["synops"] * E_AC_PJ) * 1e-6)
    assert t["energy_ann_uJ"] == pytest.approx(t["ann_macs"] * 4.6e-6)


def test_event_frames_cost_the_encoder_T_times_and_labels_give_accuracy(make_net):
    net = make_net().eval()
    x = (torch.rand(6, 4, 1, 16, 16) < 0.5).float() * 3
    y = torch.tensor([0, 1, 1, 0])
    st = collect_stats(net, [(x, y)])
    assert st.totals["snn_macs"] == 6 * 8 * 16 * 16 * 9
    with torch.no_grad():
        pred = net(x).mean(0).argmax(-1)
    assert st.correct == int((pred == y).sum())


def test_max_samples_and_render(make_net):
    net = make_net()
    st = collect_stats(net, random_batches(net.input_shape, 25, batch_size=10), max_samples=12)
    assert st.samples == 12
    text = render_stats(st)
    assert "Horowitz" in text and "ISSCC 2014" in text and "4.6 pJ" in text and "0.9 pJ" in text
    assert re.search(r"\n1 +layers\.2 +PLIF +0\.\d{4}\n", text) and "total" in text
    d = st.to_dict()
    synapses_and_neurons = [m for m in net.layers if isinstance(getattr(m, "layer", m), (nn.Conv2d, nn.Linear, SpikingNeuron))]
    assert d["energy_per_op_pJ"]["MAC"] == 4.6 and len(d["layers"]) == len(synapses_and_neurons)
    with pytest.raises(ValueError, match="no samples"):
        collect_stats(net, [])


def test_stats_on_real_mnist_test_images(shared_data, make_net):
    shared_data("mnist_idx/t10k-images-idx3-ubyte.gz")  # skips when the file is missing
    net = make_net("c8k3s1-BN-PLIF-MPk2s2-FC20-PLIF-APk10s10", input_shape=(1, 28, 28), T=4)
    split, prepare = load_test_split(get_dataset("mnist"), shared_data("mnist_idx"), 4, limit=40)
    batches = eval_batches(split, prepare, batch_size=16)
    st = collect_stats(net, batches)
    assert st.samples == 40 and st.correct is not None
    assert math.isfinite(st.totals["energy_ratio_ann_over_snn"])


def test_counts_stay_exact_under_bf16_autocast():
    """Under bf16 autocast a conv's reach (up to C_in*k*k = 576 here) and a spike sum were rounded to
    bf16 (integers step by 2 above 256): ``plif stats`` of a bf16 run counts in fp32/fp64 all the same."""
    conv = nn.Conv2d(64, 3, 3, padding=1)
    s = (torch.rand(2, 64, 9, 9, generator=torch.Generator().manual_seed(0)) < 0.9).float()
    want = synops(conv, s)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert synops(conv, s) == want
        assert synops(nn.Linear(1001, 1), torch.ones(1001, dtype=torch.bfloat16)) == 1001


def test_collect_stats_runs_the_layers_in_the_precision_asked(make_net):
    """amp='bf16': every layer runs under bf16 autocast (the precision of a run that trained in bf16)
    and the result says which precision it ran in; amp=None: fp32."""
    net = make_net().eval()
    seen = []
    net.layers[0].register_forward_hook(lambda m, i, o: seen.append(torch.is_autocast_enabled("cpu")))
    x = torch.randn(4, 1, 16, 16)
    st = collect_stats(net, [x], fold_bn=False, amp="bf16", precision="precision: bf16 autocast")
    assert seen == [True] and st.to_dict()["precision"] == "precision: bf16 autocast"
    assert "\nprecision: bf16 autocast\n" in render_stats(st)
    collect_stats(net, [x], fold_bn=False)
    assert seen == [True, False]


def test_a_spiking_transformer_counts_its_1d_convolutions_and_attention_products():
    """plif stats on Spikformer missed the Conv1d layers and the products of spikes Q Kᵀ V: each head's
    (v kᵀ) q adds 1 for every pair of v and k spikes of a token, then d counts for every q spike."""
    from plif.models.inputs import repeat_over_time
    from plif.models.spikformer import spikformer
    from plif.monitor import OutputMonitor

    torch.manual_seed(0)
    model = spikformer((3, 8, 8), 4, T=2, width=16, depth=1, heads=2, mlp_ratio=1.0).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv1d, nn.Conv2d)):
                m.weight.uniform_(-0.1, 0.5)  # every layer fires
    x = repeat_over_time(torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(1)), 2)
    st = collect_stats(model, [x], T=2, fold_bn=False)
    rows = {ls.name: ls for ls in st.layers}
    with OutputMonitor(model, layers=["blocks.0.attn.qkv_lif", "blocks.0.mlp.neuron1"]) as mon, torch.no_grad():
        model(x)
    qkv = mon["blocks.0.attn.qkv_lif"][0].unflatten(2, (3, 2, 8))  # [T, B, q/k/v, heads, d, L]
    q, k, v = qkv.unbind(2)
    want = torch.einsum("tbhil,tbhjl->", v, k) + 8 * q.sum()
    products = rows["blocks.0.attn.products"]
    assert products.kind == "attention" and products.spike_input and products.synops == want.item() > 0
    assert products.ann_macs == 3 * 2 * 2 * 8 * 8 * 4  # B heads (v kᵀ and its product with q) d d L
    fc2 = rows["blocks.0.mlp.fc2.0"]  # a 1x1 Conv1d on spikes: each spike reaches its 16 outputs
    assert fc2.kind == "conv" and fc2.synops == 16 * mon["blocks.0.mlp.neuron1"][0].sum().item() > 0
    names = [ls.name for ls in st.layers]
    assert names.index("blocks.0.attn.qkv_lif") < names.index("blocks.0.attn.products") < names.index(
        "blocks.0.attn.attn_lif")


def test_every_memory_mode_and_a_fused_module_count_as_the_layers_as_written(make_net):
    """The fused plans run the layers as written while a hook is on one (plif.layers.hooks): no call of a
    synapse or neuron goes uncounted, whatever the memory mode, for a notation network or a fused module."""
    from plif import fuse
    from plif.models.inputs import repeat_over_time
    from plif.models.memory import MEMORY_PRESETS

    x, frames = torch.randn(5, 1, 16, 16), (torch.rand(6, 5, 1, 16, 16) < 0.3).float()

    def counts(model, batches):
        st = collect_stats(model, batches, T=6)
        return st.totals, [(ls.name, ls.spikes, ls.synops, ls.macs) for ls in st.layers]

    net = make_net()
    want = counts(copy.deepcopy(net).set_memory(MEMORY_PRESETS["none"]), [x, frames])
    for mode in ("fused", "all"):
        assert counts(copy.deepcopy(net).set_memory(MEMORY_PRESETS[mode]), [x, frames]) == want, mode
    module = fuse(nn.Sequential(*copy.deepcopy(net).layers))
    got = counts(module, [repeat_over_time(x, 6), frames])
    assert got[0] == want[0] and [(f"layers.{n}", *rest) for n, *rest in got[1]] == want[1]


@pytest.mark.parametrize("model,kw,error,says", [
    (nn.Sequential(nn.Linear(4, 2)), {}, ValueError, "T must be the network's time-steps (a positive integer), got None"),
    (nn.Sequential(nn.Linear(4, 2)), {"T": 0}, ValueError, "got 0"),
    (nn.Sequential(nn.Linear(4, 2)), {"T": True}, ValueError, "got True"),
    ("FC10-PLIF", {}, TypeError, "collect_stats takes an nn.Module, got str"),
])
def test_collect_stats_refuses_what_it_cannot_count_in_one_line(model, kw, error, says):
    with pytest.raises(error) as e:
        collect_stats(model, [torch.rand(2, 3, 4)], **kw)
    assert says in str(e.value) and "\n" not in str(e.value)
