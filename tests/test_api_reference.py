"""The API reference (scripts/api_reference.py, pdoc) builds with no problem and documents the public API."""
import html
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "api_reference.py"


@pytest.fixture(scope="module")
def api():
    spec = importlib.util.spec_from_file_location("api_reference", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The reference as users build it, in a fresh process (so hiding the optional packages means
    something: nothing imported them before)."""
    pytest.importorskip("pdoc", reason="pdoc is in the dev extras: pip install -e '.[dev]'")
    out = tmp_path_factory.mktemp("api")
    r = subprocess.run([sys.executable, str(SCRIPT), "-o", str(out)], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    return out, r


def test_builds_without_warnings_or_docstring_problems(reference):
    out, r = reference
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert (out / "index.html").is_file()


def section_text(page: str, name: str) -> str:
    """The docstring shown for ``name`` on ``page``, as plain text."""
    start = rf'<(?:section|div) id="{re.escape(name)}"[^>]*>'
    m = re.search(start + r'((?:(?!<(?:section|div) id=").)*?)<div class="docstring">(.*?)</div>', page, re.S)
    assert m, f"{name} has no documented section"
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(2)))


def words(text: str) -> str:
    return re.sub(r"\W", "", re.sub(r":[a-z]+:", "", text))


KEY = [
    ("plif/layers.html", "plif.layers", ["TimeFolded", "SpikeMaxPool2d", "TimeInvariantDropout", "Voting"]),
    ("plif/neurons.html", "plif.neurons", ["SpikingNeuron", "IF", "LIF", "PLIF", "multi_step", "neuron_step"]),
    ("plif/surrogate.html", "plif.surrogate", ["register_surrogate", "get_surrogate", "Surrogate"]),
    ("plif/models.html", "plif.models", ["build_network", "SpikingNetwork", "build_zoo", "parse"]),
    ("plif/data/events.html", "plif.data.events", ["read_events", "read_nmnist_bin", "read_aedat2", "read_aedat31"]),
    ("plif/data/frames.html", "plif.data.frames", ["events_to_frames"]),
    ("plif/train.html", "plif.train", ["TrainConfig", "train"]),
    ("plif/runs.html", "plif.runs", ["load_run", "RunFolder", "read_metrics"]),
    ("plif/deploy.html", "plif.deploy", ["load_run", "fold_batchnorm", "export_nir"]),
]


@pytest.mark.parametrize("page,module,names", KEY, ids=[k[1] for k in KEY])
def test_key_objects_appear_with_their_docstrings(reference, page, module, names):
    out, r = reference
    text = (out / page).read_text()
    for name in names:
        doc = inspect.getdoc(getattr(importlib.import_module(module), name))
        first = doc.split("\n\n")[0]
        assert words(first) in words(section_text(text, name)), name


@pytest.mark.parametrize("page,name,shape", [
    ("plif/layers.html", "TimeFolded", "[T, B, ...]"), ("plif/layers.html", "SpikeMaxPool2d", "[T, B, C, H, W]"),
    ("plif/layers.html", "TimeInvariantDropout", "[T, B, ...]"), ("plif/layers.html", "Voting", "[..., N]"),
    ("plif/neurons.html", "multi_step", "[T, B, ...]"), ("plif/neurons.html", "SpikingNeuron", "[T, B, ...]"),
    ("plif/models.html", "SpikingNetwork", "[T, B, classes]"),
    ("plif/data/frames.html", "events_to_frames", "[T, 2, H, W]"),
])
def test_tensor_objects_state_their_shapes(reference, page, name, shape):
    out, r = reference
    assert shape in section_text((out / page).read_text(), name)


def test_registries_and_config_fields_are_described(reference):
    out, r = reference
    assert "The four built-in surrogates by name" in section_text((out / "plif/surrogate.html").read_text(),
                                                                  "SURROGATES")
    data = (out / "plif/data.html").read_text()
    assert "Every dataset's record by name" in section_text(data, "DATASETS")  # the zoo's entries too
    assert "Adam learning rate" in section_text((out / "plif/train.html").read_text(), "TrainConfig.lr")


def test_torch_docstrings_are_not_shown_as_plif_s(reference):
    out, r = reference
    layers = (out / "plif/layers.html").read_text()
    assert "Define the computation performed at every call" not in layers
    assert "Initialize internal Module state" not in layers


def test_left_out_packages_have_no_page(reference, api):
    out, r = reference
    for name in ("plif.cli", "plif.kernels", "plif.bench"):
        assert name in api.LEFT_OUT
        assert not (out / (name.replace(".", "/") + ".html")).exists()


@pytest.mark.parametrize("docstring_html,problem", [
    ("<p>shift = t<em>W, t</em>W</p>", "emphasis"),
    ("<p>written to <run>/tensorboard</p>", "raw HTML <run>"),
    ("<p>the paper's integration::</p>\n<pre><code>x\n</code></pre>", "'::'"),
    ("<p>see :ref:<code>x</code></p>", "reST role"),
    ("<p>an `unmatched backtick</p>", "unmatched backtick"),
    ("<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td><td>3</td></tr></tbody>"
     "</table>", "table row"),
])
def test_markup_check_flags_what_reads_wrong(api, docstring_html, problem):
    assert any(problem in p for p in api.markup_problems(docstring_html))


def test_markup_check_passes_clean_markup(api):
    assert api.markup_problems("<p>A <code>x [T, B, ...]</code> <a href='#x'>link</a>:</p>\n<pre><code>a::b\n</code>"
                               "</pre><ul><li>item</li></ul>") == []


def test_cross_references_resolve_as_pdoc_links_them(api):
    assert api.resolves("plif.layers.TimeFolded", "plif.models.network", "build_network")
    assert api.resolves(".frames", "plif.data", "DATASETS")  # relative to a package
    assert api.resolves(".notation", "plif.models.network", "build_network")  # relative to a module's package
    assert api.resolves("build_network()", "plif.models.network", "SpikingNetwork")
    assert api.resolves("step", "plif.neurons.modules", "SpikingNeuron", is_class=True)
    assert not api.resolves("step", "plif.neurons.modules", "SpikingNeuron")
    assert not api.resolves("plif.layers.NoSuchLayer", "plif.layers", "TimeFolded")
    assert not api.resolves(".no_such_module", "plif.data", "DATASETS")


def test_optional_packages_are_hidden_during_the_build_and_restored(api):
    before = sys.modules.get("colorsys")
    with api.without(("colorsys",)):
        with pytest.raises(ImportError):
            import colorsys  # noqa: F401
    assert sys.modules.get("colorsys") is before


def test_a_module_that_imports_an_optional_package_fails_the_build(api, tmp_path, monkeypatch):
    pytest.importorskip("pdoc", reason="pdoc is in the dev extras: pip install -e '.[dev]'")
    (tmp_path / "needs_plots.py").write_text('"""Imports matplotlib at import time."""\nimport matplotlib\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    problems = api.build(tmp_path / "out", modules=("needs_plots",))
    assert len(problems) == 1 and problems[0].startswith("needs_plots: does not import without the optional packages")


def test_a_literal_that_wraps_a_line_is_refused_whatever_the_renderer(api):
    # markdown2 2.5.6 stopped pairing a ``span`` across a line break, older releases paired it: the
    # source is checked, so the build fails on every release instead of on some
    wrapped = "Runs ``plif bench\nmemory`` and more."
    assert api.wrapped_literals(wrapped) == [
        "a ``literal`` wraps the line 'Runs ``plif bench' (keep it on one line)",
        "a ``literal`` wraps the line 'memory`` and more.' (keep it on one line)"]
    assert api.wrapped_literals("Runs ``plif bench memory``\nand ``more``.\n    >>> x = '``'") == []
