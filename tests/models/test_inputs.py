"""What a network is given is checked before any layer runs, and a refusal names what was expected:
the type, dtype, device and shape of ``x``, a batch-first layout, and the state ``step`` carries."""
import numpy as np
import pytest
import torch

from plif.models import NetworkState, build_network

T = 4
SPEC = "c4k3s1-BN-PLIF-MPk2s2-DP-FC10-PLIF"


def _net(spec=SPEC, shape=(2, 8, 8), t=T):
    torch.manual_seed(0)
    return build_network(spec, shape, t, v_threshold=0.2).eval()


def test_numpy_input_is_refused_with_the_conversion():
    net = _net()
    x = np.zeros((T, 3, 2, 8, 8), dtype=np.float32)
    with pytest.raises(TypeError, match=r"net\(x\): expected a torch.Tensor, got numpy.ndarray; convert it with "
                                        r"torch.from_numpy\(x\)"):
        net(x)
    with pytest.raises(TypeError, match=r"net.step\(x_t\): expected a torch.Tensor, got numpy.ndarray"):
        net.step(x[0])
    with pytest.raises(TypeError, match="got builtins.list"):
        net([[0.0]])


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.bool])
def test_integer_frames_are_refused_naming_the_networks_dtype(dtype):
    """Not converted: counts and 8-bit pixels would need different conversions."""
    net = _net()
    x = torch.zeros(T, 3, 2, 8, 8, dtype=dtype)
    with pytest.raises(TypeError, match=rf"net\(x\): x is {dtype}, but the network computes in torch.float32: "
                                        r"convert it, x.to\(torch.float32\) for event counts or x.to\(torch.float32\) / 255"):
        net(x)
    with pytest.raises(TypeError, match=rf"net.step\(x_t\): x is {dtype}"):
        net.step(x[0])


def test_another_float_dtype_is_refused_except_under_autocast():
    net = _net()
    x = torch.rand(T, 3, 2, 8, 8)
    with pytest.raises(TypeError, match=r"x is torch.float64, but the network's parameters are torch.float32; "
                                        r"convert one: x.to\(torch.float32\) or net.to\(torch.float64\)"):
        net(x.double())
    with pytest.raises(TypeError, match="x is torch.float64"):
        net.step(x[0].double())
    assert torch.equal(net.double()(x.double()), net(x.double()))  # net.to(float64) as the line says
    net.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts the input itself
        assert net(x.bfloat16()).shape == (T, 3, 10)


def test_an_input_on_another_device_is_refused():
    net = _net()
    with pytest.raises(ValueError, match=r"x is on meta, but the network is on cpu; move one: x.to\('cpu'\)"):
        net(torch.empty(T, 3, 2, 8, 8, device="meta"))


@pytest.mark.parametrize("shape, message", [
    ((3, 1, 8, 8), r"expected a static input \[B, 2, 8, 8\], got \[3, 1, 8, 8\]"),
    ((T, 3, 2, 8, 9), r"expected frames \[T, B, 2, 8, 8\], got \[4, 3, 2, 8, 9\]"),
    ((T, 3, 2, 8), r"expected a static input \[B, 2, 8, 8\], got \[4, 3, 2, 8\]"),
    ((2, 8, 8), r"expected \[B, ...\] \(static\) or \[T, B, ...\] frames of per-sample shape \[2, 8, 8\], got \[2, 8, 8\] \(3 dims\)"),
])
def test_wrong_channels_or_sizes_name_the_expected_shape(shape, message):
    with pytest.raises(ValueError, match=r"net\(x\): " + message):
        _net()(torch.zeros(shape))


def test_wrong_step_frame_names_the_expected_shape():
    with pytest.raises(ValueError, match=r"net.step\(x_t\): takes one frame x_t \[B, 2, 8, 8\], got \(3, 3, 8, 8\)"):
        _net().step(torch.zeros(3, 3, 8, 8))


