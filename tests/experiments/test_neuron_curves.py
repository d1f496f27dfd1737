import json
import math

import pytest
import torch

from plif.experiments.neuron_curves import (SPIKE_TIMES_MS, VARIANTS, constant_input_closed_form,
                                            constant_input_continuous, constant_input_curves, lif_potential,
                                            plot_neuron_figures, spike_input_closed_form, spike_input_curves)

from .helpers import assert_real_png


def test_constant_input_matches_the_discrete_closed_form_exactly():
    curves = constant_input_curves(steps=300, I=1.0)
    for v in VARIANTS:
        ref = constant_input_closed_form(v.w, 1.0, v.tau, 300)
        torch.testing.assert_close(curves[v.name], ref, rtol=0, atol=1e-12)


def test_constant_input_approximates_the_ode_solution():
    curves = constant_input_curves(steps=300, I=1.0)
    for v in VARIANTS:
        cont = constant_input_continuous(v.w, 1.0, v.tau, curves["t_ms"])
        # Euler with dt = 1 ms: the gap is O(1/tau) of the steady state wI
        assert (curves[v.name] - cont).abs().max() < 0.6 * v.w / v.tau
        assert curves[v.name][-1] == pytest.approx(v.w, rel=1e-3)  # V(+inf) = wI
    # w scales V (stretch in V); tau changes the time to rise, not the steady state
    torch.testing.assert_close(curves["w+"], 1.5 * curves["base"])
    t_half = {n: int(torch.nonzero(curves[n] >= 0.5 * curves[n][-1])[0]) for n in ("base", "tau+", "tau-")}
    assert t_half["tau-"] < t_half["base"] < t_half["tau+"]
    assert t_half["base"] == math.ceil(math.log(0.5) / math.log(1 - 1 / 20))


def test_spike_input_matches_closed_forms():
    curves = spike_input_curves(steps=200)
    for v in VARIANTS:
        ref = spike_input_closed_form(v.w, v.tau, SPIKE_TIMES_MS, 200)
        torch.testing.assert_close(curves[v.name], ref, rtol=0, atol=1e-12)
        assert float(curves[v.name][4]) == 0.0 and float(curves[v.name][5]) == pytest.approx(v.w / v.tau)
        # between spikes the decay is the continuous exponential within O(1/tau^2) per step
        t = torch.arange(5, 80, dtype=torch.float64)
        cont = (v.w / v.tau) * torch.exp(-(t - 5) / v.tau)
        assert (curves[v.name][5:80] - cont).abs().max() < 0.5 * v.w / v.tau ** 2 * 10


def test_the_neuron_really_is_the_projects_lif():
    # a finite threshold makes the same helper refuse, rather than draw a reset curve
    from plif.neurons import LIF

    x = torch.full((50,), 3.0)
    v = lif_potential(x, 2.0)
    h = torch.zeros((), dtype=torch.float64)
    for n in range(50):
        h = h + (3.0 - h) / 2.0
        assert float(v[n + 1]) == pytest.approx(float(h))
    assert LIF(tau=2.0).step(torch.tensor([3.0]))[0].item() == 1.0  # the same input fires a normal LIF


def test_spike_beyond_the_simulation_is_an_error():
    with pytest.raises(ValueError, match="beyond"):
        spike_input_curves(steps=50)


def test_plot_neuron_writes_pngs_and_data(tmp_path):
    paths = plot_neuron_figures(tmp_path, steps=120)
    assert [p.name for p in paths] == ["fig1b_constant_input.png", "fig2_input_spikes.png"]
    for p in paths:
        assert_real_png(p)
        data = json.loads(p.with_suffix(".json").read_text())
        assert data["dt_ms"] == 1.0 and len(data["t_ms"]) == 121
        lines = p.with_suffix(".csv").read_text().splitlines()
        assert lines[0] == "t_ms,base,w+,w-,tau+,tau-" and len(lines) == 122
    data = json.loads(paths[0].with_suffix(".json").read_text())
    ref = constant_input_closed_form(1.0, 1.0, 20.0, 120).tolist()
    assert data["V"]["base"] == pytest.approx(ref)


def test_neuron_figures_in_every_format_with_greek_tau(tmp_path, capsys):
    from plif.cli.main import main

    assert main(["plot", "neuron", "--out", str(tmp_path), "--steps", "100", "--format", "png,pdf,svg",
                 "--dpi", "100"]) == 0
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".png", ".pdf", ".svg"))
    assert names == [f"{f}.{e}" for f in ("fig1b_constant_input", "fig2_input_spikes") for e in ("pdf", "png", "svg")]
    from matplotlib.image import imread

    assert imread(tmp_path / "fig2_input_spikes.png").shape[:2] == (400, 640)  # 6.4 x 4 in at 100 dpi
    svg = (tmp_path / "fig1b_constant_input.svg").read_text()
    assert "tau=" not in svg and "tau+" not in svg  # the variants and τ are typeset, not spelled out
    assert main(["plot", "neuron", "--out", str(tmp_path / "bad"), "--format", "png,gif"]) == 2
    assert "--format: unknown figure format 'gif'" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
