"""One record per dataset (plif.data.catalog): the zoo, presets, CLI, loaders and listers read it."""
import pytest

from dataclasses import replace

from plif.data.catalog import DATASETS, get_dataset


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
    assert cfg.dataset_spec is d  # what the data pipeline is handed
    net = build_network(cfg.network, d.input_shape, 2)
    with torch.no_grad():
        out = net.eval()(torch.zeros(2, 1, *d.input_shape))
    assert out.shape[-1] == d.num_classes


@pytest.mark.parametrize("name", list(DATASETS))
def test_each_record_names_plugins_that_exist(name):
    """A record is the whole description: its loader, augmentation and normalisation resolve."""
    from plif.data.events.datasets import LISTERS
    from plif.data.static import _LOADERS
    from plif.data.transforms import AUGMENTATIONS, augment_for

    d = DATASETS[name]
    assert d.num_classes == len(set(d.classes))
    if not d.is_event:
        assert d.loader in _LOADERS and augment_for(d) is AUGMENTATIONS[d.augment]
        assert len(d.mean) == len(d.std) == d.input_shape[0] and set(d.md5) == set(d.files.values())
    else:
        assert d.loader in LISTERS and d.input_shape[0] == 2 and d.mean is None
        assert (d.train_fraction is not None) == (d.loader == "class-folders")


def test_cli_reads_the_catalog(capsys):
    from plif.cli.main import build_parser

    with pytest.raises(SystemExit):
        build_parser("data").parse_args(["data", "prepare", "--help"])
    text = capsys.readouterr().out
    assert all(n in text for n in DATASETS)


@pytest.mark.parametrize("name", [n for n, d in DATASETS.items() if d.is_event])
def test_missing_files_message_is_the_catalog_layout(tmp_path, name):
    from plif.data.events.datasets import list_samples

    with pytest.raises(FileNotFoundError) as e:
        list_samples(DATASETS[name], tmp_path, train=True)
    assert DATASETS[name].layout in str(e.value)


def test_unknown_dataset_lists_the_valid_names():
    with pytest.raises(ValueError, match="unknown dataset 'x'; valid: mnist"):
        get_dataset("x")


def test_the_kind_is_asked_of_the_record_in_one_way():
    """``is_event`` is the only question; a record of another kind, or a kind misspelt, is refused."""
    assert [n for n, d in DATASETS.items() if d.is_event] == ["nmnist", "cifar10-dvs", "dvs128-gesture", "ncaltech101"]
    assert get_dataset("nmnist", events=True).name == "nmnist" and get_dataset("mnist", events=False).name == "mnist"
    with pytest.raises(ValueError, match="unknown static dataset 'nmnist'; valid: mnist, fashion-mnist, cifar10$"):
        get_dataset("nmnist", events=False)
    assert DATASETS["nmnist"].of_kind(events=True) is DATASETS["nmnist"]
    with pytest.raises(ValueError, match="unknown static dataset 'nmnist'; valid: mnist, fashion-mnist, cifar10$"):
        DATASETS["nmnist"].of_kind(events=False)  # what a static loader handed an event record says
    with pytest.raises(ValueError, match="kind 'events', expected 'static' or 'event'"):
        replace(DATASETS["nmnist"], kind="events")


def test_the_data_package_takes_records_not_names():
    """A dataset's name is looked up where it comes in (CLI, config, a run's config, a frame cache's
    meta.json: the cache's rebuild advice reads the name it stored); below the catalog, plif.data's
    loaders, listers, downloads and pipeline take the record itself."""
    import ast
    from pathlib import Path

    import plif.data

    root = Path(plif.data.__file__).parent
    where_names_come_in = ("catalog.py", "events/cache.py")
    lookups = [p.relative_to(root).as_posix() for p in sorted(root.rglob("*.py"))
               if p.relative_to(root).as_posix() not in where_names_come_in
               and any(getattr(n, "id", None) == "get_dataset" for n in ast.walk(ast.parse(p.read_text())))]
    assert lookups == []
