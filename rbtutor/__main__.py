"""``python -m rbtutor``: the command line of :mod:`rbtutor.problems.cli`."""

import sys

from .problems.cli import main

if __name__ == "__main__":
    sys.exit(main())
