"""One record per dataset (plif.catalog): the zoo, presets, CLI, loaders and listers read it."""
import pytest

from dataclasses import replace

from plif.catalog import DATASETS, get_dataset


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
        assert d.loader in LISTERS and d.mean is None
        assert d.input_shape[0] == 2 if len(d.input_shape) == 3 else d.input_shape == d.sensor_size == (700,)
        assert (d.train_fraction is not None) == (d.loader == "class-folders")
        assert bool(d.files) == (d.loader == "hdf5-splits") and d.slicing in ("count", "time")


def test_cli_reads_the_catalog(capsys):
    from plif.cli.main import build_parser

    with pytest.raises(SystemExit):
        build_parser("data").parse_args(["data", "prepare", "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps lines after a hyphen
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
    assert [n for n, d in DATASETS.items() if d.is_event] == ["nmnist", "cifar10-dvs", "dvs128-gesture", "ncaltech101",
                                                              "shd", "ssc", "asl-dvs", "dvs-lip"]
    assert get_dataset("nmnist", events=True).name == "nmnist" and get_dataset("mnist", events=False).name == "mnist"
    with pytest.raises(ValueError, match="unknown static dataset 'nmnist'; valid: mnist, fashion-mnist, cifar10$"):
        get_dataset("nmnist", events=False)
    assert DATASETS["nmnist"].of_kind(events=True) is DATASETS["nmnist"]
    with pytest.raises(ValueError, match="unknown static dataset 'nmnist'; valid: mnist, fashion-mnist, cifar10$"):
        DATASETS["nmnist"].of_kind(events=False)  # what a static loader handed an event record says
    with pytest.raises(ValueError, match="kind 'events', expected 'static' or 'event'"):
        replace(DATASETS["nmnist"], kind="events")


def test_the_data_package_takes_records_not_names():
    """A dataset's name is looked up where it comes in (CLI, config, a run's config, a public entry
    point of plif.data given a name: the catalog's ``as_dataset``); below the catalog, plif.data's
    loaders, listers, downloads and pipeline take the record itself (a frame cache's rebuild advice
    reads only the text its meta.json stored)."""
    import ast
    from pathlib import Path

    import plif.data

    root = Path(plif.data.__file__).parent
    where_names_come_in = ()  # the catalog itself is plif.catalog, below plif.data
    lookups = [p.relative_to(root).as_posix() for p in sorted(root.rglob("*.py"))
               if p.relative_to(root).as_posix() not in where_names_come_in
               and any(getattr(n, "id", None) == "get_dataset" for n in ast.walk(ast.parse(p.read_text())))]
    assert lookups == []


def test_the_public_entry_points_take_a_name_as_well_as_the_record(tmp_path, nmnist_root):
    """A name where the record is expected gets the record's result (it is looked up where it comes in:
    :func:`plif.catalog.as_dataset`); a name of the other kind, or anything else, one line."""
    import torch
    from plif_testing import make_images, write_idx

    from plif.data import augment_for, load_static
    from plif.catalog import as_dataset
    from plif.data.event_download import dataset_root, download_event_dataset, manual_steps
    from plif.data.events.datasets import list_samples
    from plif.data.pipeline import data_source, load_test_split
    from plif.data.transforms import AUGMENTATIONS

    mnist, files = DATASETS["mnist"], DATASETS["mnist"].files
    (tmp_path / "mnist").mkdir()
    x, y = make_images(20, 0)
    write_idx(tmp_path / "mnist" / files["test_images"], x)
    write_idx(tmp_path / "mnist" / files["test_labels"], y)
    by_name, by_record = (load_static(d, tmp_path, train=False, download=False) for d in ("mnist", mnist))
    assert all(torch.equal(a, b) for a, b in zip(by_name, by_record)) and by_name[0].shape == (20, 1, 28, 28)
    split, prepare = load_test_split("mnist", tmp_path, T=2)
    assert torch.equal(split.y, by_record[1]) and data_source("mnist", tmp_path, 2).prepare is not None
    assert augment_for("mnist") is augment_for(mnist) is AUGMENTATIONS["affine"]
    root, _ = nmnist_root
    assert list_samples("nmnist", root, train=True) == list_samples(DATASETS["nmnist"], root, train=True)
    assert dataset_root("nmnist", None) == tmp_path / "cache" / "nmnist"  # $PLIF_DATA_ROOT/<name>
    assert manual_steps("dvs128-gesture") == manual_steps(DATASETS["dvs128-gesture"])
    with pytest.raises(ValueError, match="mnist is a static dataset: plif downloads it when it is first loaded"):
        download_event_dataset("mnist", tmp_path)
    with pytest.raises(ValueError, match="^unknown static dataset 'nmnist'; valid: mnist, fashion-mnist, cifar10$"):
        load_static("nmnist", tmp_path, download=False)
    with pytest.raises(ValueError, match="^unknown event dataset 'mnist'; valid: nmnist, "):
        list_samples("mnist", tmp_path, train=True)
    with pytest.raises(ValueError, match="^unknown dataset 'mnsit'; valid: mnist, "):
        augment_for("mnsit")
    with pytest.raises(TypeError, match=r"^dataset: expected a dataset name such as 'mnist' or its record "
                                        r"\(get_dataset\(name\)\), got pathlib.PosixPath$"):
        load_static(tmp_path)
    assert as_dataset(mnist) is mnist and as_dataset("nmnist", events=True) is DATASETS["nmnist"]
