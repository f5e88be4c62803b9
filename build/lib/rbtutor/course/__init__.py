"""The course on disk: its layout (:mod:`.layout`), the notebook renderer (:mod:`.render`), nbgrader's
configuration (:mod:`.nbgrader`), the instructor's loop over the class (:mod:`.grade`) and one command
line (:mod:`.cli`, ``python -m rbtutor.course``)."""

from .layout import CourseError, CourseLayout
from .nbgrader import api

__all__ = ["CourseError", "CourseLayout", "api"]
