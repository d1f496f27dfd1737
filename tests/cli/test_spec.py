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


@pytest.mark.parametrize("T", ["0", "-3", "99999999999999999999"])
def test_spec_refuses_T_out_of_range(T, capsys):
    with pytest.raises(SystemExit) as e:  # refused while parsing the command line
        main(["spec", "FC10", "--input", "10", "--T", T])
    assert e.value.code == 2
    assert f"argument --T: must be between 1 and 2147483647, got {T}" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["FC99999999999999999999"], "out=99999999999999999999 in 'FC99999999999999999999' is more than 2147483647"),
    (["c99999999999999999999k3s1-FC10"], "out=99999999999999999999 in 'c99999999999999999999k3s1' is more than"),
    (["FC2147483647"], "FC2147483647: its weight count would be 1,683,627,179,248, more than 1,099,511,627,776"),
    (["c8k3s1p2147483647-FC10"], "its output per sample would be"),
    (["FC10", "--input", "1,99999999999999999999,28"], "--input must be C,H,W or N with each between 1 and 2147483647"),
    (["FC10", "--input", "１,28,28"], "--input must be comma-separated integers like 1,28,28, got '１,28,28'"),
    (["FC10-PLIF", "--tau0", "nan"], "PLIF tau0 must be greater than 1 and at most 1e+30 time-steps"),
    (["FC10-PLIF", "--tau0", "inf", "--neuron", "LIF"], "LIF tau must be greater than 1 and at most 1e+30 time-steps"),
])
def test_integers_too_large_for_torch_and_non_finite_tau_are_one_line(argv, message, capsys):
    assert main(["spec", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "frame #0" not in err


@pytest.mark.parametrize("name", ["", " ", "\t"])
def test_zoo_refuses_an_empty_name_instead_of_listing_everything(name, capsys):
    """Issue 53.10: ``plif zoo ''`` listed every network with exit status 0."""
    with pytest.raises(SystemExit) as e:  # refused while parsing the command line
        main(["zoo", name])
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and [ln for ln in captured.err.splitlines() if "error:" in ln] == [
        f"plif zoo: error: argument name: {name!r}: give a dataset or residual network name, or leave it out to "
        "list them all"]
