"""Check a NIR graph against what its nodes mean before anything runs it (``plif export --check``,
``read_nir``, ``from_nir``): one line naming the node (or metadata entry) and the field.

A NIR file is data from anywhere: an edited HDF5 field gives NaN time constants, weights of 1e38,
a 5-D "2-D convolution" or shapes that do not follow from node to node, and an importer runs them
without a word.  :func:`check_graph` refuses, with :class:`NIRFileError`:

- time constants (``tau``, ``tau_mem``, ``tau_syn``) that are not positive finite float32 numbers,
  and, where the time-step ``dt`` is known, any shorter than one step (``dt/τ > 1``: the
  forward-Euler step would overshoot ``v_leak``; a trained plif ``k = dt/τ`` is at most 1);
- a resistance ``r`` that is not positive, and values (weights, biases, scales, thresholds,
  ``v_reset``, ``v_leak``, ``r``; ``dt r`` for ``IF``) that are NaN, infinite or larger in magnitude
  than :data:`MAX_MAGNITUDE`; a ``v_reset`` above ``v_threshold`` (a neuron that fired would stay
  above its threshold; plif's own neurons refuse it too);
- parameters of the wrong rank or size for their node (a convolution weight that is not
  ``[C_out, C_in/groups, kh, kw]``, a bias that is not ``[C_out]``, a neuron's parameters that
  differ from its input's shape), strides, kernels, dilations and groups below 1, negative padding,
  and shapes that do not chain from each node to the next (computed here, per sample);
- metadata plif writes that means nothing: ``T`` outside ``1 .. 2^31-1``, ``dt`` not a positive
  finite float32 number, an ``input_shape`` with a size below 1, more than 2^31-1 values per
  sample or another shape than the ``Input`` node's, an unknown ``target``, ``bn`` or ``leak``.

:data:`MAX_MAGNITUDE` is 2^40 (about 1.1e12).  A trained network's parameters are many orders
below it (BatchNorm's scale ``γ/√(σ²+ε)`` is at most about 316 γ), and float32 arithmetic survives
it: the largest value in a layer is about fan-in x |weight| x |input|, and two such layers in a row
(a convolution and its BatchNorm node, the two voting nodes) give at most 2^40 · 2^40 · 2^24
(fan-in) · 2^20 (input) = 2^124, below float32's largest, 2^128.  1e38 is not.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..models.notation import MAX_INT
from .nir_leak import rate_from_tau
from .nir_targets import TARGETS

__all__ = ["NIRFileError", "check_graph", "node_shapes", "MAX_MAGNITUDE"]

MAX_MAGNITUDE = 2.0 ** 40

_TIME_CONSTANTS = ("tau", "tau_mem", "tau_syn")
_VALUES = ("weight", "bias", "scale", "w_in", "threshold", "v_threshold", "v_reset", "v_leak")
_NEURONS = ("LIF", "IF", "LI", "I", "CubaLIF", "CubaLI")
_METADATA_WORDS = {"target": tuple(TARGETS), "bn": ("exact", "folded"),
                   "leak": ("exact", "inexact")}


class NIRFileError(ValueError):
    """A NIR graph whose values or shapes mean nothing for their node (the message names the node and field)."""


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _real_array(where: str, field: str, value) -> np.ndarray:
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything numpy cannot take is not a number
        a = np.asarray(None)
    if a.dtype.kind not in "biuf":
        raise NIRFileError(f"{where}: field {field!r} is not an array of real numbers ({a.dtype})")
    return a


def _plain(v):
    """A numpy scalar as the Python number it holds (for messages)."""
    return v.item() if isinstance(v, np.generic) else v


def _first(mask: np.ndarray) -> str:
    """Where the first ``True`` of ``mask`` is: `` at [i, j]`` (nothing for a scalar)."""
    if mask.ndim == 0:
        return ""
    return f" at [{', '.join(str(int(i)) for i in np.argwhere(mask)[0])}]"


def _value(a: np.ndarray, mask: np.ndarray) -> float:
    """The first entry of ``a`` where ``mask`` holds."""
    return float(a if a.ndim == 0 else a[tuple(np.argwhere(mask)[0])])


def _finite(where: str, field: str, a: np.ndarray, bounded: bool = True, what: str = "") -> np.ndarray:
    """``a`` in float64, refused if NaN, infinite or (``bounded``) beyond :data:`MAX_MAGNITUDE`."""
    a64 = a.astype(np.float64)
    for bad, says in ((np.isnan(a64), "NaN"), (np.isinf(a64), "infinite")):
        if bad.any():
            raise NIRFileError(f"{where}: field {field!r} is {says}{_first(bad)}{what}")
    big = np.abs(a64) > (MAX_MAGNITUDE if bounded else np.inf)
    if big.any():
        raise NIRFileError(f"{where}: field {field!r} is {_value(a64, big):g}{_first(big)}, beyond "
                           f"+-{MAX_MAGNITUDE:g} (2^40), which float32 networks do not survive{what}")
    return a64


def _ints(where: str, field: str, value, lo: int, n: int | None = 2) -> tuple:
    """``value`` as ``n`` integers ``>= lo`` (a scalar is repeated), else :class:`NIRFileError`."""
    a = _real_array(where, field, value)
    if a.ndim > 1 or (n is not None and a.ndim == 1 and a.size not in (1, n)) or a.size == 0:
        raise NIRFileError(f"{where}: field {field!r} must be {n or 'one'} integer(s), got shape {a.shape}")
    if a.dtype.kind == "f" and not (np.isfinite(a).all() and (a == np.round(a)).all()):
        raise NIRFileError(f"{where}: field {field!r} must be integer, got {a.tolist()}")
    vals = [int(v) for v in np.atleast_1d(a)]
    if any(not lo <= v <= MAX_INT for v in vals):
        raise NIRFileError(f"{where}: field {field!r} must be between {lo} and {MAX_INT}, got {vals}")
    return tuple(vals * n if n and len(vals) == 1 else vals)


def _shape(where: str, field: str, value) -> tuple:
    """A per-sample shape: integers >= 1 whose product fits torch's sizes."""
    shape = _ints(where, field, value, 1, None)
    if int(np.prod(shape, dtype=object)) > MAX_INT:
        raise NIRFileError(f"{where}: field {field!r} {list(shape)} has {int(np.prod(shape, dtype=object))} values "
                           f"per sample, more than {MAX_INT} (2^31-1)")
    return shape


