"""pick_device and the free-memory probe live in plif.device alone; train, data and bench use them."""
import pytest
import torch

from plif import device


def test_one_place_for_the_device_and_its_free_memory():
    from plif.bench import neuron
    from plif.data import pipeline
    from plif.train import checks

    assert checks.pick_device is device.pick_device
    assert pipeline.free_memory is device.free_memory and neuron.free_memory is device.free_memory
    assert device.pick_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert 0 < device.free_memory("cpu") < 1 << 50
    with pytest.raises(ValueError, match="--device 'gpu0': not a device"):
        device.pick_device("gpu0")


def test_the_device_module_is_the_ground_floor():
    """plif.device imports nothing of plif.data: the data package reads the host's free memory from it."""
    import ast
    from pathlib import Path

    from plif.data import memory

    tree = ast.parse(Path(device.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.startswith("data") or m.startswith("plif.data")]
    assert memory.host_memory_available is device.host_memory_available


def test_set_tf32_gives_back_both_flags_and_none_is_torchs_defaults(tf32_flags):
    """What set_tf32 returns restores torch's mixed default (fp32 matmuls, TF32 convolutions): plif
    bench train left cuDNN's TF32 off when it was given one bool back."""
    device.set_tf32(None)
    assert tf32_flags() == device.TORCH_TF32 == (False, True)
    before = device.set_tf32(True)
    assert tf32_flags() == (True, True)
    device.set_tf32(before)
    assert tf32_flags() == (False, True)
    assert device.set_tf32(False) == (False, True) and tf32_flags() == (False, False)
