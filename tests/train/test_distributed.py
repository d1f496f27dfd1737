"""torchrun on the CPU (gloo): two processes, a worker killed under --max-restarts, and two
"machines" (two torchrun invocations with a c10d rendezvous) against one two-process run."""
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from plif_testing import tiny_train_argv

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

pytestmark = pytest.mark.slow  # five torchrun groups of 2-3 processes: ~90 s of CPU


def _train_args(root, out, *extra):
    return ["-m", "plif", *tiny_train_argv(root, out, *extra, epochs=4, batch_size=10)]


def _torchrun(*args):
    return [sys.executable, "-m", "torch.distributed.run", *args]


def _workers(agent: int) -> list[int]:
    """The worker processes torchrun (pid ``agent``) started: its children."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == agent:
                pids.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def _start(*args, **kw) -> subprocess.Popen:
    """``torchrun args``, its output captured."""
    return subprocess.Popen(_torchrun(*args), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _finish(*agents: subprocess.Popen, timeout: float = 120) -> list[tuple[str, str]]:
    """Each torchrun's ``(stdout, stderr)`` once it ended.  Whatever still runs at the timeout (or
    after an error) is killed, workers first: torchrun starts each in a session of its own, so they
    outlive their agent, and left behind they would take the CPU from every later test."""
    end = time.monotonic() + timeout
    try:
        return [agent.communicate(timeout=max(0.1, end - time.monotonic())) for agent in agents]
    finally:
        for agent in agents:
            if agent.poll() is None:
                for pid in _workers(agent.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                agent.kill()
                agent.communicate()


def _strip(out):
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if "time" not in k and k != "samples_per_s"} for r in rows]


def _assert_same_run(a, b):
    assert _strip(a) == _strip(b)
    for name in ("last.pt", "best_test.pt"):
        x = torch.load(a / "checkpoints" / name, weights_only=True)
        y = torch.load(b / "checkpoints" / name, weights_only=True)
        assert x["epoch"] == y["epoch"] and all(torch.equal(x["model"][k], y["model"][k]) for k in x["model"])
    ox = torch.load(a / "checkpoints" / "last.pt", weights_only=True)["optimizer"]["state"]
    oy = torch.load(b / "checkpoints" / "last.pt", weights_only=True)["optimizer"]["state"]
    assert all(torch.equal(ox[k][n], oy[k][n]) for k in ox for n in ox[k])


@pytest.fixture(scope="module")
def two_process_run(tiny_fashion, tmp_path_factory):
    """The uninterrupted reference: torchrun --nproc_per_node=2, 4 epochs."""
    out = tmp_path_factory.mktemp("ddp") / "run"
    agent = _start("--standalone", "--nproc_per_node=2", *_train_args(tiny_fashion, out))
    [(stdout, stderr)] = _finish(agent)
    assert agent.returncode == 0, stderr[-3000:]
    return out, stdout


def test_two_process_gloo_torchrun(two_process_run):
    out, stdout = two_process_run
    assert [r["epoch"] for r in _strip(out)] == [1, 2, 3, 4]
    # each of the 2 ranks takes 100 of the 200 samples: 10 steps of 10, so 200 samples per epoch in total
    assert stdout.count("run folder:") == 2  # printed by rank 0 only (start and end)
    assert "data: each of the 2 processes keeps every split whole on its device" in stdout
    assert json.loads((out / "summary.json").read_text())["finished"]
    assert not list(out.glob(".*.tmp")) and Path(out / "checkpoints" / "last.pt").is_file()


def test_a_refusal_under_torchrun_is_the_root_cause_torchrun_prints(tmp_path):
    """torchrun prints its agent's traceback for any failed worker (no exit status avoids it); plif's
    line comes first, from each worker, and again as the root cause's 'traceback' (docs/distributed.md)."""
    agent = _start("--standalone", "--nproc_per_node=2", "-m", "plif", "train", "--lr", "0", "--out", str(tmp_path / "r"))
    [(_, stderr)] = _finish(agent)
    line = "plif train: error: --lr must be positive, got 0"
    before, agents = stderr.split("Traceback (most recent call last):", 1)
    assert agent.returncode == 1 and line in before and "ChildFailedError" in agents
    # the rank that refused first is the root cause, or is listed among the failures when the agent
    # stopped the other rank in the same second (torchrun's timestamps are whole seconds)
    assert "exitcode  : 2 (pid: " in agents and f"traceback : {line}" in agents
    assert "To enable traceback" not in agents  # what a worker that wrote no error file gets
    assert not (tmp_path / "r").exists()


