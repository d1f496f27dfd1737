"""``--log tensorboard``: each epoch's numbers as TensorBoard scalars (metrics.jsonl stays the record).

Written through ``torch.utils.tensorboard`` (the optional ``tensorboard`` package) into
``<run>/tensorboard``: losses (train, test, val), accuracies, learning rate, epoch time, samples/s,
tau of every PLIF layer and the firing rate of every spiking layer, measured on the epoch's test
pass.  A layer has one name everywhere, its qualified module name (``layers.2`` in a network of the
paper's notation, ``block.0.neuron`` in a module: :mod:`plif.models.names`): ``tau/layers.2``,
``firing_rate/layers.2`` and the ``firing_rates`` of metrics.jsonl (runs before named a notation
network's layers ``2_PLIF``; :func:`plif.models.names.stored_names` reads those as ``layers.2``).
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from ..models.names import layer_taus, tau_names

__all__ = ["TensorBoardLog", "firing_rates", "tau_names", "layer_taus", "summary_writer_class"]


@contextmanager
def firing_rates(model, all_reduce=None):
    """Count spikes of every spiking layer of ``model`` while the block runs (a
    :class:`plif.monitor.FiringRateMonitor`, on the epoch's test pass only: hooks make the fused
    block run composed).

    Yields a dict that, after the block, maps each neuron's qualified name to its mean firing rate.  Counts
    stay on the device until the block ends (no host sync per batch).  all_reduce: sums a tensor
    over the processes (torchrun), so the rates are those of every process's share together.
    """
    from ..models.names import neurons
    from ..monitor import FiringRateMonitor

    result: dict[str, float] = {}
    if not neurons(model):  # a --model network without plif neurons: no rates (the monitor refuses it)
        yield result
        return
    with FiringRateMonitor(model, all_reduce=all_reduce) as monitor:
        yield result
    # only after a block that ended well: under torchrun every process joins this reduction
    result.update(monitor.rates())


def summary_writer_class():
    """``torch.utils.tensorboard.SummaryWriter``, or a one-line error saying what to install."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("--log tensorboard needs the tensorboard package: pip install 'plif[tensorboard]'") from None
    return SummaryWriter


class TensorBoardLog:
    """One event file per run folder; :meth:`epoch` writes one row of metrics.jsonl."""

    def __init__(self, logdir: Path, model):
        self.logdir = logdir
        self.tau_names = tau_names(model)
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

    def epoch(self, row: dict) -> None:
        step = row["epoch"]
        scalars = {"loss/train": row.get("train_loss"), "loss/test": row.get("test_loss"),
                   "loss/val": row.get("val_loss"), "accuracy/train": row.get("train_acc"),
                   "accuracy/test": row.get("test_acc"), "accuracy/val": row.get("val_acc"), "lr": row.get("lr"),
                   "time/epoch_s": row.get("epoch_time_s"), "time/train_s": row.get("train_time_s"),
                   "speed/samples_per_s": row.get("samples_per_s")}
        for name, tau in zip(self.tau_names, row.get("taus") or []):
            scalars[f"tau/{name}"] = tau
        for name, rate in (row.get("firing_rates") or {}).items():
            scalars[f"firing_rate/{name}"] = rate
        for tag, value in scalars.items():
            if value is not None:
                self.writer.add_scalar(tag, value, step)
        with self._named():
            self.writer.flush()

    def close(self) -> None:
        with self._named():
            self.writer.close()
