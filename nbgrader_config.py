"""nbgrader configuration of this course folder: all of it is in rbtutor.course.nbgrader.configure."""

from pathlib import Path

from rbtutor.course.nbgrader import configure

configure(get_config(), Path(__file__).resolve().parent)  # noqa: F821 - get_config is provided by nbgrader
