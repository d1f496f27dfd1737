"""Firing-rate maps of a trained network's spiking layers (the supplement's encoder figures).

The first spiking layer turns the learnable encoder's (conv + BN) output into spikes; its spikes
``[T, B, C, H, W]`` and their rate over time ``[B, C, H, W]`` are what the figures show.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

__all__ = ["layer_spikes", "parse_channels", "load_test_inputs", "event_file_input", "plot_encoder_figures"]


def layer_spikes(net, x: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """Spikes ``[T, B, ...]`` of spiking layer number ``layer`` (0 = the encoder's: the first plif neuron of
    the network, :func:`plif.models.names.neurons`) for input ``x``, of any network.

    x: what the network takes: ``[B, *input_shape]`` (static, repeated over T) for a network of the
    paper's notation, or ``[T, B, *input_shape]`` (event frames, or an image repeated over T).
    """
    from ..models.names import neurons as named_neurons

    neurons = list(named_neurons(net).values())
    if not 0 <= layer < len(neurons):
        raise ValueError(f"spiking layer {layer} does not exist; valid: 0..{len(neurons) - 1} "
                         f"({len(neurons)} spiking layers)")
    captured = {}

    def hook(_module, _inputs, output):
        captured["s"] = output[0] if isinstance(output, tuple) else output

    handle = neurons[layer].register_forward_hook(hook)
    try:
        net.eval()
        with torch.no_grad():
            net(x)
    finally:
        handle.remove()
    return captured["s"]


def parse_channels(text: str | None, num_channels: int, default: int = 4) -> list[int]:
    """``"0,3,7"`` -> ``[0, 3, 7]``; ``None`` -> the first ``default``; out-of-range names the valid range."""
    if text is None:
        return list(range(min(default, num_channels)))
    out = []
    for tok in str(text).split(","):
        tok = tok.strip()
        try:
            c = int(tok)
        except ValueError:
            raise ValueError(f"--channels: {tok!r} is not a channel number; valid: 0..{num_channels - 1}") from None
        if not 0 <= c < num_channels:
            raise ValueError(f"--channels: channel {c} does not exist; valid: 0..{num_channels - 1}")
        out.append(c)
    if not out:
        raise ValueError(f"--channels: no channel given; valid: 0..{num_channels - 1}")
    return out


def load_test_inputs(config: dict, n: int, data_dir: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` test samples of a run's dataset as network input, with their labels.

    Static: normalised images ``[n, C, H, W]``; events: frames ``[T, n, 2, H, W]``.
    """
    from ..runs import run_test_split

    split, prepare = run_test_split(config, data_dir, limit=n)
    return prepare(split.x, None), split.y


def event_file_input(path: str | Path, config: dict) -> torch.Tensor:
    """One event file as the run's input: frames ``[T, 1, 2, H, W]`` at the run's T and sensor size."""
    from ..data.events import read_events
    from ..data.frames import events_to_frames

    shape = tuple(config["input_shape"])
    if len(shape) != 3 or shape[0] != 2:
        raise ValueError(f"{path}: this run takes input {list(shape)}, not event frames [2, H, W]; "
                         "pass an event file only with a run trained on an event dataset")
    events = read_events(path)
    try:
        frames = events_to_frames(events, int(config["T"]), (shape[1], shape[2]))
    except ValueError as e:
        raise ValueError(f"{path}: {e} (the run's input is {list(shape)})") from None
    return torch.from_numpy(frames).unsqueeze(1)


def _tile(maps: np.ndarray) -> tuple[int, int]:
    n = maps.shape[0]
    cols = math.ceil(math.sqrt(n))
    return math.ceil(n / cols), cols


def _grid_figure(maps: np.ndarray, title: str, vmax: float, cbar_label: str, binary: bool = False):
    """All channels ``[C, H, W]`` tiled in one image grid; ``binary``: 0/1 maps in two flat colours."""
    from .figures import binary_colormap, new_figure

    rows, cols = _tile(maps)
    fig, axes = new_figure(1.2 * cols + 1.2, 1.2 * rows + 0.6, rows, cols)
    im = None
    for i, ax in enumerate(axes.flat):
        ax.set_xticks([])
        ax.set_yticks([])
        if i < maps.shape[0]:
            if binary:
                cmap, norm = binary_colormap()
                im = ax.imshow(maps[i], cmap=cmap, norm=norm, interpolation="nearest")
            else:
                im = ax.imshow(maps[i], cmap="viridis", vmin=0.0, vmax=vmax, interpolation="nearest")
            ax.set_title(f"ch {i}", fontsize=6, pad=1)
        else:
            ax.axis("off")
    fig.suptitle(title, fontsize=9)
    if binary:
        bar = fig.colorbar(im, ax=axes, shrink=0.3, ticks=[0, 1])
        bar.ax.set_yticklabels(["no spike (0)", "spike (1)"])
        for ax in axes.flat:  # white pixels on a white page: frame every map
            for side in ax.spines.values():
                side.set_edgecolor("0.5")
    else:
        bar = fig.colorbar(im, ax=axes, shrink=0.6)
    _label_bar(bar, cbar_label)
    return fig


