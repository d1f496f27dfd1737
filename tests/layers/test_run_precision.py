"""The precision a finished run is evaluated in (``plif eval``, ``plif stats``): the run's bf16 where the
device has it natively, else fp32 with the reason in one line (issue 53: stats ran a bf16 run in fp32, unsaid)."""
import pytest
import torch

from plif.layers import precision
from plif.layers.precision import precision_autocast, run_precision


def test_an_fp32_run_is_evaluated_in_fp32():
    assert run_precision(None, "cpu") == (None, "precision: fp32, as the run trained")


@pytest.mark.parametrize("native", [True, False])
def test_a_bf16_run_keeps_bf16_only_where_the_cpu_has_it_natively(native, monkeypatch):
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    amp, line = run_precision("bf16", "cpu")
    assert amp == ("bf16" if native else None)
    assert line.startswith("precision: bf16 autocast, as the run trained" if native else
                           "precision: fp32, not the run's bf16: this CPU has no native bf16")
    assert "\n" not in line


def test_a_device_without_validated_autocast_says_so():
    assert run_precision("bf16", "mps") == (
        None, "precision: fp32, not the run's bf16: bf16 autocast is validated on CUDA and the CPU only, not on mps "
              "(accuracy may differ from the run's by bf16 rounding)")


def test_an_unknown_recorded_amp_is_refused_in_one_line():
    with pytest.raises(ValueError, match="amp 'fp16': a run records 'bf16' or null"):
        run_precision("fp16", "cpu")


def test_the_context_autocasts_only_for_bf16():
    with precision_autocast("bf16", "cpu"):
        assert torch.is_autocast_enabled("cpu")
        assert torch.nn.functional.linear(torch.ones(1, 2), torch.ones(3, 2)).dtype == torch.bfloat16
    with precision_autocast(None, "cpu"):
        assert not torch.is_autocast_enabled("cpu")
