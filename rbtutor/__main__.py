"""``python -m rbtutor``: the ``rbtutor`` command (:mod:`rbtutor.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
