"""Frame caches and event-dataset layouts: caches damaged after a build (``meta.json`` keys,
``frames.npy`` / ``labels.npy``, recordings edited in ways a stat check cannot see, leftovers),
then ``plif data verify / prepare / clean``; and N-MNIST, CIFAR10-DVS and DVS128 Gesture folders
laid out wrong (empty classes, duplicates, leaks, missing label files)."""
from __future__ import annotations

import json
import os
import shutil

from .case import Case, Env, Result
from .damage import (AEDAT2_HEADER, aedat2, aedat31, flip_byte, nmnist_sample, nmnist_tree, nudge_event, truncate_file,
                    write)

AREA = "cache"
CASES: list[Case] = []
PREP = ["data", "prepare", "nmnist", "--root", "{tmp}/nm", "--T", "3", "--test-only", "--cache-dir", "{tmp}/cache",
        "--workers", "0", "--quiet"]


def _built(env: Env):
    nmnist_tree(env.tmp / "nm", per_class=1, splits=("Test",))
    r = env.plif(*[env.fill(a) for a in PREP])
    if r.returncode != 0:
        raise RuntimeError(f"the cache build before the damage failed: {r.stderr.strip()[-300:]}")
    (folder,) = [p for p in (env.tmp / "cache").iterdir() if (p / "meta.json").is_file()]
    return folder


def scenario(damage, then: str = "verify"):
    """Build a small N-MNIST test cache, ``damage(folder, tmp)``, then run ``verify`` or ``prepare``."""
    def run(env: Env):
        folder = _built(env)
        damage(folder, env.tmp)
        if then == "verify":
            return env.plif("data", "verify", str(folder))
        return env.plif(*[env.fill(a) for a in PREP])
    return run


def _meta_edit(fn):
    def damage(folder, tmp):
        p = folder / "meta.json"
        meta = json.loads(p.read_text())
        fn(meta)
        p.write_text(json.dumps(meta))
    return damage


META_EDITS = {f"meta-without-{k}": (lambda k: lambda m: m.pop(k))(k)
              for k in ("version", "T", "split", "sensor_size", "samples", "sources", "files")}
META_EDITS.update({
    "meta-frames-entry-gone": lambda m: m["files"].pop("frames.npy"),
    "meta-labels-checksum-gone": lambda m: m["files"]["labels.npy"].pop("checksum"),
    "meta-frames-shape-gone": lambda m: m["files"]["frames.npy"].pop("shape"),
    "meta-T-string": lambda m: m.update(T="3"),
    "meta-T-null": lambda m: m.update(T=None),
    "meta-T-bool": lambda m: m.update(T=True),
    "meta-samples-float": lambda m: m.update(samples=10.0),
    "meta-sensor-one-number": lambda m: m.update(sensor_size=[34]),
    "meta-sensor-string": lambda m: m.update(sensor_size="34,34"),
    "meta-sources-list": lambda m: m.update(sources=[]),
    "meta-source-without-hash": lambda m: next(iter(m["sources"].values())).pop("hash"),
    "meta-version-1": lambda m: m.update(version=1),
    "meta-T-wrong": lambda m: m.update(T=4),
    "meta-samples-wrong": lambda m: m.update(samples=11),
})
RAW_META = {
    "meta-empty": b"", "meta-not-json": b"{not json", "meta-array": b"[1, 2]", "meta-null": b"null",
    "meta-number": b"3", "meta-nan": b'{"version": NaN}', "meta-binary": bytes(range(256)),
}
FILE_DAMAGE = {
    "frames-truncated": lambda f, t: truncate_file(f / "frames.npy", (f / "frames.npy").stat().st_size - 1),
    "frames-deleted": lambda f, t: (f / "frames.npy").unlink(),
    "frames-bit-flip-same-stat": lambda f, t: flip_byte(f / "frames.npy", -1, keep_stat=True),
    "frames-bit-flip": lambda f, t: flip_byte(f / "frames.npy", -1),
    "frames-header-garbled": lambda f, t: flip_byte(f / "frames.npy", 3),
    "frames-replaced-by-dir": lambda f, t: ((f / "frames.npy").unlink(), (f / "frames.npy").mkdir()),
    "frames-replaced-by-labels": lambda f, t: shutil.copyfile(f / "labels.npy", f / "frames.npy"),
    "labels-bit-flip-same-stat": lambda f, t: flip_byte(f / "labels.npy", -1, keep_stat=True),
    "labels-deleted": lambda f, t: (f / "labels.npy").unlink(),
    "labels-empty": lambda f, t: (f / "labels.npy").write_bytes(b""),
    "meta-deleted": lambda f, t: (f / "meta.json").unlink(),
    "recording-edited-same-stat": lambda f, t: nudge_event(t / "nm" / "Test" / "4" / "00001.bin", keep_stat=True),
    "recording-edited": lambda f, t: nudge_event(t / "nm" / "Test" / "4" / "00001.bin"),
    "recording-deleted": lambda f, t: (t / "nm" / "Test" / "4" / "00001.bin").unlink(),
    "recording-truncated": lambda f, t: truncate_file(t / "nm" / "Test" / "2" / "00001.bin", 7),
    "recording-replaced-by-dir": lambda f, t: ((t / "nm" / "Test" / "2" / "00001.bin").unlink(),
                                               (t / "nm" / "Test" / "2" / "00001.bin").mkdir()),
}
for name, fn in META_EDITS.items():
    CASES.append(Case(f"verify-{name}", AREA, run=scenario(_meta_edit(fn))))
