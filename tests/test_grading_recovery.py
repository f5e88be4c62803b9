"""Nothing is lost: an interrupted grading run can be run again, and an ungradable submission is listed.

A small class of Problem 3 (two honest students and one whose notebook is not even
JSON) is graded three ways: a run killed part-way and then re-run, and a clean run
in a copy. The re-run completes, gives the same grades as the clean run, keeps the
gradebook backup, and lists the broken submission with its reason while the others
are graded.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import pytest
from test_assignments import ROOT, answered, grade_of, new_course, run_course, submit_as

from rbtutor.course import api

NAME = "problem03"
GRADED = ("p3_b_K", "p3_c_phi_rad", "p3_c_phi_deg", "p3_d_K", "p3_d_phi_deg")


@pytest.fixture(scope="module")
def small_class(tmp_path_factory):
    if not (ROOT / "exercises" / NAME).is_dir():
        pytest.skip("Problem 3 is not among the assignments")
    tmp = tmp_path_factory.mktemp("recovery")
    course = new_course(tmp)
    assert run_course(course, "generate").returncode == 0
    grader = api(course)
    assert grader.release_assignment(NAME)["success"]
    source = course / "exercises" / NAME / f"{NAME}.ipynb"
    for student in ("ann", "ben"):
        submit_as(course, student, NAME, lambda nb: answered(nb, source))
    submit_as(course, "broken", NAME, lambda nb: nb)
    assert grader.collect(NAME)["success"]
    (course / "submitted" / "broken" / NAME / f"{NAME}.ipynb").write_text("this is not a notebook {")
    return course


def test_interrupted_run_can_be_rerun(small_class, tmp_path):
    clean = tmp_path / "clean"
    shutil.copytree(small_class, clean)
    reference = run_course(clean, "grade")

    proc = subprocess.Popen([sys.executable, "-m", "rbtutor.course", "grade", "--root", str(small_class)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(4.0)  # part-way: the first kernels are running
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    rerun = run_course(small_class, "grade")

    for result in (reference, rerun):
        assert result.returncode == 1, "the broken submission must make the run report a failure"
        assert f"could not grade broken {NAME}" in result.stderr
    assert (small_class / "gradebook.db.bak").exists()
    for student in ("ann", "ben"):
        for grade_id in GRADED:
            assert grade_of(small_class, NAME, student, grade_id) == grade_of(clean, NAME, student, grade_id)
            score, max_score = grade_of(small_class, NAME, student, grade_id)
            assert score == max_score > 0
    assert "broken" in (small_class / "grades.csv").read_text() or "broken" in rerun.stderr