def test_leaving_the_group_never_waits_for_gloo_holding_the_gil(tmp_path):
    """The end of a DDP run while a gloo worker still frees the last collective's tensor: no rank
    waits for it with the GIL held (such a rank never exits, and torchrun waits for it forever)."""
    script = Path(__file__).with_name("torchrun_teardown.py")
    agent = _start("--standalone", "--nproc_per_node=2", str(script), cwd=tmp_path)
    [(stdout, stderr)] = _finish(agent, timeout=60)
    assert agent.returncode == 0, stderr[-3000:]
    assert "rank 0: clean exit" in stdout and "rank 1: clean exit" in stdout  # the two may share a line


def test_worker_killed_at_a_random_moment_restarts_and_resumes_exactly(tiny_fashion, tmp_path, two_process_run):
    """SIGKILL to one worker at a random moment of training under --max-restarts=2: torchrun restarts
    the group, which resumes the run folder by itself (mid-epoch with --checkpoint-every) and ends
    bit for bit where the uninterrupted run did."""
    out, rng, delay = tmp_path / "run", random.Random(), None
    agent = _start("--standalone", "--nproc_per_node=2", "--max-restarts=2",
                   *_train_args(tiny_fashion, out, "--checkpoint-every", "3"))
    try:
        t0 = time.monotonic()
        while not ((out / "metrics.jsonl").is_file() and (out / "metrics.jsonl").read_text().strip()):
            assert agent.poll() is None and time.monotonic() - t0 < 120, "the run ended before its first epoch"
            time.sleep(0.02)
        # within the next 1.5 epochs (as long as the machine's load makes them): epoch 2 or 3, before the end
        epoch = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["epoch_time_s"]
        delay = rng.uniform(0.0, 1.5 * epoch)
        time.sleep(delay)
        victim = rng.choice(_workers(agent.pid))
        os.kill(victim, signal.SIGKILL)
    finally:
        [(stdout, stderr)] = _finish(agent)
    assert agent.returncode == 0, f"delay {delay}s\n" + stderr[-3000:]
    assert "resuming" in stdout, f"delay {delay:.3f}s: no restart seen\n{stdout}"
    print(f"killed {delay:.3f}s after epoch 1;", *(line for line in stdout.splitlines() if "resuming" in line))
    _assert_same_run(two_process_run[0], out)


def _free_port() -> int:
    """A free port for the rendezvous, below the ephemeral range: a port bind(0) hands out (as gloo
    does for every connection of the other tests) could be taken again before torchrun binds it."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in random.sample(range(max(1024, low - 8000), low), 50):
        with socket.socket() as s:
            with contextlib.suppress(OSError):
                s.bind(("127.0.0.1", port))
                return port
    raise RuntimeError("no free port found")


def test_two_nodes_match_one_node_with_two_processes(tiny_fashion, tmp_path, two_process_run):
    """Two torchrun invocations (--nnodes 2, one process each, c10d rendezvous on 127.0.0.1) train
    together; rank 0 alone writes the shared run folder; the result is the two-process run's."""
    out, port = tmp_path / "run", _free_port()
    node = ("--nnodes=2", "--nproc_per_node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
            "--rdzv-id=plif-test", *_train_args(tiny_fashion, out))
    procs = [_start(*node) for _ in range(2)]
    results = _finish(*procs)
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 0, err[-3000:]
    assert sum(o.count("run folder:") for o, _ in results) == 2  # one writer: rank 0 reports, the other is silent
    _assert_same_run(two_process_run[0], out)


def test_a_time_limit_ends_torchrun_with_0_and_the_rates_cover_the_whole_test_set(tiny_fashion, tmp_path):
    """Workers stopped by --time-limit exited 75, which torchrun counts as a failure: it started the
    group again (using up --max-restarts) and exited 1.  And a DDP run's firing rates were those of
    rank 0's half of the test set only (issue 31)."""
    from plif.catalog import get_dataset
    from plif.data.pipeline import eval_batches, load_test_split
    from plif.runs import load_run, read_metrics
    from plif.train.loop import evaluate
    from plif.train.tb_log import firing_rates

    out = tmp_path / "run"
    agent = _start("--standalone", "--nproc_per_node=2", "--max-restarts=1",
                   *_train_args(tiny_fashion, out, "--time-limit", "1"))  # less than the start-up: one epoch
    [(stdout, stderr)] = _finish(agent)
    assert agent.returncode == 0, stderr[-3000:]
    assert "stopped (time limit)" in stdout and "exit status 0" in stdout and "resuming" not in stdout
    assert json.loads((out / "summary.json").read_text())["stopped"] == "time limit"
    (row,) = read_metrics(out)
    net, config = load_run(out, "last")  # the weights the epoch's test pass ran with
    split, prepare = load_test_split(get_dataset(config["dataset"]), str(tiny_fashion), config["T"], None,
                                     torch.device("cpu"))
    with firing_rates(net) as rates:  # one process, the same two batches of 30 as the two ranks' shares
        evaluate(net, eval_batches(split, prepare, len(split) // 2), config["num_classes"])
    assert row["firing_rates"] == rates
