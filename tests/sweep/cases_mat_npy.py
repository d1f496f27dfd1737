"""ASL-DVS's .mat and DVS-Lip's .npy recordings given to ``plif data info / frames`` as a user would:
damaged or with fields missing, of unequal length or out of range; each refused in one line naming
the file and the field."""
from __future__ import annotations

import io

import numpy as np

from .case import Case, SkipCase

AREA = "events"
LIP = np.dtype([("t", "<i4"), ("x", "i1"), ("y", "i1"), ("p", "i1")])


def _mat(fields: dict) -> bytes:
    try:
        from scipy.io import savemat
    except ImportError:
        raise SkipCase("scipy is not installed") from None
    buf = io.BytesIO()
    savemat(buf, {k: np.asarray(v, float).reshape(-1, 1) for k, v in fields.items()})
    return buf.getvalue()


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=True)
    return buf.getvalue()


GOOD_MAT = {"x": [1, 2, 3, 4], "y": [4, 5, 6, 7], "ts": [10, 20, 30, 40], "pol": [0, 1, 1, 0]}
GOOD_LIP = np.array([(10, 1, 2, 1), (20, 3, 4, 0), (30, 5, 6, 1), (40, 7, 8, 0)], LIP)

FILES = {  # name -> (file name, bytes maker, expect)
    "mat-good": ("rec.mat", lambda: _mat(GOOD_MAT), "ok"),
    "mat-no-pol": ("rec.mat", lambda: _mat({k: v for k, v in GOOD_MAT.items() if k != "pol"}), "refuse"),
    "mat-pol-2": ("rec.mat", lambda: _mat({**GOOD_MAT, "pol": [0, 2, 1, 1]}), "refuse"),
    "mat-unequal": ("rec.mat", lambda: _mat({**GOOD_MAT, "ts": [1, 2]}), "refuse"),
    "mat-fractional-x": ("rec.mat", lambda: _mat({**GOOD_MAT, "x": [1.5, 2, 3, 4]}), "refuse"),
    "mat-truncated": ("rec.mat", lambda: _mat(GOOD_MAT)[:150], "refuse"),
    "mat-x-beyond-sensor": ("rec.mat", lambda: _mat({**GOOD_MAT, "x": [1, 2, 3, 240]}), "refuse"),
    "npy-good": ("rec.npy", lambda: _npy(GOOD_LIP), "ok"),
    "npy-no-p": ("rec.npy", lambda: _npy(np.zeros(3, [("t", "<i4"), ("x", "i1"), ("y", "i1")])), "refuse"),
    "npy-p-2": ("rec.npy", lambda: _npy(np.array([(1, 1, 1, 2)], LIP)), "refuse"),
    "npy-negative-x": ("rec.npy", lambda: _npy(np.array([(1, -1, 1, 1)], LIP)), "refuse"),
    "npy-float-t": ("rec.npy", lambda: _npy(np.zeros(2, [("t", "<f8"), ("x", "i1"), ("y", "i1"), ("p", "i1")])),
                    "refuse"),
    "npy-pickled": ("rec.npy", lambda: _npy(np.array([{"t": 1}], dtype=object)), "refuse"),
    "npy-truncated": ("rec.npy", lambda: _npy(GOOD_LIP)[:100], "refuse"),
    "npy-y-beyond-sensor": ("rec.npy", lambda: _npy(np.array([(1, 1, 127, 1)], LIP)), "refuse"),
}
SENSOR = {"rec.mat": ["--sensor", "180,239"], "rec.npy": ["--sensor", "100,128"]}  # the beyond-sensor cases


def _setup(fname, make):
    return lambda tmp: (tmp / fname).write_bytes(make())


CASES: list[Case] = []
for name, (fname, make, expect) in FILES.items():
    extra = SENSOR[fname] if "beyond-sensor" in name else (SENSOR[fname][:1] + ["180,240" if fname == "rec.mat"
                                                                                 else "128,128"])
    for act in ("info", "frames"):
        argv = ["data", act, "{tmp}/" + fname, *extra]
        if act == "frames":
            argv += ["--T", "2", "--out", "{tmp}/out.npy"]
        CASES.append(Case(f"{act}-{name}", AREA, argv, expect=expect, setup=_setup(fname, make)))
