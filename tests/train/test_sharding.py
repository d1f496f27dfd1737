"""--data-on-device no under torchrun: each rank gathers only its own shard of an epoch and of an
evaluation (never the whole split)."""
import torch

from plif.data.pipeline import Split, TrainData, epoch_generator


def _recording_split(n, log):
    x = torch.arange(n, dtype=torch.uint8).view(n, 1, 1, 1).expand(n, 1, 2, 2).contiguous()
    split = Split(x, torch.arange(n) % 10).streaming("cpu")

    class Recording(Split):
        def gather(self, idx, out=None):
            log.extend(int(i) for i in idx)
            return super().gather(idx, out)

    return Recording(split.x, split.y, split.rows, split.device)


def test_streamed_ranks_gather_disjoint_shards():
    n, world, bs = 50, 2, 4
    seen, evals = [], []
    for rank in range(world):
        log, elog = [], []
        train = _recording_split(n, log)
        test = _recording_split(n, elog)
        data = TrainData(train, None, test, lambda x, g=None: x.float(), lambda x, g=None: x, workers=1)
        got = [int(v) for x, _ in data.train_batches(bs, epoch_generator(0, 3), rank, world) for v in x[:, 0, 0, 0]]
        assert sorted(log) == sorted(got) and len(log) == (n // world) // bs * bs  # only what this rank trains on
        list(data.eval_batches(test, 8, rank, world))
        assert sorted(elog) == list(range(n * rank // world, n * (rank + 1) // world))
        seen.append(set(log))
        evals.append(elog)
    assert not seen[0] & seen[1]
    perm = torch.randperm(n, generator=epoch_generator(0, 3))
    assert seen[0] | seen[1] == {int(i) for r in range(world) for i in perm[r * 25:r * 25 + 24]}