def test_a_batch_first_tensor_is_refused_unless_asked_for():
    """3 samples of T=4 steps, batch first, are not run as 4 samples of 3 steps."""
    net = _net()
    x = torch.rand(3, T, 2, 8, 8)  # [B, T, ...]
    with pytest.raises(ValueError, match=r"net\(x\): x \[3, 4, 2, 8, 8\] looks batch-first \[B, T, ...\] \(this "
                                         r"network's T is 4\): pass net\(x, time_first=False\) for 3 samples of 4 steps, "
                                         r"or net\(x, time_first=True\) for 4 samples of 3 steps"):
        net(x)
    with torch.no_grad():
        out = net(x, time_first=False)
        assert torch.equal(out, net(x.transpose(0, 1).contiguous()))
        assert out.shape == (T, 3, 10)
        assert net(x, time_first=True).shape == (3, T, 10)  # the caller said so: 4 samples of 3 steps
        # a static image has no time dimension to swap; frames of T steps are never in doubt
        static = torch.rand(T, 2, 8, 8)
        assert torch.equal(net(static, time_first=False), net(static))
        assert net(torch.rand(T, T, 2, 8, 8)).shape == (T, T, 10)
        assert net(torch.rand(2 * T, 3, 2, 8, 8)).shape == (2 * T, 3, 10)  # a longer stream, dim 1 not T
        longer = torch.rand(5 * T, T, 2, 8, 8)  # a longer stream of a batch of T: says which it is
        assert net(longer, time_first=True).shape == (5 * T, T, 10)
    with pytest.raises(ValueError, match=r"x \[20, 4, 2, 8, 8\] looks batch-first .* or net\(x, time_first=True\) "
                                         r"for 4 samples of 20 steps"):
        net(longer)
    with pytest.raises(ValueError, match=r"expected frames \[B, T, 2, 8, 8\]"):
        net(torch.rand(3, T, 8, 8, 2), time_first=False)
    with pytest.raises(TypeError, match="time_first=...\\): True"):
        net(x, time_first="no")
    for not_a_bool in (0, 1, 0.0):  # 0 == False: 0 ran frames time-first, unsaid (issue 53)
        with pytest.raises(TypeError, match=rf"time_first=...\): True .* or None, got {not_a_bool!r}"):
            net(x, time_first=not_a_bool)


def _stepped_state(net, batch=3):
    return net.step(torch.rand(batch, *net.input_shape))[1]


def test_a_state_from_another_network_is_refused():
    net = _net()
    fewer = _stepped_state(_net("c4k3s1-PLIF-FC10-PLIF-FC10-PLIF"))  # 3 neuron layers, no dropout
    with pytest.raises(ValueError, match=r"net.step\(x_t, state\): the state holds 3 potentials, this network has 2: "
                                         r"it is another network's; start with net.initial_state\(\)"):
        net.step(torch.rand(3, 2, 8, 8), fewer)
    wider = _stepped_state(_net("c6k3s1-BN-PLIF-MPk2s2-DP-FC10-PLIF"))
    with pytest.raises(ValueError, match=r"the state's potential 0 is \[3, 6, 8, 8\], this network's is \[B, 4, 8, 8\]"):
        net.step(torch.rand(3, 2, 8, 8), wider)
    with pytest.raises(ValueError, match="the state is for a batch of 3, but x_t has 2 samples"):
        net.step(torch.rand(2, 2, 8, 8), _stepped_state(net))


def test_a_training_states_dropout_masks_are_checked_too():
    net = _net("c4k3s1-PLIF-DP-FC10-PLIF").train()
    state = _stepped_state(net)
    assert state.masks[0] is not None
    with pytest.raises(ValueError, match="the state is for a batch of 3, but x_t has 1 samples"):
        net.step(torch.rand(1, 2, 8, 8), NetworkState(1, (None, None), state.masks))
    with pytest.raises(ValueError, match="the state holds 0 dropout masks, this network has 1"):
        net.step(torch.rand(3, 2, 8, 8), NetworkState(1, state.potentials, ()))


@pytest.mark.parametrize("state, kind", [({"potentials": ()}, "dict"), (torch.zeros(3, 4, 8, 8), "Tensor"),
                                         ((None, None), "tuple")])
def test_a_state_that_is_not_a_network_state_is_refused(state, kind):
    with pytest.raises(TypeError, match=rf"state must be the NetworkState that net.initial_state\(\) or the previous "
                                        rf"net.step\(\) returned, got {kind}"):
        _net().step(torch.rand(3, 2, 8, 8), state)


