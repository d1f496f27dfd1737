"""The backend table: fused backends load lazily, and a failure is reported, never swallowed."""
import importlib
import subprocess
import sys

import pytest
import torch

from plif import kernel_table
from plif.neurons import BACKENDS, PLIF, NeuronConfig, backend_status, multi_step
from plif.neurons import dispatch


@pytest.fixture
def empty_table():
    """The backend table from scratch (``kernel_table.reset``), and again afterwards so the next test
    loads the real backends."""
    kernel_table.reset()
    yield dispatch
    kernel_table.reset()


@pytest.fixture
def fresh_table(empty_table, monkeypatch):
    """Reload the table from scratch with ``plif.kernels.cpu_neuron`` failing to import."""
    real = importlib.import_module

    def broken(name, *a, **kw):
        if name == "plif.kernels.cpu_neuron":
            raise ImportError("simulated bug in cpu_neuron.py")
        return real(name, *a, **kw)

    monkeypatch.setattr(kernel_table.importlib, "import_module", broken)
    return dispatch


def test_broken_backend_keeps_its_reason(fresh_table):
    status = fresh_table.backend_status()
    assert status["cpu"].startswith("unavailable: ImportError: simulated bug in cpu_neuron.py")
    assert status["bptt"] == "ok" and "cpu" not in fresh_table.available_backends()


def test_auto_warns_once_when_falling_back(fresh_table):
    x = torch.randn(3, 2, 4)
    with pytest.warns(RuntimeWarning, match=r"'cpu' neuron backend failed to load \(ImportError: simulated bug"):
        assert fresh_table.select_backend(x, NeuronConfig()) == "bptt"
    with warnings_as_errors():
        fresh_table.select_backend(x, NeuronConfig())  # once only
        assert PLIF()(x).shape == x.shape  # the layer still runs, on bptt


def test_asking_for_a_broken_backend_names_the_reason(fresh_table):
    with pytest.raises(RuntimeError, match="backend 'cpu': the kernel failed to load here: ImportError: simulated bug"):
        multi_step(torch.randn(3, 2, 4), 0.5, backend="cpu")


def test_unknown_backend_lists_the_valid_ones():
    with pytest.raises(ValueError, match="backend 'nope': unknown; available: auto, reference, bptt"):
        multi_step(torch.randn(3, 2, 4), 0.5, backend="nope")


def test_cpu_backend_loads_here():
    assert backend_status()["cpu"] == "ok"


def test_reset_forgets_extra_backends_and_failures(fresh_table):
    dispatch.register_backend("extra", dispatch.multi_step_bptt, supports=lambda x, cfg: True)
    assert "extra" in dispatch.BACKENDS and "cpu" in backend_status()
    kernel_table.reset()
    assert list(dispatch.BACKENDS) == ["reference", "bptt"]
    assert dispatch.BACKENDS is BACKENDS  # cleared in place: names imported elsewhere see it


def test_importing_neurons_does_not_import_kernels():
    code = "import sys, plif.neurons; print('plif.kernels' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


class warnings_as_errors:
    def __enter__(self):
        import warnings
        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def test_an_extra_backend_comes_after_the_fused_ones_even_before_they_load(empty_table):
    dispatch.register_backend("extra", dispatch.multi_step_bptt, supports=lambda x, cfg: True)
    assert dispatch.auto_order()[-1] == "extra"
    if "cpu" in dispatch.available_backends():
        assert dispatch.select_backend(torch.randn(3, 2, 4), NeuronConfig()) == "cpu"


@pytest.mark.parametrize("backend", ["bptt", "reference"])
def test_pytorch_backends_keep_fp32_state_for_bf16_inputs(backend):
    """As the fused kernels do (autocast, a custom surrogate, --backend bptt): bf16 in and out, fp32
    potential, so spikes equal the fp32 reference on the same rounded values (before, a bf16
    potential flipped spikes in most cases)."""
    from dataclasses import asdict

    from plif.kernels.check import Case, case_grid, run_case

    for case in case_grid(quick=True)[::3]:
        r = run_case(Case(**{**asdict(case), "dtype": "bfloat16"}), backend)
        assert r["ok"], r
    s, v = multi_step(torch.randn(3, 2, 4, dtype=torch.bfloat16), 0.5, backend=backend)
    assert s.dtype == v.dtype == torch.bfloat16


@pytest.mark.parametrize("backend", ["auto", "bptt"])
def test_bf16_inputs_use_the_fp32_time_constant(backend):
    """Under autocast PLIF's ``k = sigmoid(w)`` and the potential stay fp32 (before, ``k`` was rounded
    to bf16, up to 0.2% off, which flipped 2 of these 12,288 spikes): same spikes as fp32 on the same input."""
    from plif.neurons import multi_step_reference

    torch.manual_seed(0)
    layer = PLIF(backend=backend)
    with torch.no_grad():
        layer.w.fill_(0.3)  # sigmoid(0.3) = 0.5744..., not a bf16 value
    x = (torch.randn(6, 64, 32) * 1.5 + 0.6).bfloat16()
    assert layer.k(x).dtype == torch.float32
    s = layer(x)
    s_ref, _ = multi_step_reference(x.float(), torch.sigmoid(layer.w.detach()), torch.zeros(64, 32), layer.cfg)
    assert s.dtype == torch.bfloat16 and torch.equal(s.float(), s_ref)