def _check_metadata(graph) -> dict:
    meta = dict(graph.metadata or {}) if isinstance(graph.metadata, dict) else {}
    out = {}
    if "T" in meta:
        T = meta["T"]
        if isinstance(T, (bool, np.bool_)) or not isinstance(T, numbers.Integral) or not 1 <= int(T) <= MAX_INT:
            raise NIRFileError(f"metadata: field 'T' (time-steps) must be an integer from 1 to {MAX_INT}, "
                               f"got {_plain(T)!r}")
    if "dt" in meta:
        dt = meta["dt"]
        ok = not isinstance(dt, (bool, np.bool_)) and isinstance(dt, numbers.Real) and np.isfinite(dt) and dt > 0
        if not ok or not np.float32(dt) >= np.finfo(np.float32).tiny or not np.isfinite(np.float32(dt)):
            raise NIRFileError(f"metadata: field 'dt' (the time-step) must be a positive finite float32 number, "
                               f"got {_plain(dt)!r}")
        out["dt"] = float(dt)
    if "input_shape" in meta:
        out["input_shape"] = _shape("metadata", "input_shape", meta["input_shape"])
    for key, words in _METADATA_WORDS.items():
        if key in meta and _text(meta[key]) not in words:
            raise NIRFileError(f"metadata: field {key!r} must be one of {', '.join(words)}, got {_text(meta[key])!r}")
    return out