def test_the_state_moves_and_casts_like_a_tensor():
    net = _net()
    x = torch.rand(3, 2, 8, 8)
    state = _stepped_state(net)
    with pytest.raises(ValueError, match=r"the state is on meta, x_t on cpu; move it with state.to\('cpu'\)"):
        net.step(x, state.to("meta"))
    wide = state.to(torch.float64)
    assert all(v.dtype == torch.float64 for v in wide.potentials) and wide.t == state.t
    with pytest.raises(TypeError, match=r"the state's potential 0 is torch.float64, the network's parameters "
                                        r"torch.float32; convert it with state.to\(torch.float32\)"):
        net.step(x, wide)
    with torch.no_grad():
        out, _ = net.step(x, wide.to(torch.float32))
        assert torch.equal(out, net.step(x, state)[0])
        net.double()
        assert torch.equal(net.step(x.double(), wide)[0], net.step(x.double(), state.to(x.double()))[0])


def test_detach_cuts_the_graph():
    net = _net()
    _, state = net.step(torch.rand(3, 2, 8, 8))
    assert any(v.requires_grad for v in state.potentials)
    assert not any(v.requires_grad for v in state.detach().potentials)


def test_the_state_check_follows_a_replaced_layer():
    """The shapes a state must have are found once, and again after a layer is replaced."""
    from torch import nn

    from plif.layers import TimeInvariantDropout

    net = _net("c4k3s1-PLIF-DP-FC10-PLIF").train()
    x = torch.rand(3, 2, 8, 8)
    state = net.step(x)[1]
    assert net.step(x, state)[1].t == 2
    (dp,) = [i for i, m in enumerate(net.layers) if isinstance(m, TimeInvariantDropout)]
    net.layers[dp] = nn.Identity()
    with pytest.raises(ValueError, match="the state holds 1 dropout masks, this network has 0"):
        net.step(x, state)
    assert net.step(x, NetworkState(state.t, state.potentials, ()))[1].masks == ()


def test_a_static_input_is_repeated_over_time_as_a_view_in_one_place():
    """Issue 48: the network, `plif stats`, `liven_`, the NIR check and importer all repeat a static
    input over T through ``repeat_over_time``: the same sample at every step, nothing copied."""
    from pathlib import Path

    import plif
    from plif.models.inputs import is_static, repeat_over_time

    x = torch.randn(3, 2, 8, 8)
    frames = repeat_over_time(x, T)
    assert frames.shape == (T, 3, 2, 8, 8) and frames.stride(0) == 0 and frames.data_ptr() == x.data_ptr()
    assert all(torch.equal(f, x) for f in frames)
    assert is_static(x, (2, 8, 8)) and not is_static(frames, (2, 8, 8))
    net = _net()
    assert torch.equal(net(x), net(frames))  # the hoisted path and the repeated frames agree
    src = Path(plif.__file__).parent
    above_models = [p for p in sorted(src.rglob("*.py")) if p.relative_to(src).parts[0] not in ("layers", "kernels", "neurons", "encoding")]
    found = [str(p.relative_to(src)) for p in above_models if p.name != "inputs.py" and _repeats_by_hand(p.read_text())]
    assert found == [], f"repeat a static input with plif.models.inputs.repeat_over_time: {found}"


def _repeats_by_hand(source: str) -> bool:
    """Whether code (not a docstring) calls ``X.unsqueeze(0).expand(...)`` or ``X.expand(net.T | self.T, ...)``."""
    import ast

    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "expand"):
            continue
        inner = node.func.value
        if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "unsqueeze"
                and len(inner.args) == 1 and isinstance(inner.args[0], ast.Constant) and inner.args[0].value == 0):
            return True
        first = node.args[0] if node.args else None
        if (isinstance(first, ast.Attribute) and first.attr == "T" and isinstance(first.value, ast.Name)
                and first.value.id in ("net", "self")):
            return True
    return False


def test_the_repeat_scan_sees_code_and_not_docstrings():
    assert _repeats_by_hand("y = x.unsqueeze(0).expand(T, *x.shape)") and _repeats_by_hand("h.expand(net.T, 2)")
    assert not _repeats_by_hand('"""fed as ``x.unsqueeze(0).expand(T, *x.shape)``"""\ny = repeat_over_time(x, T)')
