"""scripts/constraints.txt pins what scripts/setup.sh installs: every package the dev extra and the
script's own --no-deps installs name is pinned there to one version, and torch is left to the script."""
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "scripts" / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            m = PIN.match(line.strip())
            assert m, f"constraints.txt: {line!r} is not NAME==VERSION"
            pins[_norm(m[1])] = m[2]
    return pins


def _requirement_name(req: str) -> str:
    return _norm(re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0])


def test_every_dev_and_core_requirement_is_pinned():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {_requirement_name(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]}
    assert sorted(wanted - {"torch"} - set(_pins())) == []


def test_the_no_deps_installs_of_setup_are_pinned_and_torch_is_not():
    setup = (REPO / "scripts" / "setup.sh").read_text()
    named = {_norm(n) for n in re.findall(r'"([A-Za-z0-9_\-]+)(?:==|>=)', setup)} - {"torch"}
    pins = _pins()
    assert named and sorted(named - set(pins)) == []
    assert "torch" not in pins and "plif" not in pins
