"""Lower the Triton neuron kernels for a named GPU on a machine without one (as far as TTGIR).

Triton compiles an ``ASTSource`` for a target given by name (``GPUTarget("cuda", 90, 32)``: an
H100) without a driver.  Eager launches hand the kernels fp32 scalars and i32 sizes; Inductor
hands them Python floats as fp64 and sizes as i64 (issue 29: ``torch.compile`` failed with
"Loop-carried variable v has initial type fp32 but is re-assigned to fp64").  Each variant is
lowered both ways, and the fp64 lowering must hold no fp64 tensor: state and arithmetic stay fp32.

The variants are what the launchers can ask for: the flags of :mod:`.triton_launch` for every
neuron option and surrogate, each launch shape the launch table returns, the input dtypes
(fp32, bf16, fp16) and ``H``'s (fp32, bf16).  :func:`covering_variants` picks a set in which every
value of every factor, and every pair of values of two factors, appears (about 20 per kernel
pass, a few seconds); ``--all`` lowers every flag combination instead.  The fused block's kernels
are lowered with them (:mod:`.lowering_block`).

    python -m plif.kernels.lowering [--all] [--stop ttir|ttgir]
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

from ..surrogate import SURROGATES, get_surrogate
from .lowering_block import BLOCK_KERNELS, INTS, POINTERS, block_all_variants, block_covering_variants
from .lowering_variants import DTYPES, Variant, cover, in_turn, neuron_options
from .triton_launch import Launch, backward_flags, forward_flags, launch_config

__all__ = ["Variant", "TARGET", "launches", "covering_variants", "all_variants", "signature", "lower", "main"]

TARGET = ("cuda", 90, 32)  # backend, compute capability, warp size: an H100
SCALARS = {"eager": ("fp32", "i32"), "inductor": ("fp64", "i64")}
_FLOATS = ("v_th", "v_reset", "sg_a", "sg_b")
_INTS = ("T", "N", "LAST", "M", "INNER", "C")
# pointer arguments by role: "x" (the input's dtype), "h" (H's dtype), "f32"
_POINTERS = {"x_ptr": "x", "k_ptr": "f32", "v0_ptr": "x", "s_ptr": "x", "h_ptr": "h", "v_last_ptr": "x",
             "g_s_ptr": "x", "g_v_last_ptr": "x", "g_x_ptr": "x", "g_v0_ptr": "x", "g_k_part_ptr": "f32"}


def launches() -> list[Launch]:
    """Every launch the table returns, over layer sizes from 1 neuron to 2^22."""
    found = {launch_config(2 ** e) for e in range(23)}
    return sorted(found, key=lambda launch: (launch.block, launch.num_warps))


def _forward_rows():
    for (leak, hard, pc), x, h, unit in itertools.product(
            neuron_options(), DTYPES, ("float32", "bfloat16"), (False, True)):
        yield {"leak": leak, "hard": hard, "pc": pc, "x": x, "h": h, "unit": unit}


def _backward_rows():
    codes = sorted({get_surrogate(name).code for name in SURROGATES})
    for (leak, hard, pc), detach, sg, need_k, x, h, unit in itertools.product(
            neuron_options(), (True, False), codes, (True, False), DTYPES, ("float32", "bfloat16"), (False, True)):
        if need_k and not leak:  # ∂k is asked for only where k is learnable
            continue
        yield {"leak": leak, "hard": hard, "pc": pc, "detach": detach, "sg": sg, "need_k": need_k,
               "x": x, "h": h, "unit": unit}


def _variant(kernel: str, row: dict, launch: Launch) -> Variant:
    if kernel == "forward":
        flags = forward_flags(row["leak"], row["hard"], row["pc"], launch.block)
    else:
        flags = backward_flags(row["leak"], row["hard"], row["detach"], row["sg"], row["pc"], row["need_k"],
                               launch.block)
    return Variant(kernel, tuple(sorted(flags.items())), launch.num_warps, row["x"], row["h"], row["unit"])


def covering_variants() -> list[Variant]:
    """Per kernel, every value of every factor and every pair of two factors' values, with the
    launch shapes of :func:`launches` taken in turn (rows repeated until each shape is lowered);
    then the fused block's (:mod:`.lowering_block`)."""
    out, shapes = block_covering_variants(), launches()
    for kernel, rows in (("forward", _forward_rows()), ("backward", _backward_rows())):
        out += [_variant(kernel, row, shape) for row, shape in in_turn(cover(list(rows)), shapes)]
    return out