def _check_values(name: str, node, dt: float | None) -> None:
    """Each field's values against its meaning (no shapes)."""
    where, kind = f"node {name!r}", type(node).__name__
    fields = {f: getattr(node, f) for f in (*_TIME_CONSTANTS, *_VALUES, "r") if getattr(node, f, None) is not None}
    arrays = {f: _real_array(where, f, v) for f, v in fields.items()}
    for f in _TIME_CONSTANTS:
        if f in arrays:
            tau = arrays[f].astype(np.float32)
            _finite(where, f, tau, bounded=False, what=" (in float32)")
            bad = ~(tau > 0)
            if bad.any():
                raise NIRFileError(f"{where}: field {f!r} is {_value(tau, bad):g}{_first(bad)}; a time constant "
                                   f"must be positive (in float32)")
            if dt is not None:
                rate = rate_from_tau(tau, dt).numpy()
                over = ~(rate <= 1 + 2.0 ** -20)
                if over.any():
                    raise NIRFileError(f"{where}: field {f!r} is {_value(tau, over):g}{_first(over)}, shorter than "
                                       f"the time-step dt = {dt:g} (dt/tau > 1: the forward-Euler step overshoots; "
                                       f"give the dt the file was made for)")
    for f in _VALUES:
        if f in arrays:
            _finite(where, f, arrays[f])
    if "r" in arrays:
        gain = arrays["r"].astype(np.float64) * (dt if kind == "IF" and dt is not None else 1.0)
        _finite(where, "r", gain, what=" (IF: r dt, the input gain per step)" if kind == "IF" and dt else "")
        bad = ~(gain > 0)
        if bad.any():
            raise NIRFileError(f"{where}: field 'r' is not positive{_first(bad)}; a resistance is positive")
    if "v_reset" in arrays and "v_threshold" in arrays:
        above = arrays["v_reset"].astype(np.float64) > arrays["v_threshold"].astype(np.float64)
        if above.any():
            raise NIRFileError(f"{where}: field 'v_reset' is above 'v_threshold'{_first(above)}: a neuron that fired "
                               f"would stay above its threshold")


def _need(where: str, shape, rank: int, what: str) -> tuple:
    if shape is not None and len(shape) != rank:
        raise NIRFileError(f"{where}: its input has shape {list(shape)}, not the {what} it needs")
    return shape


def _param_shape(where: str, field: str, value, want: tuple | None, what: str) -> tuple:
    shape = tuple(np.shape(value))
    if want is not None and shape != tuple(want):
        raise NIRFileError(f"{where}: field {field!r} has shape {list(shape)}, not {list(want)} ({what})")
    if 0 in shape:
        raise NIRFileError(f"{where}: field {field!r} has shape {list(shape)}: no entries")
    return shape


