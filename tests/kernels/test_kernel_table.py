"""One table of every fused kernel (``plif.kernel_table``): one status for both kinds, and a kernel that
fails to import said once, with its reason, by ``plif doctor`` and by the Triton kernels' self-check."""
import json

import pytest
import torch

from plif import kernel_table
from plif.cli.main import main
from plif.kernels import self_check
from plif.neurons import backend_status

REASON = "ImportError: simulated: this Triton is broken"


@pytest.fixture
def fresh():
    """The table and the self-check's verdicts from scratch, and again afterwards."""
    kernel_table.reset()
    self_check.reset()
    yield
    kernel_table.reset()
    self_check.reset()


def test_the_status_lists_every_kernel_of_both_kinds(fresh):
    rows = kernel_table.status()
    assert [(r["kind"], r["name"]) for r in rows] == [("neuron", "triton"), ("neuron", "cpu"), ("block", "cpu"),
                                                       ("block", "triton")]
    assert {r["device"] for r in rows} == {"cpu", "cuda"} and all(r["module"].startswith("plif.kernels.") for r in rows)
    neuron = {r["name"]: r["state"] for r in rows if r["kind"] == "neuron"}
    assert {name: backend_status()[name] for name in neuron} == neuron  # the neuron dispatch reads the same state


def test_a_kernel_that_fails_to_import_is_said_once_by_doctor_and_the_self_check(fresh, monkeypatch, capsys):
    real = kernel_table.importlib.import_module

    def broken(name, *a, **kw):
        if name in ("plif.kernels.triton_block", "plif.kernels.triton_neuron"):
            raise ImportError("simulated: this Triton is broken")
        return real(name, *a, **kw)

    monkeypatch.setattr(kernel_table.importlib, "import_module", broken)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # Triton would run on CPU tensors: the self-check looks at it
    for _ in range(2):
        self_check.run_checks("cpu", [torch.float32, torch.bfloat16])
    said = [(r["kernel"], r["equal"], r["note"]) for r in self_check.record()["kernel_checks"]]
    assert said == [("triton block", None, f"did not load: {REASON}"), ("triton neuron", None, f"did not load: {REASON}")]

    assert main(["doctor", "--quick", "--budget", "0.001"]) == 0
    text = capsys.readouterr().out
    assert text.count(REASON) == 2, text  # one line per kernel, not one per device or per check
    assert f"  block  triton  for cuda  unavailable: {REASON}\n" in text
    assert f"  neuron triton  for cuda  unavailable: {REASON}\n" in text
    assert main(["doctor", "--quick", "--budget", "0.001", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert [k["state"] for k in r["kernels"] if k["name"] == "triton"] == [f"unavailable: {REASON}"] * 2
    assert [c["note"] for c in r["first_use_checks"]] == [f"did not load: {REASON}"] * 2
