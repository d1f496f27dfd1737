"""One description per dataset (plif.data.catalog): the zoo, presets, CLI, readers and listers
all read it, so they must agree with it."""
import pytest

from plif.data.catalog import DATASETS, EVENT, STATIC, get_dataset


def test_zoo_is_the_catalog():
    from plif.models import ZOO

    assert list(ZOO) == list(DATASETS)
    for name, d in DATASETS.items():
        e = ZOO[name]
        assert (e.spec, e.authors_spec, e.cpu_spec) == (d.network, d.authors_network, d.cpu_network)
        assert (e.T, tuple(e.input_shape), e.num_classes) == (d.T, d.input_shape, d.num_classes)


@pytest.mark.parametrize("name", list(DATASETS))
def test_cpu_preset_uses_each_datasets_cpu_network(name):
    import torch

    from plif.models import build_network
    from plif.train.config import TrainConfig, resolve_config

    d = DATASETS[name]
    cfg = resolve_config(TrainConfig(dataset=name, preset="cpu"))
    assert cfg.network == d.cpu_network and "c128" not in cfg.network and "c256" not in cfg.network
    paper = resolve_config(TrainConfig(dataset=name, preset="paper"))
    assert paper.network == d.network and paper.T == d.T
    net = build_network(cfg.network, d.input_shape, 2)
    with torch.no_grad():
        out = net.eval()(torch.zeros(2, 1, *d.input_shape))
    assert out.shape[-1] == d.num_classes


def test_readers_and_listers_agree():
    from plif.data.events.aedat2 import DVS128_SENSOR
    from plif.data.events.datasets import CIFAR10_CLASSES, EVENT_DATASETS
    from plif.data.events.gesture import GESTURE_CLASSES
    from plif.data.events.nmnist import NMNIST_SENSOR
    from plif.data.static import STATIC_DATASETS
    from plif.train.config import EVENT as CFG_EVENT, STATIC as CFG_STATIC

    assert NMNIST_SENSOR == DATASETS["nmnist"].sensor_size
    assert DVS128_SENSOR == DATASETS["cifar10-dvs"].sensor_size == DATASETS["dvs128-gesture"].sensor_size
    assert GESTURE_CLASSES == DATASETS["dvs128-gesture"].num_classes == 11
    assert CIFAR10_CLASSES == DATASETS["cifar10-dvs"].classes == DATASETS["cifar10"].classes
    assert set(EVENT_DATASETS) == set(EVENT) == set(CFG_EVENT) and all(EVENT_DATASETS[n] is DATASETS[n] for n in EVENT)
    assert set(STATIC_DATASETS) == set(STATIC) == set(CFG_STATIC)
    for n in STATIC:
        assert STATIC_DATASETS[n].num_classes == DATASETS[n].num_classes
        assert STATIC_DATASETS[n].shape == DATASETS[n].input_shape
    assert DATASETS["cifar10-dvs"].T == 20 and DATASETS["nmnist"].T == 10  # SPEC §2


def test_cli_reads_the_catalog(capsys):
    from plif.cli.main import build_parser

    with pytest.raises(SystemExit):
        build_parser("data").parse_args(["data", "prepare", "--help"])
    text = capsys.readouterr().out
    assert all(n in text for n in DATASETS)


def test_missing_files_message_is_the_catalog_layout(tmp_path):
    from plif.data.events.datasets import list_samples

    for n in EVENT:
        with pytest.raises(FileNotFoundError) as e:
            list_samples(n, tmp_path, train=True)
        assert DATASETS[n].layout in str(e.value)
    with pytest.raises(ValueError, match="unknown dataset 'x'; valid: mnist"):
        get_dataset("x")
