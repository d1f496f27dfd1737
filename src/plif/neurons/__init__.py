"""Spiking neurons: pure dynamics, the reference loop, the closed-form BPTT, and layers."""
from .bptt import multi_step_bptt
from .dispatch import (BACKENDS, available_backends, backend_status, load_backends, multi_step, register_backend,
                       select_backend)
from .functional import NeuronConfig, charge, fire, initial_state, neuron_step, reset
from .modules import IF, LIF, MAX_TAU, NEURONS, PLIF, SpikingNeuron, check_tau, make_neuron, tau_to_w
from .reference import multi_step_potentials, multi_step_reference

__all__ = [
    "NeuronConfig", "charge", "fire", "reset", "neuron_step", "initial_state",
    "multi_step_reference", "multi_step_potentials", "multi_step_bptt", "multi_step", "register_backend", "select_backend",
    "available_backends", "backend_status", "load_backends", "BACKENDS", "SpikingNeuron", "IF", "LIF", "PLIF", "NEURONS", "make_neuron",
    "tau_to_w", "check_tau", "MAX_TAU",
]