for name, raw in RAW_META.items():
    CASES.append(Case(f"verify-{name}", AREA, run=scenario(lambda f, t, raw=raw: (f / "meta.json").write_bytes(raw))))
for name, fn in FILE_DAMAGE.items():
    CASES.append(Case(f"verify-{name}", AREA, run=scenario(fn)))


def _rebuilt(tmp, r):
    """check after a prepare that should have rebuilt: a finished cache again, and the reason said."""
    (folder,) = [p for p in (tmp / "cache").iterdir() if p.is_dir()]
    if not (folder / "meta.json").is_file():
        return "prepare left no finished cache"
    if "rebuilding the frame cache" not in r.stderr and "recording changed" not in r.stderr:
        return "prepare did not say why it rebuilt"
    return None


# prepare after cache damage: rebuilds (and says why) -> ok
for name in ("meta-without-T", "meta-without-files", "meta-T-string", "meta-source-without-hash", "meta-version-1"):
    CASES.append(Case(f"prepare-rebuilds-{name}", AREA, expect="ok", run=scenario(_meta_edit(META_EDITS[name]), "prepare"),
                      check=_rebuilt))
for name in ("meta-not-json", "meta-array", "meta-null"):
    CASES.append(Case(f"prepare-rebuilds-{name}", AREA, expect="ok", check=_rebuilt,
                      run=scenario(lambda f, t, raw=RAW_META[name]: (f / "meta.json").write_bytes(raw), "prepare")))
for name in ("frames-truncated", "frames-bit-flip", "labels-bit-flip-same-stat", "recording-edited"):
    CASES.append(Case(f"prepare-rebuilds-{name}", AREA, expect="ok", check=_rebuilt, run=scenario(FILE_DAMAGE[name], "prepare")))
