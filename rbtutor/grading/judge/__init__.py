"""Step: judge. The grader's decision on each handed-in answer, in four modules.

* :mod:`.verdicts`: the verdict on one answer (pass or fail, feedback, a diagnosis) and its messages;
* :mod:`.replies`: the instant check's short words for a verdict;
* :mod:`.class_keys`: the course's reference data and the store of each student's key;
* :mod:`.preprocessor`: the nbgrader preprocessor that judges a notebook's answers and records each verdict.

This package re-exports their public names, so ``from rbtutor.grading.judge import judge`` keeps working.
The preprocessor's names are imported when first asked for: it needs nbgrader, which the book's kernel on
the hub lacks, and the book's notes page reads the verdicts' messages there (``hubctl.place_book`` checks).
"""

from .class_keys import (
    VARIANTS_FILE,
    class_keys_folder,
    course_reference,
    problems_answered,
    stored_class_keys,
    stored_variant,
    write_class_keys,
)
from .replies import CHECK_REPLIES, check_reply
from .verdicts import (
    ERRATA_PAGE,
    GENERIC_MISTAKES,
    KNOWN_CONSTANTS,
    MESSAGES,
    PUBLISHED_KEY,
    RULES,
    VERDICT_KEY,
    Verdict,
    generic_slips,
    judge,
    not_accepted,
    read_published,
)

__all__ = [
    "CHECK_REPLIES", "ERRATA_PAGE", "GENERIC_MISTAKES", "KNOWN_CONSTANTS", "MESSAGES", "PUBLISHED_KEY", "RULES",
    "VARIANTS_FILE", "VERDICT_KEY", "JudgeAnswers", "Verdict", "check_reply", "class_keys_folder", "course_reference",
    "forget_verdict", "generic_slips", "judge", "not_accepted", "problems_answered", "read_published",
    "recorded_verdict",
    "stored_class_keys", "stored_variant", "write_class_keys",
]


_PREPROCESSOR_NAMES = ("JudgeAnswers", "forget_verdict", "recorded_verdict")


def __getattr__(name: str):
    """The preprocessor's names, imported on first use (see the module docstring)."""
    if name in _PREPROCESSOR_NAMES:
        from . import preprocessor  # deferred: nbgrader is not in the book's kernel

        return getattr(preprocessor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
