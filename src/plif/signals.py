"""The signals a cluster sends before its own limit (SLURM: SIGTERM, or SIGUSR1 with ``--signal``),
turned into an exception for commands that have nothing to save.

SIGUSR1's default action ends a process without a word, and SIGTERM's skips every ``finally``
block; inside :func:`stop_signals_raise` both raise :class:`StopSignal` instead, so clean-up runs
and the command can say why it stopped.  ``plif train`` handles them itself
(:mod:`plif.train.stopping`: it stops after the last checkpoint that fits).
"""
from __future__ import annotations

import signal
from contextlib import contextmanager

__all__ = ["STOP_SIGNALS", "StopSignal", "stop_signals_raise"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class StopSignal(BaseException):
    """One of :data:`STOP_SIGNALS` arrived while a command with nothing to save ran (a BaseException,
    as KeyboardInterrupt: no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int):
        self.name = signal.Signals(signum).name
        self.exit_status = 128 + signum  # what a shell reports for a process the signal ended
        super().__init__(f"stopped by {self.name}")


@contextmanager
def stop_signals_raise():
    """While the block runs, :data:`STOP_SIGNALS` raise :class:`StopSignal` (in the main thread)
    instead of ending the process without a word (SIGUSR1's default action)."""
    def handle(signum, frame):
        raise StopSignal(signum)

    previous = {}
    try:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, handle)
    except ValueError:  # not the main thread: leave the signals alone
        pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
