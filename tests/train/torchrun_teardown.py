"""Run by test_distributed.py under ``torchrun --nproc_per_node=2``: the end of a DDP run while a
gloo worker of rank 0 still holds the tensor of the last collective, as a loaded machine leaves it
now and then (pytorch/pytorch#56297).  Rank 1 joins that all-reduce late, so rank 0's worker frees
the tensor only after rank 0 has left the group and dropped its DDP module; freeing it needs the
GIL.  Exits 0 when neither leaving the group nor dropping the module waits for that worker with the
GIL held (before the fix, ``del net`` hung here), and the group is really gone at the end."""
import os
import time

import torch
import torch._dynamo  # noqa: F401  imported before the group exists, as plif's model does (its first
# import keeps references to any default group, which would keep the group alive and prove nothing)
import torch.distributed as tdist

from plif.train import distributed


def gloo_threads() -> int:
    names = (open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task"))
    return sum(n.startswith("pt_gloo") for n in names)


info = distributed.init_distributed("cpu")
net = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
if info.rank == 0:
    x = torch.ones(3)
    work = tdist.all_reduce(x, async_op=True)  # rank 1 comes late
    del x, work  # only the gloo work holds the tensor (and its Python object) now
else:
    time.sleep(0.5)
    tdist.all_reduce(torch.ones(3))
distributed.shutdown()
del net  # the Reducer's reference to the group goes (train() returning)
assert gloo_threads() > 0
distributed._LEFT.clear()  # what happens at exit
assert gloo_threads() == 0, "the process group was not released"
print(f"rank {info.rank}: clean exit")
