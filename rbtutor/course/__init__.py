"""The course on disk, and what the instructor and the hub run on it.

The modules, roughly in the order a course term uses them:

1. :mod:`.layout`: every folder and file of a course, named once from its root.
2. :mod:`.render`: the locked cells of the assignment notebooks that come from the course.
3. :mod:`.nbgrader`: the whole nbgrader configuration (a course's ``nbgrader_config.py`` only
   calls ``configure``, which declares the grading pipeline) and an API object for one course.
4. :mod:`.personal`: the fetch hook that writes a student's own numbers (and due date) into each
   fetched notebook; :mod:`.fetch_service` serves it on the hub, and :mod:`.checks` (a package:
   core, service, stats) judges one answer while the student works; :mod:`.hub_service` puts
   both hub services on the network.
5. :mod:`.late`: due dates, extensions and the late penalty, settled after the scores of
   :mod:`rbtutor.grading.scores`.
6. :mod:`.grade`: the instructor's loop over the class (generate, grade, final scores, return
   feedback); :mod:`.cluster` runs the same grading as one Dask task per submission.
7. After grading: :mod:`.class_report` (how the class did, ``report/index.html``),
   :mod:`.similarity` (who handed in the same code) and :mod:`.export` (the file an LMS imports).
8. :mod:`.options`: ``python -m rbtutor.course config``, the grading options and a course's values.
9. :mod:`.cli`: one command line, ``python -m rbtutor.course COMMAND`` (:mod:`.__main__`).

The ``labextension`` folder holds the JupyterLab extension that makes nbgrader's Validate dialog
say what it checked.
"""

import sys

# jsonschema, when the optional rfc3987_syntax is installed (Jupyter's event system pulls it in),
# registers an IRI format checker whose grammar is compiled at import: 0.85 s of CPU in every
# process that imports nbformat, i.e. every grading worker and command. No schema the course
# validates (notebooks, nbgrader's cell metadata) checks the "iri" formats, so the course's
# processes do without that checker. (No effect where jsonschema is already imported.)
if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)

from .layout import CourseError, CourseLayout
from .nbgrader import api

__all__ = ["CourseError", "CourseLayout", "api"]
