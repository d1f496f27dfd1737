"""plif train --encoder: recorded in config.json, rebuilt by every reader of the run, refused for
event data; runs made before the option are direct (issue 45.9)."""
import dataclasses
import json

import pytest
import torch

from plif.encoding import LatencyEncoder
from plif.runs import load_run, read_metrics
from plif.train import TrainConfig, train
from plif.train.config import check_stored, resolve_config
from plif.train.resume import config_diff

from plif_testing import tiny_train_config


def test_a_latency_run_records_its_encoder_and_evaluates_as_it_trained(tiny_fashion, tmp_path):
    from plif.catalog import get_dataset
    from plif.data.pipeline import eval_batches, load_test_split
    from plif.train.loop import evaluate

    out = train(tiny_train_config(tiny_fashion, tmp_path / "r", epochs=1, encoder="latency"), log=lambda *a: None)
    config = json.loads((out / "config.json").read_text())
    fashion = get_dataset("fashion-mnist")
    assert config["encoder"] == "latency"
    assert config["network_kwargs"]["encoder"] == {"name": "latency", "mean": list(fashion.mean),
                                                   "std": list(fashion.std)}
    net, _ = load_run(out, "best_test")
    assert isinstance(net.encoder.encoder, LatencyEncoder) and net.encoder.T == config["T"]
    split, prepare = load_test_split(fashion, str(tiny_fashion), config["T"])
    _, acc, n = evaluate(net, eval_batches(split, prepare, 32), config["num_classes"])
    assert n == 60 and acc == read_metrics(out)[0]["test_acc"]  # latency is deterministic: the same accuracy
    # and the network saw spikes: its first conv is fed the encoded images, not the hoisted image
    seen = []
    h = net.layers[0].register_forward_hook(lambda m, a, o: seen.append(a[0]))
    with torch.no_grad():
        net(prepare(split.x[:4]))
    h.remove()
    assert seen[0].shape[0] == config["T"] and set(seen[0].unique().tolist()) <= {0.0, 1.0}


def test_an_event_dataset_refuses_an_encoder():
    with pytest.raises(ValueError, match=r"--encoder poisson: encodes static images, but nmnist is an event dataset"):
        resolve_config(TrainConfig(dataset="nmnist", encoder="poisson"))
    with pytest.raises(ValueError, match=r"--encoder 'rate': unknown; valid: direct, poisson, latency"):
        resolve_config(TrainConfig(encoder="rate"))


def test_a_run_stored_before_the_option_is_direct_and_resumes():
    cfg = resolve_config(TrainConfig(device="cpu"))
    new = cfg.to_dict()
    assert new["encoder"] == "direct" and "encoder" not in new["network_kwargs"]  # its network_kwargs as before
    old = {k: v for k, v in new.items() if k != "encoder"}
    check_stored(old, "config.json")
    assert config_diff(old, new) == []
    assert config_diff(old, {**new, "encoder": "poisson"}) == ["  encoder: run has 'direct', now 'poisson'"]
    poisson = dataclasses.replace(cfg, encoder="poisson").to_dict()
    check_stored(poisson, "config.json")


@pytest.mark.parametrize("name, function", [("latency-log", "log"), ("phase", None)])
def test_the_new_static_encoders_are_train_choices_stored_and_rebuilt(name, function):
    """Issue 56.3: the log latency and weighted phase codes are ``plif train --encoder`` choices; the
    sequence and population encoders are not (their input or output is no network's static feed)."""
    from plif import build_network
    from plif.cli.main import build_parser
    from plif.encoding import WeightedPhaseEncoder

    args = build_parser().parse_args(["train", "--encoder", name])
    assert args.encoder == name
    cfg = resolve_config(TrainConfig(device="cpu", encoder=name))
    d = cfg.to_dict()
    check_stored(d, "config.json")
    net = build_network(cfg.network, tuple(cfg.input_shape), cfg.T, **d["network_kwargs"])
    enc = net.encoder.encoder
    assert enc.name == name and enc.T == cfg.T
    assert (enc.function == function) if function else isinstance(enc, WeightedPhaseEncoder)
    for other in ("delta", "periodic", "population"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["train", "--encoder", other])
