"""The course on disk: its layout (:mod:`.layout`), the notebook renderer (:mod:`.render`), nbgrader's
configuration (:mod:`.nbgrader`), the instructor's loop over the class (:mod:`.grade`) and one command
line (:mod:`.cli`, ``python -m rbtutor.course``)."""

import sys

# jsonschema, when the optional rfc3987_syntax is installed (Jupyter's event system pulls it in),
# registers an IRI format checker whose grammar is compiled at import: 0.85 s of CPU in every
# process that imports nbformat, i.e. every grading worker and command. No schema the course
# validates (notebooks, nbgrader's cell metadata) checks the "iri" formats, so the course's
# processes do without that checker. (No effect where jsonschema is already imported.)
if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)

from .layout import CourseError, CourseLayout  # noqa: E402
from .nbgrader import api  # noqa: E402

__all__ = ["CourseError", "CourseLayout", "api"]
