"""A finished run evaluated again: accuracy A and B of its best checkpoints on its test split
(``plif eval RUN``), with the numerics the run trained with."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

__all__ = ["RunAccuracy", "evaluate_run"]

_ACCURACY_OF = {"best_test": "accuracy_A", "best_val": "accuracy_B"}  # checkpoint -> its summary.json entry


@dataclass(frozen=True)
class RunAccuracy:
    """One checkpoint's accuracy on the run's test split."""

    which: str  # "best_test" (accuracy A) or "best_val" (accuracy B)
    accuracy: float
    samples: int
    epoch: int | str  # the epoch summary.json names for it ("?" where it names none)
    precision: str = ""  # the line plif.layers.precision.run_precision says of the precision it ran in


def evaluate_run(run, data_dir=None, device="auto", trust_modules: Iterable[str] = (),
                 progress: bool = False) -> list[RunAccuracy]:
    """Accuracy A (``best_test.pt``) and B (``best_val.pt``, protocol B) of run folder ``run`` on its
    test split (:func:`plif.runs.run_test_split`: its ``--max-test-samples``, its data folder unless
    ``data_dir`` is given), with the run's ``tf32`` and its precision where this device has it
(:func:`plif.layers.precision.run_precision`: bf16 only where native, else fp32, each result's
``precision`` line saying which and why); eagerly, since one pass over the test
    split costs less than capturing a graph or compiling for it.  Each checkpoint the run has, in that
    order; a run without either (it finished no epoch) is refused naming the folder.

    trust_modules: what the run's config may make plif import (:func:`plif.runs.read_run_config`)."""
    from ..device import pick_device, set_tf32
    from ..progress import sample_bar
    from ..data.pipeline import eval_batches
    from ..runs import RunFolder, load_run, read_run_config, run_test_split
    from .config import TrainConfig, check_stored
    from ..layers.precision import precision_autocast, run_precision
    from .loop import evaluate

    folder = RunFolder(run)
    config = read_run_config(folder, check_stored, trust_modules=trust_modules)
    cfg = TrainConfig.from_dict(config)
    device = pick_device(device)
    set_tf32(cfg.tf32)
    amp, said = run_precision(cfg.amp, device.type)
    present = [w for w in _ACCURACY_OF if folder.checkpoint(w).is_file()]
    if not present:
        raise FileNotFoundError(f"{folder.path}: no best_test.pt or best_val.pt under checkpoints/ "
                                "(the run finished no epoch)")
    nets = [load_run(folder.path, which, config=config)[0] for which in present]  # a bad checkpoint: before the data
    split, prepare = run_test_split(config, data_dir, device=device, source=folder.config)
    summary, results = folder.read_summary(), []
    for which, net in zip(present, nets):
        with sample_bar(len(split), f"eval {which}", progress) as bar, precision_autocast(amp, device.type):
            _, acc, n = evaluate(net.to(device), eval_batches(split, prepare, cfg.eval_batch_size), cfg.num_classes,
                                 progress=bar)
        results.append(RunAccuracy(which, acc, n, summary.get(_ACCURACY_OF[which], {}).get("epoch", "?"), said))
    return results