# leftovers that a build must clean up or ignore
CASES += [
    Case("prepare-with-stale-lock", AREA, expect="ok", run=scenario(
        lambda f, t: ((f / "meta.json").unlink(), (f / ".build.lock").write_text("12345")), "prepare")),
    Case("prepare-with-temp-leftovers", AREA, expect="ok", run=scenario(
        lambda f, t: ((f / "meta.json").unlink(), write(f / ".frames.npy.999.tmp", b"x" * 100)), "prepare")),
    Case("prepare-with-garbage-chunk", AREA, expect="ok", run=scenario(
        lambda f, t: ((f / "meta.json").unlink(), write(f / "chunks" / "chunk_000000.npy", b"garbage"),
                      write(f / "chunks" / "chunk_000000.npy.json", b"{}")), "prepare")),
    Case("prepare-recording-emptied", AREA, run=scenario(
        lambda f, t: (t / "nm" / "Test" / "3" / "00001.bin").write_bytes(b""), "prepare")),
    Case("prepare-recording-junk", AREA, run=scenario(
        lambda f, t: (t / "nm" / "Test" / "3" / "00001.bin").write_bytes(b"\xff" * 50), "prepare")),
]
# verify / clean given the wrong things
CASES += [
    Case("verify-not-a-cache", AREA, ["data", "verify", "{tmp}"]),
    Case("verify-missing-folder", AREA, ["data", "verify", "{tmp}/nope"]),
    Case("verify-a-file", AREA, ["data", "verify", "{tmp}/f"], setup=lambda tmp: write(tmp / "f", b"x")),
    Case("verify-empty-cache-dir", AREA, ["data", "verify", "--cache-dir", "{tmp}"], expect="ok"),
    Case("verify-good", AREA, expect="ok", run=scenario(lambda f, t: None)),
    Case("verify-touched-same-bytes", AREA, expect="ok", run=scenario(
        lambda f, t: os.utime(t / "nm" / "Test" / "1" / "00001.bin", ns=(1, 10**18)))),
    Case("clean-missing-cache-dir", AREA, ["data", "clean", "--cache-dir", "{tmp}/nope"]),
    Case("clean-cache-dir-is-file", AREA, ["data", "clean", "--cache-dir", "{tmp}/f"], setup=lambda tmp: write(tmp / "f", b"x")),
    Case("clean-keeps-other-folders", AREA, ["data", "clean", "--cache-dir", "{tmp}", "--all"], expect="ok",
         setup=lambda tmp: (write(tmp / "mine" / "notes.txt", b"keep me"), write(tmp / "nmnist-test-T3-count-xyz" / "a", b"1")),
         check=lambda tmp, r: None if (tmp / "mine" / "notes.txt").is_file() and (tmp / "nmnist-test-T3-count-xyz").is_dir()
         else "clean removed a folder that is not a frame cache"),
]


def _clean_after_rebuild(env: Env):
    folder = _built(env)
    nmnist_tree(env.tmp / "nm2", per_class=1, splits=("Test",))
    shutil.copyfile(env.tmp / "nm2" / "Test" / "0" / "00001.bin", env.tmp / "nm" / "Test" / "0" / "00002.bin")
    r = env.plif(*[env.fill(a) for a in PREP])
    if "older frame cache" not in r.stderr:  # a new cache beside an older one must say so
        return Result(2, r.stdout, "sweep: error: the new build did not name the older cache\n", r.seconds)
    return env.plif("data", "clean", "--cache-dir", str(env.tmp / "cache"))


CASES.append(Case("clean-after-a-new-cache", AREA, expect="ok", run=_clean_after_rebuild,
                  check=lambda tmp, r: None if len(list((tmp / "cache").iterdir())) == 1 else "the older cache is still there"))

# ---------------------------------------------------------------- layouts of event datasets


def _nm(edit, train=False):
    def setup(tmp):
        nmnist_tree(tmp / "nm", per_class=2)
        edit(tmp / "nm")
    return setup


_PREP_NM = ["data", "prepare", "nmnist", "--root", "{tmp}/nm", "--T", "3", "--cache-dir", "{tmp}/cache", "--workers", "0",
            "--quiet"]
