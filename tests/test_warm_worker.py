"""The warm-up of the process grading workers are forked from (rbtutor.course.warm_worker)."""

from __future__ import annotations

import subprocess
import sys

from rbtutor.course import grade, warm_worker


def test_the_fork_server_preloads_the_warm_up_last():
    assert grade.WORKER_MODULES[-1] == "rbtutor.course.warm_worker"


def test_importing_it_fills_the_caches_of_a_first_notebook():
    """In a fresh process, as in the fork server: what the first notebook would load is loaded."""
    probe = """
import sys
import rbtutor.course.warm_worker
from nbformat import validator
from rbtutor.grading.judge import _read_published
print("IPython.paths" in sys.modules, "pygments.lexers.python" in sys.modules,
      sorted(k[-1] for k in validator.validators) == [False, True], _read_published.cache_info().currsize)
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "True", "1"]


def test_a_failing_step_is_skipped_not_raised(monkeypatch):
    """An exception at import would stop the fork server, and every worker with it."""
    def broken(*_, **__):
        raise RuntimeError("no feedback today")

    monkeypatch.setattr(warm_worker, "render_feedback", broken)
    monkeypatch.setattr(warm_worker, "_read_published", broken)
    warm_worker.warm()  # returns
