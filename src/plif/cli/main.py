"""The ``plif`` command: parses arguments and hands over to one library function per subcommand.

Each subcommand lives in its own module exposing ``register(subparsers)``, which adds its parser
and sets ``func(args) -> int``.  Modules are imported lazily by name so that ``plif spec`` does
not pay for the training stack.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from .torchrun_error import record_refusal

# subcommand -> module under plif.cli that registers it
COMMANDS = {
    "spec": "spec",
    "zoo": "spec",
    "data": "data",
    "train": "train",
    "eval": "train",
    "bench": "bench",
    "ablate": "experiments",
    "report": "experiments",
    "plot": "experiments",
    "stats": "deploy",
    "export": "deploy",
    "doctor": "doctor",
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser (and its subcommands'), whose usage error is also torchrun's root cause."""

    def error(self, message):
        record_refusal(f"{self.prog}: error: {message}")
        super().error(message)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(prog="plif", description="PLIF spiking neural networks (Fang et al., ICCV 2021)")
    parser.add_argument("--version", action="version", version=f"plif {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    done = set()
    for name, module in COMMANDS.items():
        if module in done or (only is not None and name != only):
            continue
        try:
            mod = importlib.import_module(f"plif.cli.{module}")
        except ModuleNotFoundError as e:
            if e.name == f"plif.cli.{module}":
                continue  # subcommand not part of this build
            raise
        mod.register(sub)
        done.add(module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    first = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2 if argv else 0
    from ..signals import StopSignal, stop_signals_raise

    try:
        with stop_signals_raise():  # plif train installs its own (it stops after a checkpoint)
            return int(args.func(args) or 0)
    except StopSignal as e:  # a cluster's notice: clean-up has run, say why the command ended
        print(f"plif {args.command}: {e} before it finished (exit status {e.exit_status})", file=sys.stderr)
        return e.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, RuntimeError, FloatingPointError) as e:
        if getattr(args, "debug", False):
            raise
        line = f"plif {args.command}: error: {user_message(e)}"
        sys.stderr.write(line + "\n")  # one write: under torchrun with PYTHONUNBUFFERED, print's two interleave
        record_refusal(line)
        return 2


def user_message(e: BaseException) -> str:
    """One line for a user error; an OS error names the path and says what failed."""
    if isinstance(e, OSError) and not isinstance(e, FileNotFoundError) and e.strerror:
        where = f"{e.filename}: " if e.filename else ""
        return f"{where}{e.strerror}"
    text = str(e)
    return text if text else type(e).__name__


if __name__ == "__main__":
    sys.exit(main())