NM_LAYOUTS = {
    "empty-class-folder": lambda r: [p.unlink() for p in (r / "Test" / "6").iterdir()],
    "missing-class-folder": lambda r: shutil.rmtree(r / "Test" / "6"),
    "class-folder-is-file": lambda r: (shutil.rmtree(r / "Train" / "2"), write(r / "Train" / "2", b"x")),
    "only-other-files": lambda r: [p.rename(p.with_suffix(".txt")) for p in (r / "Test" / "1").iterdir()],
    "duplicate-number": lambda r: shutil.copyfile(r / "Train" / "3" / "00001.bin", r / "Train" / "3" / "1.bin"),
    "test-linked-to-train": lambda r: (shutil.rmtree(r / "Test" / "5"), (r / "Test" / "5").symlink_to(r / "Train" / "5")),
    "file-linked-into-train": lambda r: ((r / "Test" / "5" / "00001.bin").unlink(),
                                         (r / "Test" / "5" / "00001.bin").symlink_to(r / "Train" / "5" / "00002.bin")),
    "no-test-folder": lambda r: shutil.rmtree(r / "Test"),
    "empty-recording": lambda r: (r / "Train" / "7" / "00001.bin").write_bytes(b""),
    "junk-recording": lambda r: (r / "Train" / "7" / "00001.bin").write_bytes(b"\xfe" * 40),
    "truncated-recording": lambda r: truncate_file(r / "Test" / "7" / "00002.bin", 12),
    "aedat-in-nmnist": lambda r: (r / "Train" / "8" / "00001.bin").write_bytes(aedat2()),
    "directory-named-bin": lambda r: (r / "Train" / "8" / "00009.bin").mkdir(),
    "dangling-link": lambda r: (r / "Train" / "8" / "00009.bin").symlink_to(r / "gone.bin"),
}
for name, edit in NM_LAYOUTS.items():
    CASES.append(Case(f"nmnist-{name}", AREA, _PREP_NM, setup=_nm(edit), timeout=120))
CASES.append(Case("nmnist-good-layout", AREA, _PREP_NM, expect="ok", setup=_nm(lambda r: None), timeout=120))
CASES.append(Case("nmnist-root-missing", AREA, ["data", "prepare", "nmnist", "--root", "{tmp}/nope", "--T", "3"]))
CASES.append(Case("nmnist-no-root", AREA, ["data", "prepare", "nmnist", "--T", "3"]))
for name, extra in {"T-zero": ["--T", "0"], "T-negative": ["--T", "-2"], "T-huge": ["--T", "100000000"],
                    "workers-negative": ["--workers", "-1"], "split-bad": ["--split", "linear"]}.items():
    argv = [a for a in _PREP_NM if a not in ("--T", "3")] + extra
    CASES.append(Case(f"nmnist-opt-{name}", AREA, argv, setup=_nm(lambda r: None), timeout=120))

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def _cifar_dvs(edit):
    def setup(tmp):
        for i, c in enumerate(CLASSES):
            for k in range(1, 11):  # 9 train, 1 test of each class; no two alike (a copy is a train/test leak)
                j = 10 * i + k
                write(tmp / "cd" / c / f"cifar10_{c}_{k}.aedat", aedat2(((1, 2, 1, 10 + j), (3, 4, 0, 200 + j))))
        edit(tmp / "cd")
    return setup


_PREP_CD = ["data", "prepare", "cifar10-dvs", "--root", "{tmp}/cd", "--T", "2", "--cache-dir", "{tmp}/cache", "--workers",
            "0", "--quiet"]
CD_LAYOUTS = {
    "empty-class": lambda r: [p.unlink() for p in (r / "dog").iterdir()],
    "missing-class": lambda r: shutil.rmtree(r / "frog"),
    "zero-padded-duplicate": lambda r: write(r / "cat" / "cifar10_cat_01.aedat", aedat2()),
    "aedat-and-aedat4-same-number": lambda r: write(r / "cat" / "cifar10_cat_2.aedat4", b"#!AER-DAT4.0\r\n"),
    "name-without-number": lambda r: write(r / "cat" / "cifar10_cat_x.aedat", aedat2()),
    "name-no-digits": lambda r: write(r / "cat" / "cat.aedat", aedat2()),
    "davis-recording": lambda r: write(r / "ship" / "cifar10_ship_1.aedat",
                                       aedat2(header=b"#!AER-DAT2.0\r\n# AEChip: Davis346red\r\n")),
    "header-only-recording": lambda r: write(r / "ship" / "cifar10_ship_2.aedat", AEDAT2_HEADER),
    "truncated-recording": lambda r: write(r / "ship" / "cifar10_ship_2.aedat", aedat2()[:-3]),
    "gesture-file-in-class": lambda r: write(r / "ship" / "cifar10_ship_2.aedat", aedat31([(200, 3, 1, 5)])),
}
for name, edit in CD_LAYOUTS.items():
    CASES.append(Case(f"cifar10dvs-{name}", AREA, _PREP_CD, setup=_cifar_dvs(edit), timeout=120))
