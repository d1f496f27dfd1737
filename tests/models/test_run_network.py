"""plif.models.run_network: the one place a run's config picks its builder and its batches' layout."""
import torch

from plif.models.run_network import build_run_network, network_label, run_prepare, takes_frames

NOTATION = {"network": "FC10-PLIF", "input_shape": [1, 4, 4], "T": 3, "num_classes": 10, "model": None}
MODEL = {**NOTATION, "network": None, "model": "sew-resnet18"}


def test_batches_reach_the_network_unchanged_but_for_a_model_on_static_images():
    def prepare(x, gen=None):
        return x * 2

    # nothing added per step where the network takes the pipeline's batches as they are
    assert run_prepare(prepare, NOTATION, is_event=False) is prepare
    assert run_prepare(prepare, MODEL, is_event=True) is prepare
    x = torch.rand(5, 1, 4, 4)
    y = run_prepare(prepare, MODEL, is_event=False)(x)
    assert y.shape == (3, 5, 1, 4, 4) and y.stride(0) == 0 and torch.equal(y[2], x * 2)  # a view, not T copies
    assert [takes_frames(c, e) for c in (NOTATION, MODEL) for e in (False, True)] == [False, True, True, True]


def test_a_seeded_notation_network_is_the_same_network_and_labels_name_it():
    a, b = (build_run_network(NOTATION, seed=7) for _ in range(2))
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    assert network_label(NOTATION) == "FC10-PLIF" and network_label(MODEL) == "--model sew-resnet18"
    assert network_label(NOTATION, "the network {!r}") == "the network 'FC10-PLIF'"
