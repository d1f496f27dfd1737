import json

import pytest
import torch

from plif.runs import load_run


def test_loads_weights_in_eval_mode(run_dir):
    run, net = run_dir
    loaded, config = load_run(run)
    assert not loaded.training and config["T"] == 6
    for (k, a), b in zip(net.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), k
    x = torch.randn(4, 1, 16, 16)
    with torch.no_grad():
        assert torch.equal(loaded(x), net.eval()(x))


def test_explicit_checkpoint_path(run_dir, make_run, tmp_path):
    run, net = run_dir
    other = make_run(tmp_path / "other", seed=1)
    loaded, _ = load_run(run, which=str(tmp_path / "other" / "checkpoints" / "best_test.pt"))
    assert torch.equal(loaded.layers[0].layer.weight, other.layers[0].layer.weight)


def test_mismatched_checkpoint_is_refused(run_dir):
    run, _ = run_dir
    cfg = json.loads((run / "config.json").read_text())
    cfg["network"] = cfg["network"].replace("FC40", "FC48")
    (run / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="does not match the network"):
        load_run(run)
    with pytest.raises(ValueError, match="does not match the network"):
        load_run(run, which=str(run / "checkpoints" / "best_test.pt"))


def test_corrupted_and_missing_files(run_dir, tmp_path):
    run, _ = run_dir
    ckpt = run / "checkpoints" / "best_test.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:200])
    with pytest.raises(ValueError, match="best_test.pt: not a readable"):
        load_run(run)
    with pytest.raises(ValueError, match="best_test.pt: not a readable"):
        load_run(run, which=str(ckpt))
    with pytest.raises(FileNotFoundError, match="last.pt"):
        load_run(run, which="last")
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        load_run(tmp_path / "nothing")
    (run / "config.json").write_text('{"network": "FC10",\n "T": }')
    with pytest.raises(ValueError, match="line 2 column"):
        load_run(run)


def test_the_test_helper_writes_run_folders_through_plif_runs(tmp_path):
    """Issue 48: ``plif_testing.write_run_folder`` writes the format through the library's writers, so
    the tests read what training writes (indented strict JSON, non-finite values as null) byte for byte."""
    import math

    import torch

    from plif.runs import RunFolder, load_checkpoint
    from plif_testing import write_run_folder

    config, rows, summary = {"T": 4, "lr": 1e-3}, [{"epoch": 1, "test_acc": 0.5, "loss": math.nan}], {"finished": False}
    helper = write_run_folder(tmp_path / "helper", config, rows, summary, model={"w": torch.ones(2)}, epoch=1)
    library = RunFolder(tmp_path / "library")
    library.write_config(config)
    library.write_metrics(rows)
    library.write_summary(summary)
    for name in ("config.json", "metrics.jsonl", "summary.json"):
        assert (helper / name).read_bytes() == (library.path / name).read_bytes(), name
    state = load_checkpoint(RunFolder(helper).checkpoint("best_test"))
    assert state["epoch"] == 1 and state["config"] == config and torch.equal(state["model"]["w"], torch.ones(2))
