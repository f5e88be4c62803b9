"""Nothing is lost: an interrupted grading run can be run again, and a broken submission is still graded.

A small class of Problem 3 (two honest students and one whose notebook is not even
JSON) is graded twice: a run interrupted right after its first submission and then
re-run, and a clean run in a copy. The re-run completes and gives the same grades as
the clean run and keeps the gradebook backup; the broken notebook is refused by the
intake, graded as the blank release (zero), and named in the integrity report.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

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


def ended(proc: subprocess.Popen) -> tuple[str, str]:
    """The output of an interrupted run once it has ended; killed after 120 s (a safety net: it stops
    after the submissions in hand)."""
    try:
        return proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()


def test_interrupted_run_can_be_rerun(small_class, tmp_path):
    clean = tmp_path / "clean"
    shutil.copytree(small_class, clean)
    reference = run_course(clean, "grade")

    # one worker; a Ctrl-C (SIGINT to the process group, as a terminal sends it) as soon as the run
    # says it starts: it stops after the submission being graded, and writes nothing of its end
    proc = subprocess.Popen([sys.executable, "-m", "rbtutor.course", "grade", "--jobs", "1",
                             "--root", str(small_class)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    said = proc.stdout.readline()
    assert said.startswith("grading 3 submissions with 1 worker"), said
    os.killpg(proc.pid, signal.SIGINT)
    out, err = ended(proc)
    assert proc.returncode == 130, out + err
    assert "stopping after the submissions being graded now" in err, err
    assert "stopped by Ctrl-C after 1 of 3 submissions; grades.csv and the reports were not written" in err, err
    assert [line.split()[0] for line in out.splitlines() if line.startswith("[")] == ["[1/3]"], out
    rerun = run_course(small_class, "grade")

    for result in (reference, rerun):
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert "graded 3 submissions" in result.stdout
    assert (small_class / "gradebook.db.bak").exists()
    for student in ("ann", "ben", "broken"):
        for grade_id in GRADED:
            assert grade_of(small_class, NAME, student, grade_id) == grade_of(clean, NAME, student, grade_id)
            score, max_score = grade_of(small_class, NAME, student, grade_id)
            assert score == (max_score if student != "broken" else 0)
            assert max_score > 0
    # the unreadable notebook is graded as the blank release (zero) and named, with what was seen
    report = json.loads((small_class / "integrity_report.json").read_text())
    broken = next(e for e in report if e["student"] == "broken")
    assert "notebook_unreadable" in {e["kind"] for e in broken["events"]}


def test_ctrl_c_stops_a_pool_of_workers_and_a_second_one_at_once(small_class, tmp_path):
    """With workers, a Ctrl-C reaches them too (one process group) but only the grading process acts on it:
    the run stops after the notebooks in hand (exit 130). A second Ctrl-C ends it with KeyboardInterrupt."""
    for interrupts, status in ((1, 130), (2, None)):
        course = tmp_path / f"course{interrupts}"
        shutil.copytree(small_class, course, symlinks=True)
        proc = subprocess.Popen([sys.executable, "-m", "rbtutor.course", "grade", "--jobs", "2", "--root", str(course)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        said = proc.stdout.readline()
        assert said.startswith("grading 3 submissions with 2 workers"), said
        os.killpg(proc.pid, signal.SIGINT)
        if interrupts == 2:
            for line in proc.stderr:  # the first is acknowledged before the second is sent
                if "stopping after the submissions being graded now" in line:
                    break
            os.killpg(proc.pid, signal.SIGINT)
        out, err = ended(proc)
        assert "graded 3 submissions" not in out, out
        if status is not None:
            assert proc.returncode == status, out + err
            assert err.count("stopping after the submissions being graded now") == 1, err
            assert "stopped by Ctrl-C after " in err, err
        else:
            assert proc.returncode not in (0, 130), out + err
            assert "KeyboardInterrupt" in err, err


def test_regrading_keeps_hand_grading_and_shows_overrides(small_class, tmp_path):
    """A written part graded by hand stays graded after `make grade` runs again; grades.csv says what
    is left to grade, and an autograded score changed by hand is listed, not hidden."""
    import csv

    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    shutil.copytree(small_class, course)
    assert run_course(course, "grade").returncode == 0
    url = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(url) as gradebook:  # what the Formgrader does when a grader saves a score
        written = [g for g in gradebook.find_submission(NAME, "ann").notebooks[0].grades if g.needs_manual_grade]
        assert written, "Problem 3 has written parts to grade by hand"
        written[0].manual_score = written[0].max_score
        auto = gradebook.find_grade("p3_b_K", NAME, NAME, "ann")
        auto.manual_score = 0.5
        gradebook.db.commit()
        name, left = written[0].name, len(written) - 1
    assert run_course(course, "grade").returncode == 0
    with Gradebook(url) as gradebook:
        grade = gradebook.find_grade(name, NAME, NAME, "ann")
        assert not grade.needs_manual_grade
        assert grade.score == grade.max_score
    rows = {r["student"]: r for r in csv.DictReader((course / "grades.csv").open())}
    assert rows["ann"]["written_parts"] == (f"to grade ({left})" if left else "done")
    assert rows["ann"]["overridden"] == "p3_b_K 2->0.5"
    assert rows["ben"]["overridden"] == ""


def _rows(course):
    import csv

    return {(r["student"], r["assignment"]): r for r in csv.DictReader((course / "grades.csv").open())}


def test_a_submission_not_graded_holds_no_points_anywhere_until_it_is(small_class, tmp_path):
    """A step that fails after the scores were recorded (here the feedback page, whose folder cannot
    be made) leaves the submission NOT GRADED in the gradebook, grades.csv and both reports alike,
    keeps its hand grades, and the next run grades it again."""
    from nbgrader.api import Gradebook, MissingEntry

    course = tmp_path / "course"
    shutil.copytree(small_class, course)
    assert run_course(course, "grade").returncode == 0
    url = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(url) as gradebook:  # a grader scores a written part of ann's in the Formgrader
        written = next(g for g in gradebook.find_submission(NAME, "ann").notebooks[0].grades
                       if g.needs_manual_grade)
        written.manual_score = written.max_score
        gradebook.find_comment(written.name, NAME, NAME, "ann").manual_comment = "well argued"
        gradebook.db.commit()
        part, points = written.name, written.max_score

    shutil.rmtree(course / "feedback" / "ann")
    (course / "feedback" / "ann").write_text("in the way")  # ann's feedback folder cannot be made
    failed = run_course(course, "grade")
    assert failed.returncode == 1
    assert "could not grade ann problem03: feedback:" in failed.stderr
    assert "ann problem03: NOT GRADED" in failed.stdout
    assert any(line.startswith("[1/3]") and line.endswith(" left)") for line in failed.stdout.splitlines())
    with Gradebook(url) as gradebook:
        with pytest.raises(MissingEntry):
            gradebook.find_submission(NAME, "ann")
        assert gradebook.find_submission(NAME, "ben").score > 0  # the others are graded
    rows = _rows(course)
    assert (rows["ann", NAME]["score"], rows["ann", NAME]["written_parts"]) == ("", "not graded")
    assert rows["ben", NAME]["written_parts"] != "not graded"
    assert not (course / "autograded" / "ann" / NAME).exists()
    report = json.loads((course / "integrity_report.json").read_text())
    ann = [e for r in report if r["student"] == "ann" for e in r["events"]]
    assert any(e["kind"] == "not_graded" and "feedback" in e["message"] for e in ann)
    page = (course / "report" / "index.html").read_text()
    assert "feedback:" in page  # the class report names it with its reason

    (course / "feedback" / "ann").unlink()
    again = run_course(course, "grade")
    assert again.returncode == 0, again.stderr[-2000:]
    rows = _rows(course)
    assert rows["ann", NAME]["written_parts"] != "not graded"
    assert float(rows["ann", NAME]["score"]) > 0
    with Gradebook(url) as gradebook:
        grade = gradebook.find_grade(part, NAME, NAME, "ann")
        assert (grade.manual_score, grade.needs_manual_grade) == (points, False)
        assert gradebook.find_comment(part, NAME, NAME, "ann").manual_comment == "well argued"
    assert not (course / "integrity" / "ann" / NAME / "_not_graded.json").exists()
    report = json.loads((course / "integrity_report.json").read_text())
    assert not [e for r in report if r["student"] == "ann" for e in r["events"] if e["kind"] == "not_graded"]
