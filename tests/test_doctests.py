"""The ``>>>`` examples of the public entry points run as written (issue 40.3): every example of
these modules, CPU-only, writing only under the test's temporary folder; and each entry point the
API reference leads with has one."""
import doctest
import importlib
import tempfile

import pytest
import torch

# each encoder's module (issue 56.3) -> the class whose docstring shows it
ENCODERS = {"plif.encoding.latency": "LatencyEncoder", "plif.encoding.phase": "WeightedPhaseEncoder",
            "plif.encoding.periodic": "PeriodicEncoder", "plif.encoding.delta": "DeltaEncoder",
            "plif.encoding.population": "PopulationEncoder"}
MODULES = ["plif.neurons.modules", "plif.neurons.dispatch", "plif.models.network", "plif.models.fusion", "plif.models.zoo",
           "plif.data.idx", "plif.data.events.nmnist", "plif.data.events.aedat2", "plif.data.events.aedat3",
           "plif.data.events.aedat4", "plif.data.events.detect", "plif.data.frames", "plif.runs.load",
           "plif.train.run", "plif.deploy.nir_export", "plif.encoding", "plif.monitor", "plif.monitor.rates",
           "plif.monitor.records", "plif.monitor.potential", "plif.models.names", *ENCODERS]
NEEDS = {"plif.deploy.nir_export": "nir"}

# the entry points that must show an example (qualified names within MODULES)
ENTRY_POINTS = {
    "plif.neurons.modules": ["IF", "LIF", "PLIF"],
    "plif.neurons.dispatch": ["multi_step"],
    "plif.models.network": ["build_network", "SpikingNetwork.forward", "SpikingNetwork.step",
                            "SpikingNetwork.initial_state"],
    "plif.models.fusion": ["fuse"],
    "plif.models.zoo": ["build_zoo"],
    "plif.data.idx": ["read_idx"],
    "plif.data.events.nmnist": ["read_nmnist_bin"],
    "plif.data.events.aedat2": ["read_aedat2"],
    "plif.data.events.aedat3": ["read_aedat31"],
    "plif.data.events.aedat4": ["read_aedat4"],
    "plif.data.events.detect": ["read_events"],
    "plif.data.frames": ["events_to_frames"],
    "plif.runs.load": ["load_run"],
    "plif.train.run": ["train"],
    "plif.deploy.nir_export": ["export_nir", "export_nir_all"],
    "plif.encoding": [],  # the package's own example shows the first encoders
    "plif.monitor": [],
    **{module: [cls] for module, cls in ENCODERS.items()},
    "plif.monitor.rates": [],  # each module's own example shows its monitors
    "plif.monitor.records": [],
    "plif.monitor.potential": [],
    "plif.models.names": [],  # the module's own example names a network's neurons
}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name, tmp_path, monkeypatch):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    module = importlib.import_module(name)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # tempfile.mkdtemp() in the examples lands here
    monkeypatch.chdir(tmp_path)
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=FLAGS)
    shown = set()
    for test in finder.find(module, name):
        if test.examples:
            torch.manual_seed(0)
            shown.add(test.name.removeprefix(name + "."))
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed (output above)"
    missing = set(ENTRY_POINTS[name]) - shown
    assert not missing, f"{name}: no example in {sorted(missing)}"


def test_the_runner_sees_a_wrong_example():
    parser = doctest.DocTestParser()
    test = parser.get_doctest(">>> 1 + 1\n3\n", {}, "wrong", "wrong.py", 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test, out=lambda text: None)
    assert runner.summarize(verbose=False).failed == 1


USAGE = __import__("pathlib").Path(__file__).resolve().parents[1] / "docs" / "usage.md"


def _section(title: str) -> str:
    text = USAGE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_coming_from_spikingjelly_runs_every_plif_line_of_its_table():
    """docs/usage.md "Coming from SpikingJelly" (issue 56.6): its ``pycon`` blocks run as doctests in
    order, in one namespace (the block marked ``needs spikingjelly`` only where it is installed), and
    every plif call of the table is in them."""
    import re

    from plif.bench.spikingjelly import spikingjelly_unavailable

    section = _section("Coming from SpikingJelly")
    blocks = re.findall(r"(<!-- needs spikingjelly -->\n)?```pycon\n(.*?)```", section, re.S)
    assert len(blocks) >= 3
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=FLAGS)
    globs, sources = {}, []
    for i, (needs, block) in enumerate(blocks):
        test = parser.get_doctest(block, globs, f"usage.md Coming from SpikingJelly, block {i + 1}", str(USAGE), 0)
        sources += [ex.source for ex in test.examples]
        if needs and spikingjelly_unavailable() is not None:
            continue
        torch.manual_seed(0)
        runner.run(test, clear_globs=False)
        globs.update(test.globs)  # a DocTest runs on a copy: the next block sees this one's names
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed (output above)"
    code = "".join(sources)
    rows = [line.split("|")[2] for line in section.splitlines()[1:] if line.startswith("| ")][1:]  # no header
    calls = [c for row in rows for c in re.findall(r"`([^`]*\([^`]*\))`", row)]
    assert len(calls) >= 14
    missing = [c for c in calls if c.replace("...", "") not in code and c != "TimeFolded(nn.Conv2d(...))"]
    assert missing == [], f"table lines not run by the examples: {missing}"
