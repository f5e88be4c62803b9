"""Beside the steps: the instructor's source notebooks, read once per process.

Every submission of an assignment meets the same source notebooks twice: the intake compares it
with them (:mod:`.intake.copies`) and the grader's notes are taken from them
(:mod:`.grader_notes`). A grading worker grades many submissions, so it reads each source file
once, and again only when the file changes (another inode, size, modification or change time).

The notebook returned is shared by every caller in the process: read it, never change it.
"""

from __future__ import annotations

import os
from functools import lru_cache

import nbformat

__all__ = ["source_notebook"]


def source_notebook(path: str | os.PathLike) -> nbformat.NotebookNode:
    """The instructor's notebook at ``path`` (nbformat 4), read once per process while it is unchanged.

    Parsing and validating a source notebook took 2.0-2.6 CPU ms (problem03 and problem10,
    2026-12-07), twice for each submission graded.

    Raises
    ------
    OSError
        ``path`` cannot be read.
    """
    facts = os.stat(path)
    return _read(os.fspath(path), facts.st_ino, facts.st_size, facts.st_mtime_ns, facts.st_ctime_ns)


@lru_cache(maxsize=64)
def _read(path: str, inode: int, size: int, modified: int, changed: int) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)
