import math

import pytest
import torch
from torch import nn

from plif.deploy.bn_folding import fold_batchnorm
from plif.catalog import get_dataset
from plif.data.pipeline import eval_batches, load_test_split
from plif.deploy.stats import E_AC_PJ, E_MAC_PJ, ann_macs, collect_stats, conv_synops, render_stats
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
    assert conv_synops(s, conv) == count


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
                syn += conv_synops(h.flatten(0, 1), layer.layer)
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
    assert "PLIF" in text and "total" in text
    d = st.to_dict()
    assert d["energy_per_op_pJ"]["MAC"] == 4.6 and len(d["layers"]) == len(net.layers) - 2  # BN folded
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
    from plif.deploy.stats import spike_count

    conv = nn.Conv2d(64, 3, 3, padding=1)
    s = (torch.rand(2, 64, 9, 9, generator=torch.Generator().manual_seed(0)) < 0.9).float()
    want = conv_synops(s, conv)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert conv_synops(s, conv) == want
        assert spike_count(torch.ones(1001, dtype=torch.bfloat16)) == 1001


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
