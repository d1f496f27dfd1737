"""docs/tutorial.md runs as written: its Python blocks in one session and its `plif` commands, in
order, in an empty folder (the shell's `plif train` is the Python run's config but for its folder,
and is run too: issue 45 found it refused, the Python block having written its folder).  Fashion-MNIST is found as the page says: Debian's folder where installed, else a small
synthetic set in its format under $PLIF_DATA_ROOT (no download)."""
import dataclasses
import re
import shlex
from pathlib import Path

import pytest
from plif_testing import make_images, write_idx

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "tutorial.md"


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced block, in order."""
    return re.findall(r"```(\w+)\n(.*?)```", text, re.S)


def commands(code: str) -> list[list[str]]:
    """The ``plif ...`` command lines of a shell block, as argv lists without ``plif``."""
    lines = [line.split("#")[0].strip() for line in code.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("plif ")]


def fake_fashion_mnist(root: Path) -> None:
    """Fashion-MNIST's four files under ``root/fashion-mnist``: learnable synthetic images."""
    from plif.data import get_dataset

    files = get_dataset("fashion-mnist").files
    (root / "fashion-mnist").mkdir(parents=True)
    for split, n, seed in (("train", 1200, 1), ("test", 600, 2)):
        x, y = make_images(n, seed)
        write_idx(root / "fashion-mnist" / files[f"{split}_images"], x)
        write_idx(root / "fashion-mnist" / files[f"{split}_labels"], y)


@pytest.mark.slow
def test_the_tutorial_runs_as_written(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    pytest.importorskip("nir")
    from plif.cli.config_flags import given_settings
    from plif.cli.main import build_parser, main
    from plif.data.static import FASHION_SYSTEM_DIR
    from plif.runs import read_metrics
    from plif.train import TrainConfig

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLIF_DATA_ROOT", str(tmp_path / "data"))
    if not (FASHION_SYSTEM_DIR / "train-images-idx3-ubyte.gz").is_file():
        fake_fashion_mnist(tmp_path / "data")
    ns: dict = {}
    ran = []
    for i, (language, code) in enumerate(blocks(PAGE.read_text())):
        if language == "python":
            exec(compile(code, f"tutorial.md (block {i + 1})", "exec"), ns)
        for argv in commands(code) if language == "bash" else []:
            if argv[0] == "train":  # the Python block's run, into a folder of its own
                shell = TrainConfig(**given_settings(build_parser("train").parse_args(argv)))
                assert shell.out != ns["cfg"].out and dataclasses.replace(shell, out=ns["cfg"].out) == ns["cfg"]
            assert main(argv) == 0, argv
            ran.append(argv[0])
    assert ran == ["train", "report", "plot", "export"]

    run = tmp_path / "runs" / "tutorial"
    assert ns["run"].resolve() == run and (run / "checkpoints" / "best_test.pt").is_file()
    assert ns["last"]["epoch"] == 1 and ns["last"]["test_acc"] > 0.2  # it learnt (10 classes: 0.1 is chance)
    assert ns["trained"].taus() != [2.0, 2.0]
    assert (tmp_path / "reports" / "tutorial" / "report.md").is_file()
    assert len(list((tmp_path / "reports").rglob("*.png"))) >= 3
    assert (tmp_path / "tutorial.nir").is_file()
    shell_run = tmp_path / "runs" / "tutorial-shell"
    assert (shell_run / "checkpoints" / "best_test.pt").is_file()
    assert read_metrics(shell_run)[-1]["test_acc"] == ns["last"]["test_acc"]  # the same run: same seed, same data
    assert "norse" in capsys.readouterr().out.lower()  # --check names the importer the file is for
