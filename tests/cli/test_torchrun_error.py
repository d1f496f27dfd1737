"""Under torchrun a refusal's one line goes to the worker's error file, and torchrun's own parsing
of that file (the agent's ChildFailedError) shows it as the root cause instead of a link."""
import json

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from plif.cli.main import main


def _root_cause(path) -> str:
    """What torchrun's agent prints for a worker that exited 2 and left ``path``."""
    return ChildFailedError("plif", {0: ProcessFailure(local_rank=0, pid=1, exitcode=2, error_file=str(path))}).format_msg()


def test_a_refusal_is_torchruns_root_cause(tmp_path, monkeypatch, capsys):
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    assert main(["train", "--lr", "0", "--out", str(tmp_path / "run")]) == 2
    line = "plif train: error: --lr must be positive, got 0"
    assert capsys.readouterr().err.strip() == line
    assert "  traceback : " + line in _root_cause(path)
    assert "To enable traceback" not in _root_cause(path)


@pytest.mark.parametrize("argv, line", [
    (["train", "--no-such-flag"], "plif: error: unrecognized arguments: --no-such-flag"),
    (["train", "--lr", "abc"], "plif train: error: argument --lr: "),
])
def test_a_usage_error_is_torchruns_root_cause(tmp_path, monkeypatch, capsys, argv, line):
    """argparse's line, the one printed above its usage, from the top parser or a subcommand's."""
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and line in capsys.readouterr().err
    assert "traceback : " + line in _root_cause(path)
    assert json.loads(path.read_text())["message"]["message"].startswith(line)


def test_outside_torchrun_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--lr", "0", "--out", str(tmp_path / "run")]) == 2
    assert list(tmp_path.iterdir()) == []


def test_the_refusal_is_one_write(tmp_path, monkeypatch):
    """Under torchrun every worker prints its refusal to the same stderr; unbuffered
    (PYTHONUNBUFFERED=1), print's two writes (the line, then its newline) of two workers interleaved
    into one garbled line."""
    import io

    writes = []

    class Recording(io.StringIO):
        def write(self, text):
            writes.append(text)
            return len(text)

    monkeypatch.setattr("sys.stderr", Recording())
    assert main(["train", "--lr", "0", "--out", str(tmp_path / "run")]) == 2
    assert writes == ["plif train: error: --lr must be positive, got 0\n"]
