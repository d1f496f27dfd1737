"""``python -m tests.sweep [--jobs N] ...``: the whole sweep from the command line (see :mod:`.run`)."""
import sys

from .run import main

sys.exit(main())
