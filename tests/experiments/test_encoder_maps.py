import json

import numpy as np
import pytest
import torch

from plif.cli.main import main
from plif.experiments.encoder_maps import layer_spikes, parse_channels, plot_encoder_figures
from plif.models import build_network
from plif.runs import save_checkpoint

from .helpers import assert_real_png, shared_dir

NET = "c6k3s1-BN-PLIF-MPk2s2-DP-FC100-PLIF-APk10s10"


def _hand_run(path, input_shape, T, dataset, data_dir=None):
    """A run folder with an untrained network whose encoder is made to fire on bright input."""
    kwargs = {"neuron": "PLIF", "tau0": 2.0, "pool": None, "per_channel_tau": False, "bn_per_step": False,
              "surrogate": "atan", "detach_reset": True, "backend": "auto"}
    torch.manual_seed(0)
    net = build_network(NET, input_shape, T, **kwargs)
    with torch.no_grad():
        conv = net.layers[0].layer
        conv.weight.normal_(0, 0.5)
        conv.weight[0] = 1.0  # channel 0 sums its 3x3 neighbourhood: fires on bright regions
    config = {"dataset": dataset, "network": NET, "input_shape": list(input_shape), "T": T,
              "network_kwargs": kwargs, "data_dir": str(data_dir) if data_dir else None}
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    save_checkpoint(path / "checkpoints" / "best_test.pt", {"model": net.state_dict(), "config": config, "epoch": 1})
    return path, net


def test_layer_spikes_are_the_encoder_neurons_output():
    torch.manual_seed(1)
    net = build_network(NET, (1, 8, 8), 3)
    net.eval()
    x = torch.randn(2, 1, 8, 8)
    s = layer_spikes(net, x, 0)
    assert s.shape == (3, 2, 6, 8, 8)
    with torch.no_grad():
        h = net.layers[1](net.layers[0](x.unsqueeze(0).expand(3, *x.shape)))
        ref = net.layers[2](h)
    assert torch.equal(s, ref)
    assert layer_spikes(net, x, 1).shape == (3, 2, 100)
    with pytest.raises(ValueError, match=r"valid: 0\.\.1 \(2 spiking layers\)"):
        layer_spikes(net, x, 2)


def test_parse_channels_names_the_valid_range():
    assert parse_channels(None, 6) == [0, 1, 2, 3]
    assert parse_channels("5, 0", 6) == [5, 0]
    with pytest.raises(ValueError, match=r"channel 6 does not exist; valid: 0\.\.5"):
        parse_channels("1,6", 6)
    with pytest.raises(ValueError, match=r"'a' is not a channel number; valid: 0\.\.5"):
        parse_channels("a", 6)


def test_plot_encoder_on_static_test_samples(tiny_fashion, tmp_path):
    run, net = _hand_run(tmp_path / "run", (1, 28, 28), 4, "fashion-mnist", tiny_fashion)
    out = tmp_path / "fig"
    paths = plot_encoder_figures(run, out, channels="0,2", samples=3)
    assert [p.name for p in paths] == ["encoder_rates.png", "encoder_rate_grid.png", "encoder_spikes_t0.png"]
    for p in paths:
        assert_real_png(p)
    rates = json.loads((out / "encoder_rates.json").read_text())
    assert rates["channels"] == [0, 2] and len(rates["labels"]) == 3 and rates["T"] == 4
    r0 = torch.tensor(rates["rates"]["0"])
    assert r0.shape == (3, 28, 28)
    assert 0.0 < float(r0.mean()) < 1.0  # channel 0 fires on the bright bar, not everywhere
    grid = torch.tensor(json.loads((out / "encoder_rate_grid.json").read_text())["rates"])
    assert grid.shape == (6, 28, 28)
    torch.testing.assert_close(grid[0], r0[0], atol=1e-6, rtol=0)
    spikes = torch.tensor(json.loads((out / "encoder_spikes_t0.json").read_text())["spikes"])
    assert set(spikes.unique().tolist()) <= {0, 1} and spikes.shape == (6, 28, 28)


def test_plot_encoder_errors(tiny_fashion, tmp_path, capsys):
    run, _ = _hand_run(tmp_path / "run", (1, 28, 28), 2, "fashion-mnist", tiny_fashion)
    base = ["plot", "encoder", str(run), "--out", str(tmp_path / "o")]
    assert main(base + ["--channels", "9"]) == 2
    assert "channel 9 does not exist; valid: 0..5" in capsys.readouterr().err
    assert main(base + ["--layer", "4"]) == 2
    assert "spiking layer 4 does not exist; valid: 0..1" in capsys.readouterr().err
    assert main(base + ["--layer", "1"]) == 2
    assert "not [C, H, W] maps" in capsys.readouterr().err
    assert main(base + ["--samples", "0", "--event", str(tmp_path / "x.bin")]) == 2
    assert "not event frames" in capsys.readouterr().err
    assert main(["plot", "encoder", "--out", str(tmp_path / "o")]) == 2
    assert "needs a run folder" in capsys.readouterr().err


def test_plot_encoder_on_a_real_nmnist_event_file(tmp_path):
    sample = shared_dir() / "data" / "nmnist" / "sample_nmnist.bin"
    if not sample.is_file():
        pytest.skip(f"no N-MNIST sample at {sample}")
    run, net = _hand_run(tmp_path / "run", (2, 34, 34), 5, "nmnist")
    paths = plot_encoder_figures(run, tmp_path / "fig", samples=0, event_file=sample)
    assert [p.name for p in paths] == ["event_rates.png", "event_rate_grid.png", "event_spikes_t0.png"]
    for p in paths:
        assert_real_png(p, min_std=0.01)
    from plif.data.events import read_events
    from plif.data.frames import events_to_frames

    frames = torch.from_numpy(events_to_frames(read_events(sample), 5, (34, 34))).unsqueeze(1)
    ref = layer_spikes(net, frames, 0).float().mean(0)[0]
    grid = torch.tensor(json.loads((tmp_path / "fig" / "event_rate_grid.json").read_text())["rates"])
    torch.testing.assert_close(grid, ref, atol=1e-6, rtol=0)


def test_spike_snapshot_uses_two_flat_colours_and_rates_a_continuous_map():
    pytest.importorskip("matplotlib")
    from plif.experiments.encoder_maps import _grid_figure

    spikes = (np.arange(2 * 5 * 5).reshape(2, 5, 5) % 3 == 0).astype(np.float32)
    fig = _grid_figure(spikes, "spikes", 1.0, "output", binary=True)
    images = [im for ax in fig.axes for im in ax.images]
    assert len(images) == 2 and all(im.cmap.N == 2 for im in images)
    bar = fig.axes[-1]
    assert [t.get_text() for t in bar.get_yticklabels()] == ["no spike (0)", "spike (1)"]
    rates = _grid_figure(spikes * 0.5, "rates", 1.0, "rate")
    assert all(im.cmap.N == 256 for ax in rates.axes for im in ax.images)


def test_options_of_the_other_plot_are_refused(tmp_path, capsys):
    """Issue 39.4: plot neuron has no run, samples or checkpoint; plot encoder no --steps."""
    assert main(["plot", "neuron", "--out", str(tmp_path / "o"), "--samples", "2", "--checkpoint", "last"]) == 2
    assert "--samples, --checkpoint: no effect on plot neuron (options of plot encoder RUN)" in capsys.readouterr().err
    assert main(["plot", "encoder", str(tmp_path), "--out", str(tmp_path / "o"), "--steps", "50"]) == 2
    assert "--steps: no effect on plot encoder" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
