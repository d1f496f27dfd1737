"""Code and --help cite the paper, never a spec file users do not have."""
from pathlib import Path

import plif


def test_no_spec_file_references_in_src_or_help():
    from plif.cli.main import build_parser

    src = Path(plif.__file__).parent
    hits = [f"{p.relative_to(src)}:{i}" for p in src.rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if "SPEC §" in line or "SPEC.md" in line]
    assert hits == []
    parser = build_parser("train")
    sub = next(a for a in parser._actions if a.choices and "train" in a.choices).choices["train"]
    assert "SPEC" not in sub.format_help() and "supplement" in sub.format_help()
