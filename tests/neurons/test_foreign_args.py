"""SpikingJelly's argument names on plif's neurons are refused in one line naming plif's spelling
(issue 56.5), never mapped: ``init_tau`` -> ``tau0``, ``surrogate_function`` -> ``surrogate``."""
import pytest

from plif import IF, LIF, PLIF
from plif.neurons import make_neuron


@pytest.mark.parametrize("cls,kwargs,says", [
    (PLIF, dict(init_tau=2.0), "PLIF takes tau0="),
    (LIF, dict(init_tau=2.0), "LIF takes tau="),
    (IF, dict(init_tau=2.0), "IF has no time constant"),
    (PLIF, dict(tau=3.0), "PLIF takes tau0="),
    (LIF, dict(tau0=3.0), "LIF takes tau="),
    (PLIF, dict(surrogate_function="atan"), "surrogate= (a name"),
    (LIF, dict(step_mode="m"), "multi-step"),
    (PLIF, dict(decay_input=False), "decay_input=True; False has no counterpart"),
    (IF, dict(store_v_seq=True), "PotentialMonitor"),
    (PLIF, dict(bogus=1), "it takes tau0, num_channels, v_threshold"),
])
def test_spikingjelly_names_are_refused_with_plifs(cls, kwargs, says):
    with pytest.raises(TypeError) as e:
        cls(**kwargs)
    msg = str(e.value)
    assert says in msg and "\n" not in msg
    if says != "it takes tau0, num_channels, v_threshold":
        assert f"{cls.__name__}({next(iter(kwargs))}=...)" in msg


def test_make_neuron_passes_them_on_and_shared_names_are_taken():
    with pytest.raises(TypeError, match="tau0="):
        make_neuron("PLIF", init_tau=2.0)
    n = PLIF(tau0=3.0, v_threshold=0.5, v_reset=None, detach_reset=False)  # SpikingJelly's names where they agree
    assert n.cfg.v_threshold == 0.5 and n.cfg.v_reset is None and not n.cfg.detach_reset
