"""Several processes through ``torchrun``: process-group set-up and reductions.

``torchrun --nproc_per_node=N -m plif train ...`` sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``;
without them everything here is a no-op for a single process.  ``--batch-size`` is per process.
``TORCHELASTIC_RESTART_COUNT`` (set by torchrun) tells a restarted group to resume its run folder.
"""
from __future__ import annotations

import atexit
import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

__all__ = ["DistInfo", "init_distributed", "all_reduce_sum", "broadcast_object", "all_gather_object", "any_rank",
           "restart_count", "shutdown"]


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device_kind: str) -> DistInfo:
    """Join the process group when launched by torchrun (NCCL on GPUs, gloo on CPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        backend = "nccl" if device_kind == "cuda" else "gloo"
        store = _restart_store(world)
        if store is None:
            dist.init_process_group(backend=backend)
        else:
            dist.init_process_group(backend=backend, store=store, rank=int(os.environ["RANK"]), world_size=world)
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def _restart_store(world: int):
    """After a torchrun restart, the agent's shared TCP store still holds the previous group's
    addresses, and the new group connects to dead workers ("Gloo connectFullMesh failed ...
    Connection refused", pytorch/pytorch#135712): give each restart its own key prefix.  The count
    is the same for every worker of one torchrun; across machines it is not (a healthy machine's
    agent restarts its workers without counting), so multi-node jobs with --max-restarts set
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (a fresh store each round, where this returns None)."""
    count = restart_count()
    if count == 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != str(True):
        return None
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False,
                          timeout=timedelta(minutes=10))
    return dist.PrefixStore(f"plif/restart_{count}", store)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over all processes (a copy; ``t`` is left unchanged)."""
    out = t.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out


def broadcast_object(obj, world: int = 2):
    """Rank 0's ``obj`` on every rank (picklable; as it is when ``world`` is 1)."""
    if world <= 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather_object(obj, world: int = 2) -> list:
    """Every rank's ``obj``, in rank order (``[obj]`` when ``world`` is 1)."""
    if world <= 1:
        return [obj]
    out = [None] * world
    dist.all_gather_object(out, obj)
    return out


def any_rank(flag: bool, device: torch.device, world: int = 2) -> bool:
    """Whether ``flag`` is true on any rank (one tiny all-reduce; ranks must agree to stop)."""
    if world <= 1:
        return bool(flag)
    return bool(all_reduce_sum(torch.tensor([float(flag)], device=device)).item() > 0)


def restart_count() -> int:
    """How often ``torchrun --max-restarts`` has restarted this worker group (0: first start)."""
    try:
        return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    except ValueError:
        return 0


# Groups left by shutdown(), released at exit: see there.
_LEFT: list = []
atexit.register(_LEFT.clear)


def shutdown() -> None:
    """Leave the process group; the group itself is released at exit, when nothing uses it.

    Released now, the last reference would often be the DDP module's Reducer (alive until
    ``train`` returns, or in the frames of an error on its way out), whose destructor waits for
    gloo's worker threads while holding the GIL; a worker still freeing the tensor of the last
    collective needs the GIL, and the process hangs at the end of the run, so torchrun never sees
    it finish (pytorch/pytorch#56297).  Python's own reference, dropped at exit, releases the GIL
    while the group shuts down."""
    if dist.is_initialized():
        _LEFT.append(dist.group.WORLD)
        dist.destroy_process_group()