CASES.append(Case("cifar10dvs-good-layout", AREA, _PREP_CD, expect="ok", setup=_cifar_dvs(lambda r: None), timeout=120))

LABELS = "class,startTime_usec,endTime_usec\n1,0,15\n2,15,40\n"


def _gesture(train=("user01_led.aedat",), test=("user02_led.aedat",), edit=lambda d: None, labels=LABELS):
    def setup(tmp):
        d = tmp / "g" / "DvsGesture"
        write(d / "trials_to_train.txt", "".join(f"{r}\n" for r in train).encode())
        write(d / "trials_to_test.txt", "".join(f"{r}\n" for r in test).encode())
        for j, rec in enumerate(sorted(set(train) | set(test))):  # no two alike (a copy is a train/test leak)
            write(d / rec, aedat31(((1, 2, 1, 10), (3, 4, 0, 20), (5, 6, 1, 30 + j))))
            write(d / rec.replace(".aedat", "_labels.csv"), labels.encode())
        edit(d)
    return setup


_PREP_G = ["data", "prepare", "dvs128-gesture", "--root", "{tmp}/g", "--T", "2", "--cache-dir", "{tmp}/cache", "--workers",
           "0", "--quiet"]
G_LAYOUTS = {
    "leak": dict(train=("user01_led.aedat", "user02_led.aedat"), test=("user02_led.aedat",)),
    "listed-twice": dict(train=("user01_led.aedat", "user01_led.aedat")),
    "labels-missing": dict(edit=lambda d: (d / "user01_led_labels.csv").unlink()),
    "recording-missing": dict(edit=lambda d: (d / "user02_led.aedat").unlink()),
    "aedat2-as-recording": dict(edit=lambda d: write(d / "user01_led.aedat", aedat2())),
    "aedat2-header-sample-as-recording": dict(edit=lambda d: write(d / "user01_led.aedat", AEDAT2_HEADER)),
    "n-mnist-as-recording": dict(edit=lambda d: write(d / "user01_led.aedat", nmnist_sample())),
    "labels-bad-header": dict(labels="cls,start,end\n1,0,10\n"),
    "labels-class-0": dict(labels="class,startTime_usec,endTime_usec\n0,0,10\n"),
    "labels-class-12": dict(labels="class,startTime_usec,endTime_usec\n12,0,10\n"),
    "labels-start-after-end": dict(labels="class,startTime_usec,endTime_usec\n1,20,10\n"),
    "labels-negative-start": dict(labels="class,startTime_usec,endTime_usec\n1,-5,10\n"),
    "labels-not-integers": dict(labels="class,startTime_usec,endTime_usec\n1,0.5,10\n"),
    "labels-two-fields": dict(labels="class,startTime_usec,endTime_usec\n1,0\n"),
    "labels-header-only": dict(labels="class,startTime_usec,endTime_usec\n"),
    "labels-empty-file": dict(labels=""),
    "labels-binary": dict(edit=lambda d: write(d / "user01_led_labels.csv", bytes(range(256)))),
    "cut-without-events": dict(labels="class,startTime_usec,endTime_usec\n1,500,900\n"),
    "trials-with-path": dict(train=("../user01_led.aedat",)),
    "trials-not-aedat": dict(train=("user01_led.txt",)),
    "trials-empty": dict(train=()),
    "no-test-list": dict(edit=lambda d: (d / "trials_to_test.txt").unlink()),
}
for name, kw in G_LAYOUTS.items():
    CASES.append(Case(f"gesture-{name}", AREA, _PREP_G, setup=_gesture(**kw), timeout=120))
CASES.append(Case("gesture-good-layout", AREA, _PREP_G, expect="ok", setup=_gesture(), timeout=120))
CASES.append(Case("gesture-labels-with-bom-ok", AREA, _PREP_G, expect="ok", setup=_gesture(labels="\ufeff" + LABELS),
                  timeout=120))


# --- issue 39.5: a recording edited with its mtime put back, and a copy across splits -------------------
_PREP_BOTH = ["data", "prepare", "nmnist", "--root", "{tmp}/nm", "--T", "3", "--cache-dir", "{tmp}/cache", "--workers",
              "0", "--quiet"]
