"""Under torchrun, a refusal's one line is what torchrun reports as the failure's root cause.

torchrun's agent counts every non-zero exit status of a worker as a failure: it stops the other
workers, raises ``ChildFailedError`` and Python prints that exception's traceback, whatever the
status (torch 2.13, ``torch.distributed.launcher.api.launch_agent``; no status is final or quiet,
and any exit other than 0 also uses up a ``--max-restarts``).  What the agent can show is what the
worker wrote to the JSON file named by ``$TORCHELASTIC_ERROR_FILE`` (the file
``torch.distributed.elastic.multiprocessing.errors.record`` writes): the *Root Cause* block prints
it as the failure's ``traceback``, where a worker that wrote nothing gets a link to the elastic
docs.  :func:`record_refusal` writes plif's one line there, in ``record``'s format.
"""
from __future__ import annotations

import json
import os
import time

__all__ = ["record_refusal"]


def record_refusal(line: str) -> None:
    """Write ``line`` to ``$TORCHELASTIC_ERROR_FILE`` when torchrun set it (else do nothing); a file
    that cannot be written is left to torchrun's own message."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    from ..atomic import atomic_write_bytes

    data = {"message": {"message": line, "extraInfo": {"py_callstack": line, "timestamp": str(int(time.time()))}}}
    try:
        atomic_write_bytes(path, json.dumps(data).encode())
    except OSError:
        pass
