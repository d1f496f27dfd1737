"""The README's Python example runs as written."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_python_example_runs():
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no Python example"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert namespace["out"].shape == (8, 16, 10)
    assert namespace["spikes"].shape == (8, 4, 128, 28, 28)
