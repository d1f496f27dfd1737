"""The README and docs/usage.md run as written: every Python block they show, their two commands,
and every link between the documents."""
import re
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def python_blocks(path: Path) -> list[str]:
    """The ```python blocks of a Markdown file, in order (what a reader copies)."""
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def run_blocks(path: Path) -> dict:
    """Execute every Python block of ``path`` in order, in one namespace, as a reader pasting them would."""
    namespace: dict = {}
    for i, block in enumerate(python_blocks(path)):
        exec(compile(block, f"{path.name} (python block {i + 1})", "exec"), namespace)
    return namespace


def test_readme_example_trains_a_network(capsys):
    assert len(python_blocks(README)) == 1, "the README shows one example; more belong in docs/usage.md"
    ns = run_blocks(README)
    assert ns["spikes"].shape == (8, 4, 16) and set(ns["spikes"].unique().tolist()) <= {0.0, 1.0}
    assert torch.isfinite(ns["loss"]) and ns["step"] == 9
    assert len(ns["net"].taus()) == 2 and ns["net"].taus() != [2.0, 2.0]  # tau was learnt
    assert capsys.readouterr().out.startswith("loss ")


def test_usage_examples_run():
    from plif.surrogate import CUSTOM_SURROGATES, get_surrogate, unregister_surrogate

    before = set(CUSTOM_SURROGATES)
    try:
        ns = run_blocks(REPO / "docs" / "usage.md")
        registered = set(CUSTOM_SURROGATES) - before
        assert get_surrogate("atan4").code is not None  # its closed form runs in the kernels
    finally:
        for name in set(CUSTOM_SURROGATES) - before:  # the page registers two: leave the registry as found
            unregister_surrogate(name)
    assert registered == {"superspike", "atan4"}
    assert ns["out"].shape == (8, 16, 10)
    assert ns["spikes"].shape == (8, 4, 128, 28, 28)
    assert ns["out_t"].shape == (3, 11)


def test_readme_commands_exist_and_ci_runs_the_test_one():
    text = README.read_text()
    for command in ("bash scripts/train.sh", "bash scripts/test.sh", "pip install ."):
        assert command in text, command
    assert (REPO / "scripts" / "train.sh").is_file() and (REPO / "scripts" / "test.sh").is_file()
    assert "exec bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()


def test_readme_fits_a_newcomers_first_minutes():
    """Issue 40: the README is the first five minutes; details belong in docs/."""
    assert len(README.read_text()) < 10_500, "move details into docs/ (usage.md, guarantees.md, speed.md)"


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


DOCS = [README, REPO / "REPRODUCTION.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs" / "lab").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(REPO)) for d in DOCS])
def test_relative_links_and_anchors_resolve(doc):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", dest.read_text(), flags=re.S), re.M)
            if anchor not in {slug(h) for h in headings}:
                broken.append(target)
    assert broken == [], f"{doc.name}: links to nothing: {broken}"


def test_speed_guide_reads_in_one_sitting_and_the_lab_index_lists_every_investigation():
    """Issue 48: docs/speed.md is a guide; the dated investigations live in docs/lab/, each in the index."""
    assert len((REPO / "docs" / "speed.md").read_text()) < 10_000, "move the investigation into docs/lab/"
    lab = REPO / "docs" / "lab"
    index = (lab / "README.md").read_text()
    unlisted = [p.name for p in sorted(lab.glob("*.md")) if p.name != "README.md" and f"]({p.name})" not in index]
    assert unlisted == [], f"docs/lab/README.md does not list {unlisted}"
