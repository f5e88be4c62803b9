"""Student ids are data, never patterns: the one check every place an id comes in uses.

An id reaches the course from places a student controls (an exchange entry's name, a folder
of ``submitted/``, a hub account, a check request), and then travels into file names, nbgrader
calls that glob, CSV files, HTML reports and terminal lines. Rather than escape it differently
in each of those places, an id is accepted only when it is harmless in all of them:

* one to :data:`MAX_ID_CHARS` characters, each a letter or digit (any script), ``_``, ``.``,
  ``-`` or ``@``, the first a letter or digit: so no glob character (``* ? [ ]``), no path
  separator, no ``+`` (the exchange's separator), no white space or control character, no
  markup, and no leading character a spreadsheet reads as a formula (``= + - @``);
* not a reserved name: :data:`RESERVED_IDS` (the instructor's own variant, and names the
  course uses for itself).

Escaping where text lands is still done (the report, CSV, the terminal): ids are not the only
text a student writes.

>>> id_problem("student1") is None
True
>>> id_problem("q[x]")
"contains '[', which is not a letter, digit, '_', '.', '-' or '@'"
>>> id_problem("reference")
'is reserved for the course itself'
"""

from __future__ import annotations

import unicodedata

from rbtutor.problems.variants import RESERVED_IDS as _VARIANT_RESERVED

#: the longest id accepted (Unix account names are at most 32 bytes; e-mail ids run longer)
MAX_ID_CHARS = 64
#: punctuation allowed after the first character
ID_PUNCTUATION = frozenset("_.-@")
#: ids no student may have: the instructor's own variant and the course's internal names
RESERVED_IDS = frozenset(_VARIANT_RESERVED | {"reference", "instructor", "root", "admin", "nobody",
                                             "grader", "course", "exchange", "inbound", "outbound",
                                             "feedback", "submitted", "autograded", "release", "source"})


def _letter_or_digit(char: str) -> bool:
    return unicodedata.category(char)[0] in "LN"


def id_problem(student_id: object) -> str | None:
    """Why ``student_id`` is not acceptable as a student id, or None when it is.

    Parameters
    ----------
    student_id : object
        The claimed id; anything but a ``str`` is refused.

    Returns
    -------
    str or None
        A phrase that completes "the student id ... ", for messages such as
        ``bad_name`` events and 400 replies, or None for an acceptable id.
    """
    if not isinstance(student_id, str):
        return f"is a {type(student_id).__name__}, not text"
    if not student_id:
        return "is empty"
    if len(student_id) > MAX_ID_CHARS:
        return f"is longer than {MAX_ID_CHARS} characters"
    for position, char in enumerate(student_id):
        if _letter_or_digit(char):
            continue
        shown = repr(char) if char.isprintable() else ascii(char)
        if position == 0:
            return f"starts with {shown}, not with a letter or digit"
        if char not in ID_PUNCTUATION:
            return f"contains {shown}, which is not a letter, digit, '_', '.', '-' or '@'"
    if student_id.casefold() in RESERVED_IDS:
        return "is reserved for the course itself"
    return None


def check_id(student_id: object) -> str:
    """``student_id`` itself when it is acceptable; otherwise ``ValueError`` saying why.

    >>> check_id("student2")
    'student2'
    >>> check_id("a/b")
    Traceback (most recent call last):
    ...
    ValueError: expected a student id, got 'a/b': it contains '/', which is not a letter, digit, '_', '.', '-' or '@'
    """
    problem = id_problem(student_id)
    if problem:
        shown = student_id if not isinstance(student_id, str) else ascii(student_id[:80])
        raise ValueError(f"expected a student id, got {shown}: it {problem}")
    return student_id