def _label_bar(bar, label: str) -> None:
    # the colour bar's default 10 pt would dwarf the 6-7 pt panel titles
    bar.set_label(label, fontsize=7)
    bar.ax.tick_params(labelsize=6)


def _rates_figure(inputs: np.ndarray, rates: np.ndarray, channels: list[int], labels, title: str):
    """Rows = samples; column 0 the input (channel-mean), then the rate map of each chosen channel."""
    from .figures import new_figure

    n = rates.shape[0]
    fig, axes = new_figure(1.4 * (len(channels) + 1) + 1.0, 1.4 * n + 0.6, n, len(channels) + 1)
    im = None
    for r in range(n):
        axes[r, 0].imshow(inputs[r], cmap="gray", interpolation="nearest")
        axes[r, 0].set_ylabel(f"sample {r}\nlabel {labels[r]}", fontsize=7)
        if r == 0:
            axes[r, 0].set_title("input", fontsize=7)
        for j, c in enumerate(channels):
            im = axes[r, j + 1].imshow(rates[r, c], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
            if r == 0:
                axes[r, j + 1].set_title(f"channel {c}", fontsize=7)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=9)
    _label_bar(fig.colorbar(im, ax=axes, shrink=0.6), "firing rate (spikes per time-step)")
    return fig


def _spatial_check(spikes: torch.Tensor, layer: int) -> None:
    if spikes.dim() != 5:
        raise ValueError(f"spiking layer {layer} outputs {list(spikes.shape[2:])} per sample, not [C, H, W] "
                         "maps; choose a convolutional spiking layer")


def plot_encoder_figures(run_dir: str | Path, out: str | Path, channels: str | None = None, samples: int = 4,
                         layer: int = 0, event_file: str | Path | None = None, data_dir: str | None = None,
                         which: str = "best", output=None, trust_modules=()) -> list[Path]:
    """Firing-rate figures of spiking layer ``layer`` of a trained run; returns the figure files
    (each figure in every format of ``output``, a :class:`~plif.experiments.figures.FigureOutput`).

    Writes ``encoder_rates`` (chosen channels x the first ``samples`` test samples),
    ``encoder_spikes_t0`` (all channels of sample 0 at t = 0) and ``encoder_rate_grid`` (all
    channels of sample 0, rate over T); with ``event_file`` the same three as ``event_*`` for that
    file's frames.  Each figure has a JSON of its data beside it.  ``trust_modules``: as
    :func:`plif.runs.load_run`'s.
    """
    from ..models.run_network import network_label
    from ..runs import load_run, read_run_config
    from .figures import FigureOutput, save_figure, save_json

    config = read_run_config(run_dir, trust_modules=trust_modules)
    if samples < 0:
        raise ValueError(f"--samples must be 0 or more, got {samples}")
    if samples == 0 and event_file is None:
        raise ValueError("nothing to plot: --samples 0 and no --event file")
    net, config = load_run(run_dir, which, config=config)
    out, output = Path(out), output or FigureOutput()
    written = []
    sources = []
    if samples:
        x, y = load_test_inputs(config, samples, data_dir)
        sources.append(("encoder", x, [int(v) for v in y]))
    if event_file is not None:
        sources.append(("event", event_file_input(event_file, config), ["?"]))
    for prefix, x, labels in sources:
        spikes = layer_spikes(net, x, layer)  # [T, B, C, H, W]
        _spatial_check(spikes, layer)
        rates = spikes.float().mean(0).numpy()  # [B, C, H, W]
        chans = parse_channels(channels, rates.shape[1])
        shown = (x.float().mean(0) if x.dim() == len(config["input_shape"]) + 2 else x.float()).mean(1).numpy()
        meta = {"run": str(run_dir), "layer": layer, "T": int(spikes.shape[0]), "labels": labels,
                "network": network_label(config), "source": str(event_file) if prefix == "event" else "test set"}
        where = f"spiking layer {layer} ({config['dataset']}, $T$ = {spikes.shape[0]})"
        p = out / f"{prefix}_rates.png"
        written += save_figure(_rates_figure(shown, rates, chans, labels, f"Firing rates of {where}"), p, output)
        save_json(p.with_suffix(".json"), {**meta, "channels": chans,
                                           "rates": {str(c): rates[:, c].round(6).tolist() for c in chans}})
        p = out / f"{prefix}_rate_grid.png"
        written += save_figure(_grid_figure(rates[0], f"Firing rate of every channel, sample 0\n{where}", 1.0,
                                            "firing rate (spikes per time-step)"), p, output)
        save_json(p.with_suffix(".json"), {**meta, "sample": 0, "rates": rates[0].round(6).tolist()})
        s0 = spikes[0, 0].numpy()
        p = out / f"{prefix}_spikes_t0.png"
        written += save_figure(_grid_figure(s0, f"Spikes of every channel at $t$ = 0, sample 0\n{where}", 1.0,
                                            "output at $t$ = 0", binary=True), p, output)
        save_json(p.with_suffix(".json"), {**meta, "sample": 0, "t": 0, "spikes": s0.astype(int).tolist()})
    return written
