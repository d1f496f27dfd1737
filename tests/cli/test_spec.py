import pytest

from plif.cli import spec as spec_cli
from plif.cli.main import main


def test_spec_allocates_no_weights(monkeypatch, capsys):
    """`plif spec` of a 785M-parameter network prints its table from meta tensors (no 3 GB of weights)."""
    seen = []
    real = spec_cli.__dict__.get("layer_table")
    from plif.models import summary

    def spy(net):
        seen.append(net)
        return summary.layer_table(net)

    monkeypatch.setattr("plif.models.layer_table", spy)
    assert main(["spec", "c100000k3s1-PLIF-FC10"]) == 0
    assert real is None and seen and all(p.is_meta for p in seen[0].parameters())
    out = capsys.readouterr().out
    assert "784,900,001" in out and "78,400,000" in out


@pytest.mark.parametrize("T", ["0", "-3"])
def test_spec_refuses_non_positive_T(T, capsys):
    assert main(["spec", "FC10", "--input", "10", "--T", T]) == 2
    assert f"T must be >= 1, got {T}" in capsys.readouterr().err
