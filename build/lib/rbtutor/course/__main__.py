"""``python -m rbtutor.course``: see :mod:`rbtutor.course.cli`."""

import sys

from .cli import main

sys.exit(main())
