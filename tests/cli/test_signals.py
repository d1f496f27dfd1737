"""A cluster's stop signals end every plif command with one line, not silently (issue 31)."""
import os
import signal
import time

import pytest

from plif.cli import spec
from plif.cli.main import main


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGUSR1"])
def test_a_command_stopped_by_a_signal_says_so_and_exits_128_plus_its_number(sig, monkeypatch, capsys):
    signum = getattr(signal, sig)
    cleaned = []

    def run_zoo(args):
        try:
            os.kill(os.getpid(), signum)
            time.sleep(30)  # the handler interrupts it
            raise AssertionError("the signal was not handled")
        finally:
            cleaned.append(True)  # a finally block runs (SIGTERM's default action skips it)

    def unhandled(*a):  # what would otherwise end the whole test session
        raise AssertionError(f"plif left {sig} unhandled")

    monkeypatch.setattr(spec, "run_zoo", run_zoo)
    before = signal.signal(signum, unhandled)
    try:
        assert main(["zoo"]) == 128 + signum
        assert signal.getsignal(signum) is unhandled  # plif's handler was for the command only
    finally:
        signal.signal(signum, before)
    assert cleaned == [True]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"plif zoo: stopped by {sig} before it finished (exit status {128 + signum})"]
