"""Imported, last of :data:`rbtutor.course.grade.WORKER_MODULES`, by the process the grading
workers are forked from (the grading process itself, or multiprocessing's fork server, see
:func:`rbtutor.course.grade.worker_pool`): it does once, before the fork, what each worker's first
notebook would otherwise do for itself, so that every worker starts with it done.

Measured on a worker's first notebook against its second (class of 30, 2026-12-04): about
0.35 CPU s more, spent on IPython's path module (jupyter_client's kernel-spec lookup loads it,
and IPython's core with it), nbformat's compiled schema validator, the published answer key
read from YAML, pygments' Python lexer, and the feedback page's first Markdown and MathML.

In the fork server it also makes the server's end quick: when the grading run is over, the server
leaves with ``os._exit`` instead of tearing down nbgrader, numpy and the rest one module at a time
(0.5 CPU s and as many seconds at the end of every run), as the kernel zygote does; it has nothing
to flush or close. Imported anywhere else, the module leaves the process's end alone.

Each step is an optimisation only: a step that fails is skipped here (the worker then does it
itself, where a failure is reported with the submission it belongs to), because an exception
at import would stop the fork server and with it every worker.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from multiprocessing import forkserver

import IPython.paths  # noqa: F401 - jupyter_client's kernelspec imports it at the first kernel start
import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from ..grading.feedback import render_feedback
from ..grading.judge import read_published
from ..problems import PUBLISHED_KEY


def _sample_notebook():
    """A notebook with what every graded one has: Markdown with math, code, an error output."""
    code = new_code_cell("x = 1.0\nhand_in('p1.a.I_O', x)", execution_count=1)
    code.outputs = [new_output("error", ename="AnswerNotAccepted", evalue="no", traceback=["no"])]
    return new_notebook(cells=[new_markdown_cell("The mass $m = 1$ and $$I = \\frac{m}{2}$$."), code])


def warm() -> None:
    """Fill the caches a grading worker fills on its first notebook."""
    steps = (lambda: nbformat.validate(new_notebook()),  # as nbformat.read does
             lambda: nbformat.validate(new_notebook(), relax_add_props=True),  # as nbconvert's exporter does
             lambda: read_published(str(PUBLISHED_KEY)),
             lambda: render_feedback(_sample_notebook(), {}, title="warm-up"))
    for step in steps:
        with contextlib.suppress(Exception):  # an optimisation only: see the module's docstring
            step()


def _imported_by_fork_server() -> bool:
    """Whether multiprocessing's fork server is importing this module (its preload)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False


warm()
IN_FORK_SERVER = _imported_by_fork_server()
if IN_FORK_SERVER:
    atexit.register(os._exit, 0)  # registered last, so run first: see the module's docstring
