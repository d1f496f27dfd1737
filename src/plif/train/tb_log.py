"""``--log tensorboard``: each epoch's numbers as TensorBoard scalars (metrics.jsonl stays the record).

Written through ``torch.utils.tensorboard`` (the optional ``tensorboard`` package) into
``<run>/tensorboard``: losses, accuracies, learning rate, tau of every PLIF layer and the firing
rate of every spiking layer, measured on the epoch's test pass.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

__all__ = ["TensorBoardLog", "firing_rates", "summary_writer_class"]


@contextmanager
def firing_rates(model):
    """Count spikes of every spiking layer of ``model`` while the block runs.

    Yields a dict that, after the block, maps ``"<index>_<token>"`` to the mean firing rate.  Counts
    stay on the device until the block ends (no host sync per batch).
    """
    from ..neurons import SpikingNeuron

    sums: dict[str, list] = {}
    handles = []
    result: dict[str, float] = {}
    for i, (layer, info) in enumerate(zip(model.layers, model.info)):
        if isinstance(layer, SpikingNeuron):
            key = f"{i}_{info.token}"
            sums[key] = [None, 0]

            def hook(_m, _inp, out, key=key):
                s = out.detach().float().sum()
                acc = sums[key]
                acc[0] = s if acc[0] is None else acc[0] + s
                acc[1] += out.numel()

            handles.append(layer.register_forward_hook(hook))
    try:
        yield result
    finally:
        for h in handles:
            h.remove()
        for key, (s, n) in sums.items():
            result[key] = float(s) / n if n else float("nan")


def summary_writer_class():
    """``torch.utils.tensorboard.SummaryWriter``, or a one-line error saying what to install."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("--log tensorboard needs the tensorboard package: pip install 'plif[tensorboard]'") from None
    return SummaryWriter


class TensorBoardLog:
    """One event file per run folder; :meth:`epoch` writes one row of metrics.jsonl plus rates."""

    def __init__(self, logdir: Path):
        self.logdir = logdir
        with self._named():
            self.writer = summary_writer_class()(log_dir=str(logdir))

    def _named(self):
        """OS errors (a full disk) name the TensorBoard folder, as every other writer's do."""
        from contextlib import contextmanager

        from ..atomic import named_os_error

        @contextmanager
        def named():
            try:
                yield
            except OSError as e:
                raise named_os_error(e, self.logdir) from None
        return named()

    def epoch(self, row: dict, rates: dict[str, float] | None = None) -> None:
        step = row["epoch"]
        scalars = {"loss/train": row.get("train_loss"), "loss/test": row.get("test_loss"),
                   "accuracy/train": row.get("train_acc"), "accuracy/test": row.get("test_acc"),
                   "accuracy/val": row.get("val_acc"), "lr": row.get("lr")}
        for i, tau in enumerate(row.get("taus") or []):
            scalars[f"tau/plif_{i}"] = tau
        for key, rate in (rates or {}).items():
            scalars[f"firing_rate/{key}"] = rate
        for tag, value in scalars.items():
            if value is not None:
                self.writer.add_scalar(tag, value, step)
        with self._named():
            self.writer.flush()

    def close(self) -> None:
        with self._named():
            self.writer.close()