def _window(where: str, field: str, h_w: tuple, kernel, stride, padding, dilation) -> tuple:
    """The output height and width of a window sliding over ``h_w`` (as torch computes them)."""
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    if any(n + 2 * p < span for n, p, span in zip(h_w, padding, spans)):
        raise NIRFileError(f"{where}: field {field!r} gives a {spans[0]}x{spans[1]} window (dilation included), "
                           f"larger than its input {list(h_w)} with padding {list(padding)}")
    return tuple((n + 2 * p - span) // s + 1 for n, p, span, s in zip(h_w, padding, spans, stride))


def _conv_out(where: str, node, shape: tuple | None) -> tuple:
    w = np.asarray(node.weight)
    if w.ndim != 4:
        raise NIRFileError(f"{where}: field 'weight' has {w.ndim} dimensions {list(w.shape)}, not 4 "
                           f"[C_out, C_in/groups, kh, kw] (a 2-D convolution)")
    _param_shape(where, "weight", w, None, "")
    c_out, c_in, kh, kw = w.shape
    groups = _ints(where, "groups", node.groups, 1, 1)[0]
    if c_out % groups:
        raise NIRFileError(f"{where}: field 'groups' ({groups}) does not divide the {c_out} output channels")
    _param_shape(where, "bias", node.bias, (c_out,), "one per output channel")
    stride, dilation = _ints(where, "stride", node.stride, 1), _ints(where, "dilation", node.dilation, 1)
    padding = node.padding
    if isinstance(_text(padding), str):
        if _text(padding) not in ("same", "valid"):
            raise NIRFileError(f"{where}: field 'padding' must be integers, 'same' or 'valid', got {padding!r}")
        padding = (0, 0) if _text(padding) == "valid" else None
    else:
        padding = _ints(where, "padding", padding, 0)
    declared = getattr(node, "input_shape", None)
    if shape is None:
        return None
    _need(where, shape, 3, "[C, H, W] of a 2-D convolution")
    if shape[0] != c_in * groups:
        raise NIRFileError(f"{where}: field 'weight' {list(w.shape)} takes {c_in * groups} input channels "
                           f"({c_in} x groups {groups}), its input has {shape[0]} ({list(shape)})")
    if declared is not None and tuple(_ints(where, "input_shape", declared, 1)) != tuple(shape[1:]):
        raise NIRFileError(f"{where}: field 'input_shape' {np.ravel(declared).tolist()} is not its input's "
                           f"{list(shape[1:])}")
    if padding is None:  # 'same'
        return (c_out, *shape[1:])
    return (c_out, *_window(where, "weight", shape[1:], (kh, kw), stride, padding, dilation))


def _pool_out(where: str, node, shape: tuple | None) -> tuple:
    kernel = _ints(where, "kernel_size", node.kernel_size, 1)
    stride, padding = _ints(where, "stride", node.stride, 1), _ints(where, "padding", node.padding, 0)
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise NIRFileError(f"{where}: field 'padding' {list(padding)} is more than half the kernel {list(kernel)}")
    if shape is None:
        return None
    _need(where, shape, 3, "[C, H, W] of a 2-D pooling")
    return (shape[0], *_window(where, "kernel_size", shape[1:], kernel, stride, padding, (1, 1)))


def _flatten_out(where: str, node, shape: tuple | None) -> tuple:
    start = _ints(where, "start_dim", node.start_dim, -MAX_INT, 1)[0]
    end = _ints(where, "end_dim", node.end_dim, -MAX_INT, 1)[0]
    declared = (node.input_type or {}).get("input")
    if declared is not None and shape is not None and tuple(np.ravel(declared).tolist()) != tuple(shape):
        raise NIRFileError(f"{where}: field 'input_type' {np.ravel(declared).tolist()} is not its input's "
                           f"{list(shape)}")
    if shape is None:
        return None
    n = len(shape)
    s, e = (start + n if start < 0 else start), (end + n if end < 0 else end)
    if not 0 <= s <= e < n:
        raise NIRFileError(f"{where}: fields 'start_dim' {start}, 'end_dim' {end} do not name dimensions of its "
                           f"input {list(shape)} (counted per sample, negative from the end)")
    return (*shape[:s], int(np.prod(shape[s:e + 1])), *shape[e + 1:])


def _out_shape(name: str, node, shape: tuple | None) -> tuple | None:
    """The per-sample shape ``node`` gives for input ``shape`` (None where unknown), checking its
    parameters' ranks and sizes on the way."""
    where, kind = f"node {name!r}", type(node).__name__
    if kind == "Input":
        declared = (node.input_type or {}).get("input")
        return None if declared is None else _shape(where, "shape", declared)
    if kind == "Output":
        declared = (node.output_type or {}).get("output")
        if declared is not None and shape is not None and tuple(np.ravel(declared).tolist()) != tuple(shape):
            raise NIRFileError(f"{where}: field 'shape' {np.ravel(declared).tolist()} is not its input's {list(shape)}")
        return shape
    if kind == "Conv2d":
        return _conv_out(where, node, shape)
    if kind in ("SumPool2d", "AvgPool2d"):
        return _pool_out(where, node, shape)
    if kind == "Flatten":
        return _flatten_out(where, node, shape)
    if kind in ("Affine", "Linear"):
        w = np.asarray(node.weight)
        if w.ndim != 2:
            raise NIRFileError(f"{where}: field 'weight' has {w.ndim} dimensions {list(w.shape)}, not 2 [out, in]")
        _param_shape(where, "weight", w, None, "")
        if kind == "Affine":
            _param_shape(where, "bias", node.bias, (w.shape[0],), "one per output")
        if shape is not None and tuple(shape) != (w.shape[1],):
            raise NIRFileError(f"{where}: field 'weight' {list(w.shape)} takes {w.shape[1]} inputs, its input has "
                               f"shape {list(shape)}")
        return (w.shape[0],)
    if kind in _NEURONS or kind in ("Scale", "Threshold"):
        fields = [f for f in ("v_threshold", *_TIME_CONSTANTS, "r", "v_leak", "v_reset", "w_in", "scale", "threshold")
                  if getattr(node, f, None) is not None]
        own = shape
        for f in fields:
            own = _param_shape(where, f, getattr(node, f), own, "one per neuron of its input" if shape is not None
                               else f"the shape of its field {fields[0]!r}")
        return own
    return None  # Delay, Conv1d, subgraphs: plif's importer refuses them; their shapes are not followed


def _order(graph) -> tuple[list[str], dict[str, list]]:
    """Nodes in an order where each comes after the nodes feeding it (as far as edges allow), and
    the nodes feeding each."""
    for a, b in graph.edges:
        for end in (a, b):
            if end not in graph.nodes:
                raise NIRFileError(f"edge ({_text(a)!r}, {_text(b)!r}): no node named {_text(end)!r}")
    preds = {n: [a for a, b in graph.edges if b == n] for n in graph.nodes}
    order, done = [], set()
    pending = list(graph.nodes)
    while pending:
        ready = [n for n in pending if all(p in done for p in preds[n])] or pending[:1]  # a cycle: go on
        for n in ready:
            order.append(n)
            done.add(n)
        pending = [n for n in pending if n not in done]
    return order, preds


def node_shapes(graph) -> dict[str, tuple | None]:
    """The per-sample output shape of each node (None where unknown), shapes checked on the way: a
    node's inputs must agree (it sums them)."""
    shapes: dict[str, tuple | None] = {}
    order, preds = _order(graph)
    for name in order:
        node = graph.nodes[name]
        incoming = [shapes[p] for p in preds[name] if shapes.get(p) is not None]
        if len({tuple(s) for s in incoming}) > 1:
            raise NIRFileError(f"node {name!r}: its inputs have different shapes "
                               f"{', '.join(str(list(s)) for s in incoming)}")
        shapes[name] = _out_shape(name, node, incoming[0] if incoming else None)
    return shapes


def check_graph(graph, dt: float | None = None) -> None:
    """Refuse (:class:`NIRFileError`, one line naming the node or metadata entry and the field) a
    graph whose metadata, parameter values or shapes mean nothing (module docstring).

    ``dt``: the time-step the graph will be stepped with where its ``metadata["dt"]`` records none
    (``from_nir`` passes its own); time constants are then checked against it.  With neither, only
    their sign and finiteness are.
    """
    meta = _check_metadata(graph)
    step = meta.get("dt", dt)
    for name, node in graph.nodes.items():
        _check_values(name, node, step)
    shapes = node_shapes(graph)
    inputs = [shapes[n] for n, node in graph.nodes.items() if type(node).__name__ == "Input"]
    if "input_shape" in meta and inputs and meta["input_shape"] != inputs[0]:
        raise NIRFileError(f"metadata: field 'input_shape' {list(meta['input_shape'])} is not the Input node's "
                           f"shape {list(inputs[0])}")


def check_raw_node(name: str, fields: dict) -> str | None:
    """The :class:`NIRFileError` message for a node NIR itself could not build from the file (its
    HDF5 datasets ``fields``: ``nir.read`` stops at an assertion or a division by zero that names
    neither node nor field), or None where these checks find nothing to blame."""
    kind = _text(fields.get("type"))
    if not isinstance(kind, str):
        return None
    attrs = {k: v for k, v in fields.items() if k != "type"}
    if kind in ("Input", "Output"):
        attrs[f"{kind.lower()}_type"] = {kind.lower(): attrs.get("shape")}
    if kind == "Flatten":
        attrs["input_type"] = {"input": attrs.get("input_type")}
    node = type(kind, (), attrs)()  # an object of the node's type name holding the file's fields
    try:
        _check_values(name, node, None)
        _out_shape(name, node, None)
    except NIRFileError as e:
        return str(e)
    except (AttributeError, TypeError, ValueError):  # a field missing or of a form these checks do not know
        return None
    return None