def all_variants() -> list[Variant]:
    """Every flag combination of both kernels at the default launch (fp32 input and ``H``), and of
    the fused block's (:mod:`.lowering_block`)."""
    launch = launch_config(2 ** 20)
    out = block_all_variants()
    for kernel, rows in (("forward", _forward_rows()), ("backward", _backward_rows())):
        seen = set()
        for row in rows:
            v = _variant(kernel, {**row, "x": "float32", "h": "float32", "unit": False}, launch)
            if v.flags not in seen:
                seen.add(v.flags)
                out.append(v)
    return out


def _kernel(name: str):
    from . import triton_block, triton_neuron

    fn = getattr(triton_block if name in BLOCK_KERNELS else triton_neuron, f"_{name}_kernel")
    if not hasattr(fn, "arg_names") or os.environ.get("TRITON_INTERPRET") == "1":
        raise RuntimeError("TRITON_INTERPRET=1: the kernels are interpreted here, not compiled; "
                           "lower them in a process without it")
    return fn


def signature(v: Variant, scalars: str) -> tuple[dict, dict]:
    """``(signature, constexprs)`` of ``v`` for an ``ASTSource``, as a launch with ``scalars``
    (``eager`` or ``inductor``) types them."""
    fn = _kernel(v.kernel)
    f_type, i_type = SCALARS[scalars]
    flags = dict(v.flags)
    consts = dict(flags)
    block = v.kernel in BLOCK_KERNELS  # the fused block's: C counts channels, not k's values
    if not block and not flags["PER_CHANNEL"]:
        consts["C"] = 1  # one k: C is 1, which Triton's JIT (and Inductor) pass as a constant
    if v.unit_sizes:
        consts.update(T=1, **({} if block else {"INNER": 1}))
    pointers = {**_POINTERS, **POINTERS} if block else _POINTERS
    sig = {}
    for name in fn.arg_names:
        if name in consts:
            sig[name] = "constexpr"
        elif name in pointers:
            role = pointers[name]
            sig[name] = "*" + {"x": DTYPES[v.x_dtype], "h": DTYPES[v.h_dtype], "f32": "fp32", "u8": "u8"}[role]
        elif name in _FLOATS:
            sig[name] = f_type
        elif name in _INTS or (block and name in INTS):
            sig[name] = i_type
        else:
            raise ValueError(f"kernel {v.kernel}: argument {name!r} has no type in plif.kernels.lowering")
    return sig, consts


def lower(v: Variant, scalars: str = "eager", stop: str = "ttgir", num_stages: int | None = None) -> str:
    """The IR of ``v`` at stage ``stop`` for :data:`TARGET`; raises Triton's ``CompilationError``."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    sig, consts = signature(v, scalars)
    src = ASTSource(_kernel(v.kernel), sig, consts)
    target = GPUTarget(*TARGET)
    backend = make_backend(target)
    opts = {"num_warps": v.num_warps, "enable_fp_fusion": False}  # as the eager launch
    if num_stages is not None:
        opts["num_stages"] = num_stages
    options = backend.parse_options(opts)
    stages: dict = {}
    backend.add_stages(stages, options, src.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                         context)
    metadata: dict = {}
    for name, step in stages.items():
        module = step(module, metadata)
        if name == stop:
            return str(module)
    raise ValueError(f"--stop {stop}: not a stage of this Triton ({', '.join(stages)})")


def fp64_tensors(ir_text: str) -> list[str]:
    """Lines of ``ir_text`` that hold an fp64 tensor (state or arithmetic widened by a scalar)."""
    return [line.strip() for line in ir_text.splitlines() if "xf64" in line]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="lower the Triton neuron kernels for an H100, without a GPU")
    p.add_argument("--all", action="store_true", help="every flag combination (slower) instead of the all-pairs set")
    p.add_argument("--stop", default="ttgir", choices=("ttir", "ttgir"), help="last stage to run")
    args = p.parse_args(argv)
    bad, t0 = 0, time.perf_counter()
    variants = all_variants() if args.all else covering_variants()
    for v in variants:
        for scalars in SCALARS:
            try:
                wide = fp64_tensors(lower(v, scalars, args.stop))
                msg = f"fp64 tensors: {wide[0]}" if wide else ""
            except Exception as e:  # noqa: BLE001  (report each variant and go on)
                msg = f"{type(e).__name__}: {str(e).strip().splitlines()[-1]}"
            bad += bool(msg)
            print(f"{'FAIL' if msg else 'ok  '} {scalars:8s} {v.name} {msg}", flush=True)
    print(f"{len(variants)} variants x {len(SCALARS)} scalar typings, {bad} failed, "
          f"{time.perf_counter() - t0:.1f}s", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
