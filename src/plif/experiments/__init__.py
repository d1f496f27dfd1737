"""The paper's experiments: the ablation sweep, the reproduction report and the figures.

Everything here reads run folders (``config.json``, ``metrics.jsonl``, ``summary.json``) and the
project's own neurons and networks; nothing reaches into training internals.  Heavy imports
(matplotlib, the training stack) happen inside the functions that need them.
"""
from .ablation import ABLATIONS, run_sweep
from .encoder_maps import layer_spikes, plot_encoder_figures
from .neuron_curves import plot_neuron_figures
from .paper_numbers import ABLATION_RESULTS, MAIN_RESULTS, PAPER_SETTING, Setting, paper_accuracy
from .report import write_report
from .runs import RunRecord, read_run

__all__ = ["ABLATIONS", "run_sweep", "write_report", "plot_neuron_figures", "plot_encoder_figures",
           "layer_spikes", "read_run", "RunRecord", "Setting", "PAPER_SETTING", "MAIN_RESULTS",
           "ABLATION_RESULTS", "paper_accuracy"]
