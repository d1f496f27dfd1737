"""Class-stratified train/validation split (protocol B: the supplement's "Accuracy with a Validation
Set", 85 % / 15 % of each class)."""
from __future__ import annotations

import torch

__all__ = ["stratified_split", "stratified_subset"]


def stratified_split(labels: torch.Tensor, val_fraction: float = 0.15, seed: int = 0
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Split indices of ``labels [N]`` so that ``round(val_fraction * n_c)`` samples of every class
    c go to validation, chosen by a permutation seeded with ``seed`` (same seed, same split).

    Returns ``(train_idx, val_idx)``, int64, each sorted ascending, disjoint, covering ``0..N-1``.
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    labels = torch.as_tensor(labels).cpu()
    if labels.dim() != 1:
        raise ValueError(f"labels must be 1-D [N], got shape {tuple(labels.shape)}")
    g = torch.Generator().manual_seed(int(seed))
    # one permutation of all indices, then a stable sort by class: within each class the order is
    # random, and classes do not influence each other's draw beyond the shared permutation
    perm = torch.randperm(len(labels), generator=g)
    order = perm[torch.sort(labels[perm], stable=True).indices]
    classes, counts = torch.unique(labels, return_counts=True)
    val_parts, start = [], 0
    for n in counts.tolist():
        n_val = int(val_fraction * n + 0.5)  # round half up, independent of float banking
        val_parts.append(order[start:start + n_val])
        start += n
    val = torch.cat(val_parts) if val_parts else torch.empty(0, dtype=torch.long)
    mask = torch.ones(len(labels), dtype=torch.bool)
    mask[val] = False
    return torch.nonzero(mask).flatten(), torch.sort(val).values


def stratified_subset(labels: torch.Tensor, n: int, seed: int = 0) -> torch.Tensor:
    """Indices of ``n`` samples of ``labels [N]`` with every class in its share of the whole:
    class c gets ``floor(n * n_c / N)`` samples, and the ``n - sum`` left over go to the classes with
    the largest remainders (ties: smaller class index).  Within a class the samples are drawn by a
    permutation seeded with ``seed``.  Returns int64 indices, sorted ascending; ``n >= N`` gives all.

    This is what ``--max-train-samples`` / ``--max-test-samples`` take: the first ``n`` of a
    class-ordered split would hold one class only.
    """
    labels = torch.as_tensor(labels).cpu()
    if labels.dim() != 1:
        raise ValueError(f"labels must be 1-D [N], got shape {tuple(labels.shape)}")
    total = len(labels)
    if n < 0:
        raise ValueError(f"a sample cap must be >= 0, got {n}")
    if n >= total:
        return torch.arange(total)
    g = torch.Generator().manual_seed(int(seed))
    perm = torch.randperm(total, generator=g)
    order = perm[torch.sort(labels[perm], stable=True).indices]  # class by class, random within each
    _, counts = torch.unique(labels, return_counts=True)
    exact = counts.double() * n / total
    quota = exact.floor().long()
    rest = n - int(quota.sum())
    if rest:
        frac = exact - quota
        # largest remainder first; the stable sort keeps the smaller class index first among ties
        quota[torch.sort(-frac, stable=True).indices[:rest]] += 1
    starts = torch.cumsum(counts, 0) - counts
    parts = [order[s:s + q] for s, q in zip(starts.tolist(), quota.tolist())]
    return torch.sort(torch.cat(parts)).values
