"""Step: intake. A submission is checked and copied, trusting nothing in it, before nbgrader sees it.

Everything a student hands in is untrusted: the names, types and sizes of its
files, how many there are and how deep they sit, and the folder itself, which
may change while it is read. :func:`take_in` copies a submission folder into a
fresh folder of the grader's, and :func:`collect` does the same for the newest
submission of each student in nbgrader's exchange (a replacement for
``nbgrader collect``, which dereferences links). Nothing in an exchange entry is
believed about who handed it in or when: its Unix owner must be the student it
names, and its time is when it appeared (its ctime), recorded in a receipt of the
grader's; the student's ``timestamp.txt`` is only compared with it.

The modules, in the order a submission meets them:

1. :mod:`.exchange` picks, for each student, the newest entry of nbgrader's
   exchange whose name, type and Unix owner fit the student it names
   (:func:`collect`, :func:`parse_entry`); a folder handed to the grader some
   other way starts at the next step.
2. :mod:`.files` walks the submission folder through file descriptors, never
   following a link, and copies each file that passes the type checks and the
   caps (:func:`take_in`).
3. :mod:`.notebooks` parses each ``.ipynb`` the walk takes, rebuilds it from the
   fields grading needs and cuts it to the caps (:func:`cut_text`).
4. :mod:`.copies` refuses a notebook holding nbgrader's marker lines or the
   instructor's solutions (:func:`source_copy`, :func:`solution_texts`).
5. :mod:`.times` reads and writes submission times (:func:`parse_time`,
   :func:`format_time`), checks the student's ``timestamp.txt`` claim and keeps
   the grader's receipt (:func:`receipt_path`, :func:`read_receipt`); the
   exchange writes the receipt once the copy is complete.

Beside them, :mod:`.limits` holds what every step reads: the caps
(:class:`Limits`), the result of one intake (:class:`Intake`) with its event
kinds (:data:`KINDS`), and the rule for names (:func:`name_problem`).

Imports run one way only: ``limits`` <- ``copies`` <- ``notebooks`` <- ``files``
<- ``times`` <- ``exchange``. Every name that ``rbtutor.grading.intake`` offered
as one module is still importable from here.
"""

from .copies import (
    MARKERS,
    NONTRIVIAL_CHARS,
    NONTRIVIAL_LINES,
    PROSE_CHARS,
    STRONG_CHARS,
    STRONG_LINES,
    solution_texts,
    source_copy,
)
from .exchange import collect, parse_entry
from .files import FLOOD_FACTOR, take_in
from .limits import KINDS, TIMESTAMP_BYTES, TIMESTAMP_FILE, Intake, Limits, MiB, name_problem
from .notebooks import cut_text
from .times import (
    EARLIEST,
    MISMATCH_SECONDS,
    RECEIPT_BYTES,
    RECEIPT_SUFFIX,
    format_time,
    parse_time,
    read_receipt,
    receipt_path,
)

__all__ = [
    "EARLIEST", "FLOOD_FACTOR", "KINDS", "MARKERS", "MISMATCH_SECONDS", "NONTRIVIAL_CHARS", "NONTRIVIAL_LINES",
    "PROSE_CHARS", "RECEIPT_BYTES", "RECEIPT_SUFFIX", "STRONG_CHARS", "STRONG_LINES", "TIMESTAMP_BYTES",
    "TIMESTAMP_FILE", "Intake", "Limits", "MiB", "collect", "cut_text", "format_time", "name_problem",
    "parse_entry", "parse_time", "read_receipt", "receipt_path", "solution_texts", "source_copy", "take_in",
]
