"""When a run stops before its last epoch on purpose: a wall-time limit, or the signal a cluster
sends before its own limit (SLURM: SIGTERM, or SIGUSR1 with ``--signal``).

The run stops cleanly after the last epoch (or ``--checkpoint-every`` step) whose checkpoint fits
before the deadline, judged from the slowest such stretch this process has run.  The deadline
counts from the start of the process (of the torchrun agent under torchrun); ``plif train`` then
exits with :data:`EXIT_STOPPED` and the same command continues the run.  A command with nothing to
save (``plif eval``, ``plif stats`` ...) stops at once on those signals, saying so
(:func:`plif.signals.stop_signals_raise`).
"""
from __future__ import annotations

import math
import os
import re
import signal
import time
from ..signals import STOP_SIGNALS

__all__ = ["EXIT_STOPPED", "stopped_exit_status", "parse_duration", "Stopper", "STOP_SIGNALS"]

EXIT_STOPPED = 75  # EX_TEMPFAIL: not finished, not failed; run the same command again to continue
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def stopped_exit_status() -> int:
    """The exit status of a run stopped on purpose: :data:`EXIT_STOPPED`, except in a torchrun
    worker.  torchrun's agent counts any other status than 0 as a failure: it would start the
    group again (using up ``--max-restarts``) and then exit 1, so a scheduler records a failure
    for a run that stopped as asked.  There every worker exits 0; ``summary.json`` says
    ``"stopped"`` and the same command continues the run."""
    return 0 if "TORCHELASTIC_RUN_ID" in os.environ else EXIT_STOPPED


def parse_duration(text: str) -> float:
    """Seconds of ``90``, ``45s``, ``90m``, ``1.5h``, ``2d``, ``1h30m``, ``MM:SS``, ``HH:MM:SS`` or
    SLURM's ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``; ``ValueError`` naming ``--time-limit`` otherwise
    (also for minutes or seconds of 60 or more after a colon, or hours of 24 or more after a day count)."""
    s = str(text).strip().lower()
    seconds = None
    m = re.fullmatch(r"(?:(\d+)-)?(\d+(?::\d+){0,2})", s)
    if m and (m.group(1) or ":" in m.group(2)):
        days, fields = m.group(1), [int(p) for p in m.group(2).split(":")]
        units = (3600, 60, 1) if days or len(fields) == 3 else (60, 1)
        for i, (value, unit) in enumerate(zip(fields, units)):
            limit = 60 if i else (24 if days else None)  # the leading field counts on (90:00 is 90 minutes)
            if limit is not None and value >= limit:
                what = {3600: "hours", 60: "minutes", 1: "seconds"}[unit]
                raise ValueError(f"--time-limit {text!r}: {what} must be below {limit} there, got {value}; "
                                 "use e.g. 1:30:00, 90:00 or 1-12:00:00")
        seconds = sum(v * u for v, u in zip(fields, units)) + int(days or 0) * 86400
    elif re.fullmatch(r"(\d+(\.\d*)?|\.\d+)", s):
        seconds = float(s)
    elif s and re.fullmatch(r"((\d+(\.\d*)?|\.\d+)[smhd])+", s):
        seconds = sum(float(v) * _UNITS[u] for v, u in re.findall(r"(\d+(?:\.\d*)?|\.\d+)([smhd])", s))
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"--time-limit {text!r}: not a positive duration; use e.g. 3600, 90m, 1.5h, 1h30m, "
                         "1:30:00 or 1-00:00:00")
    return float(seconds)


def _age(pid: int | str) -> float:
    """Seconds since process ``pid`` started (Linux ``/proc``); 0 where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def job_age() -> float:
    """Seconds since the job started: this process, or under torchrun its agent (the parent), so
    a group restarted by ``--max-restarts`` keeps the deadline of the first."""
    return _age(os.getppid() if "TORCHELASTIC_RUN_ID" in os.environ else "self")


class Stopper:
    """Decides, at each point where the run can stop with nothing lost, whether it should.

    limit_s: seconds from the start of the job (:func:`job_age`: a ``plif ablate`` sweep shares one
    deadline; None: no limit).  signals: handle :data:`STOP_SIGNALS` (a second one of the same kind
    ends the process as usual).  Use as a context manager.
    """

    def __init__(self, limit_s: float | None, signals: bool = True, log=None):
        self.start = time.monotonic()
        self.deadline = None if limit_s is None else self.start - job_age() + limit_s
        self.signals = signals and hasattr(signal, "pthread_kill")
        self.log = log
        self.signalled: str | None = None
        self._previous: dict = {}
        self._mark = self.start
        self._slowest = 0.0

    def __enter__(self):
        if self.signals:
            for sig in STOP_SIGNALS:
                try:
                    self._previous[sig] = signal.signal(sig, self._handle)
                except ValueError:  # not the main thread: leave the signals alone
                    break
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self.signalled == name:  # asked twice: stop now, as without the handler
            signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))
            os.kill(os.getpid(), signum)
            return
        self.signalled = name
        if self.log is not None:
            self.log(f"\n{name} received: stopping after the current epoch's checkpoint "
                     f"(send it again to stop at once)")

    def expired(self) -> bool:
        """Whether the deadline has passed already."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def reason(self) -> str | None:
        """Call right after a checkpoint: why the run should stop now (None: go on).  The stretch
        since the previous call is how long the next one is expected to take (the slowest seen)."""
        now = time.monotonic()
        self._slowest = max(self._slowest, now - self._mark)
        self._mark = now
        if self.signalled:
            return self.signalled
        if self.deadline is not None and now + self._slowest > self.deadline:
            return "time limit"
        return None
