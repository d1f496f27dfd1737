import pytest
import torch

from plif.data.split import stratified_split, stratified_subset


def test_per_class_fraction_disjoint_cover():
    labels = torch.cat([torch.full((n,), c) for c, n in enumerate([100, 40, 7, 0, 20])])
    labels = labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))]
    tr, va = stratified_split(labels, 0.15, seed=0)
    assert tr.dtype == va.dtype == torch.int64
    assert torch.equal(torch.sort(torch.cat([tr, va])).values, torch.arange(len(labels)))
    assert torch.equal(tr, torch.sort(tr).values) and torch.equal(va, torch.sort(va).values)
    counts = torch.bincount(labels[va], minlength=5).tolist()
    assert counts == [15, 6, 1, 0, 3]  # round(0.15 * n): 15, 6, 1.05 -> 1, 0, 3


def test_deterministic_and_seed_dependent():
    labels = torch.arange(600) % 10
    a = stratified_split(labels, seed=3)
    b = stratified_split(labels, seed=3)
    c = stratified_split(labels, seed=4)
    assert torch.equal(a[1], b[1]) and not torch.equal(a[1], c[1])
    assert len(a[1]) == 90


def test_bad_arguments():
    with pytest.raises(ValueError, match="val_fraction"):
        stratified_split(torch.zeros(4, dtype=torch.long), 1.0)
    with pytest.raises(ValueError, match="1-D"):
        stratified_split(torch.zeros(2, 2, dtype=torch.long))


def test_subset_keeps_every_class_in_its_share():
    # class-ordered like an N-MNIST split: the first 50 are all class 0
    labels = torch.cat([torch.full((n,), c) for c, n in enumerate([60, 50, 40, 30, 20])])
    idx = stratified_subset(labels, 50, seed=0)
    assert len(idx) == 50 and len(set(idx.tolist())) == 50 and torch.equal(idx, torch.sort(idx).values)
    assert torch.bincount(labels[idx], minlength=5).tolist() == [15, 13, 10, 7, 5]  # 12.5 and 7.5 tie: the smaller class index wins
    assert torch.equal(idx, stratified_subset(labels, 50, seed=0))
    assert not torch.equal(idx, stratified_subset(labels, 50, seed=1))
    assert torch.equal(stratified_subset(labels, 500), torch.arange(200))
    odd = stratified_subset(labels, 7, seed=0)
    assert len(odd) == 7 and set(labels[odd].tolist()) == {0, 1, 2, 3, 4}


def test_split_limit_is_stratified():
    from plif.data.pipeline import Split

    y = torch.arange(100) // 10  # ten classes in order
    s = Split(torch.zeros(100, 3), y).limit(20)
    assert torch.bincount(s.y, minlength=10).tolist() == [2] * 10
    assert torch.equal(s.gather(torch.arange(20))[:, 0], torch.zeros(20))
