"""``python -m plif ...`` (and ``torchrun -m plif train ...``) run the command-line tool."""
import sys

from .cli.main import main

sys.exit(main())