_TRAIN_NM = ["train", "--dataset", "nmnist", "--data-dir", "{tmp}/nm", "--network", "FC10-PLIF", "--T", "3", "--epochs",
             "1", "--batch-size", "8", "--device", "cpu"]
_ROOT = {"PLIF_DATA_ROOT": "{tmp}/root"}  # plif train's caches go under the case's folder


def _then(env, argv, **kw):
    return env.plif(*[env.fill(a) for a in argv], extra_env={k: env.fill(v) for k, v in _ROOT.items()}, **kw)


def _edited_after(first: list[str], edit, again: list[str]):
    """``first`` builds the caches, ``edit(tmp)`` changes a recording keeping size, inode and mtime, ``again``."""
    def run(env: Env):
        nmnist_tree(env.tmp / "nm", per_class=2)
        r = _then(env, first, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"the first build failed: {r.stderr.strip()[-300:]}")
        edit(env.tmp)
        return _then(env, again, timeout=300)
    return run


def _said_changed(tmp, r):
    return None if "recording changed" in r.stderr else "the edited recording was reused without a word"


def _big_recording(tmp):
    """A 150 KB recording (more than the two 64 KiB ends a training load hashes), edited in the middle."""
    from .damage import nmnist_event

    events = b"".join(nmnist_event(i % 34, (i // 34) % 34, i % 2, 10 * i) for i in range(30000))
    write(tmp / "nm" / "Test" / "3" / "00001.bin", events)


def _edit_middle(tmp):
    p = tmp / "nm" / "Test" / "3" / "00001.bin"
    st = p.stat()
    raw = bytearray(p.read_bytes())
    raw[5 * 15000] = (raw[5 * 15000] + 1) % 34  # the x of the middle event: still a valid recording
    with open(p, "r+b") as f:
        f.write(bytes(raw))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def _big_then_edit(env: Env):
    nmnist_tree(env.tmp / "nm", per_class=2)
    _big_recording(env.tmp)
    r = _then(env, _PREP_BOTH, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"the first build failed: {r.stderr.strip()[-300:]}")
    _edit_middle(env.tmp)
    return _then(env, _PREP_BOTH, timeout=300)


CASES += [
    Case("touched-back-recording-prepare", AREA, expect="ok", check=_said_changed, timeout=600, run=_edited_after(
        _PREP_BOTH, lambda t: nudge_event(t / "nm" / "Test" / "4" / "00001.bin", keep_stat=True), _PREP_BOTH)),
    Case("touched-back-recording-train", AREA, expect="ok", check=_said_changed, timeout=600, run=_edited_after(
        [*_TRAIN_NM, "--out", "{tmp}/run"], lambda t: nudge_event(t / "nm" / "Train" / "4" / "00001.bin", keep_stat=True),
        [*_TRAIN_NM, "--out", "{tmp}/run2"])),
    Case("touched-back-big-recording-prepare", AREA, expect="ok", check=_said_changed, timeout=600, run=_big_then_edit),
]


def _copied_across(argv):
    def run(env: Env):
        nmnist_tree(env.tmp / "nm", per_class=2)
        shutil.copyfile(env.tmp / "nm" / "Test" / "5" / "00001.bin", env.tmp / "nm" / "Train" / "5" / "00099.bin")
        return _then(env, argv, timeout=300)

    def check(tmp, r):
        caches = [p for d in (tmp / "cache", tmp / "root" / "frames") if d.is_dir() for p in d.iterdir()]
        if caches:
            return f"a frame cache was built before the refusal: {caches[0]}"
        return None if "holds the same bytes as" in r.stderr and "leak" in r.stderr else "the refusal names no leak"
    return run, check


for name, argv in {"prepare": _PREP_BOTH, "prepare-train-only": [*_PREP_BOTH, "--train-only"],
                   "prepare-test-only": [*_PREP_BOTH, "--test-only"], "train": [*_TRAIN_NM, "--out", "{tmp}/run"]}.items():
    run, check = _copied_across(argv)
    CASES.append(Case(f"test-recording-copied-into-train-{name}", AREA, run=run, check=check, timeout=600))
