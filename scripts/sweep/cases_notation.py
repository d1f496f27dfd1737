"""Network notation given to ``plif spec`` and ``plif train --network``: the parser's bad inputs."""
from case import Case

_BAD_SPECS = {
    "empty": "",
    "unknown-token": "c8k3s1-XX-FC10",
    "unclosed-group": "{c8k3s1-PLIF-FC10",
    "zero-channels": "c0k3s1-PLIF-FC10",
    "huge-int-fc": "FC99999999999999999999",
    "huge-int-conv": "c99999999999999999999k3s1-PLIF-FC10",
    "huge-repeat": "{c8k3s1-PLIF}*99999999999999999999-FC10",
    "negative-dropout": "c8k3s1-PLIF-DPp-1-FC10",
}

CASES = [Case(f"spec-{name}", "notation", ["spec", text, "--input", "1,28,28", "--T", "2"])
         for name, text in _BAD_SPECS.items()]
CASES += [
    Case("spec-input-huge-int", "notation", ["spec", "c8k3s1-PLIF-FC10", "--input", "1,99999999999999999999,28"]),
    Case("spec-input-not-ints", "notation", ["spec", "c8k3s1-PLIF-FC10", "--input", "one,28,28"]),
    Case("spec-good", "notation", ["spec", "c8k3s1-BN-PLIF-MPk2s2-FC10", "--input", "1,28,28", "--T", "2"],
         expect="ok"),
]
