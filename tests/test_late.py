"""Due dates and the late policy (rbtutor.course.late).

``exercises/due_dates.yaml`` is written into the gradebook by ``generate``; a submission whose
time (when its exchange entry appeared, or the later time in the entry's name; never the
student's ``timestamp.txt``) is after the due date is marked late and penalised by ``PercentPerDay`` as the
course configures it; one before it is not. The policy itself: a share of the score per started
day, never more than the score.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil

import pytest
from test_assignments import ROOT, answered, run_course, submit_as

from rbtutor.course import api
from rbtutor.course.late import PercentPerDay, read_due_dates
from rbtutor.course.layout import CourseLayout

NAME = "problem03"
DUE = "2030-03-01T12:00:00+01:00"  # 11:00 UTC
PERCENT = 20.0


@pytest.mark.parametrize(("seconds_late", "expected"), [
    (0.0, None),                 # on time
    (1.0, 0.2 * 8),              # one second late: one started day
    (86400.0, 0.2 * 8),          # exactly one day
    (86401.0, 0.4 * 8),          # into the second day
    (4.5 * 86400, 8.0),          # five started days: all of it
    (30 * 86400, 8.0),           # never more than the score (never below zero)
])
def test_penalty_per_started_day(seconds_late, expected):
    plugin = PercentPerDay(percent_per_day=PERCENT)
    penalty = plugin.late_submission_penalty("s", 8.0, seconds_late)
    assert penalty == (None if expected is None else pytest.approx(expected))
    assert plugin.late_submission_penalty("s", 0.0, 86400.0) is None  # nothing to take from zero


def test_penalty_share_is_checked():
    with pytest.raises(ValueError, match="between 0 and 100"):
        PercentPerDay(percent_per_day=150).late_submission_penalty("s", 1.0, 10.0)


def course_with(tmp_path, due_dates: str | None):
    course = tmp_path / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    if due_dates is not None:
        (course / "exercises" / "due_dates.yaml").write_text(due_dates)
    return course


@pytest.mark.parametrize(("text", "message"), [
    ("problem03: 2030-03-01T12:00:00\n", "time zone"),       # no zone
    ("problem03: 2030-03-01\n", "time zone"),                # a date only
    ("problem03: next friday\n", "time zone"),
    ("problem99: 2030-03-01T12:00:00+01:00\n", "no assignment"),
    ("- problem03\n", "mapping"),
])
def test_bad_due_dates_are_refused(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_due_dates(CourseLayout(course_with(tmp_path, text)))


def test_no_file_means_no_change(tmp_path):
    assert read_due_dates(CourseLayout(course_with(tmp_path, None))) is None


@pytest.fixture(scope="module")
def graded_late(tmp_path_factory):
    if not (ROOT / "exercises" / NAME).is_dir():
        pytest.skip("Problem 3 is not among the assignments")
    course = course_with(tmp_path_factory.mktemp("late"), f"{NAME}: {DUE}\n")
    with (course / "nbgrader_config.py").open("a") as config:
        config.write(f"\nget_config().PercentPerDay.percent_per_day = {PERCENT}  # noqa: F821\n")
    generated = run_course(course, "generate")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert f"{NAME}: due {dt.datetime.fromisoformat(DUE).isoformat()}" in generated.stdout
    assert api(course).release_assignment(NAME)["success"]
    source = course / "exercises" / NAME / f"{NAME}.ipynb"
    for student in ("early", "late"):
        submit_as(course, student, NAME, lambda nb: answered(nb, source))
    # entries as nbgrader's submit would have named them at these times (UTC): an hour before the
    # due date; two days and an hour after. The time in the name counts, being later than the
    # moment the entry appeared (the test runs before 2030); the student's timestamp.txt does not.
    inbound = course / "exchange" / "rbtutor" / "inbound"
    for student, when in (("early", "2030-03-01 10:00:00.000000 UTC"), ("late", "2030-03-03 12:00:00.000000 UTC")):
        (entry,) = inbound.glob(f"{student}+{NAME}+*")
        entry.rename(inbound / f"{student}+{NAME}+{when}+{entry.name.rsplit('+', 1)[1]}")
    (inbound.glob(f"late+{NAME}+*").__next__() / "timestamp.txt").write_text("2030-03-01 10:00:00.000000 UTC")
    taken = run_course(course, "collect", NAME)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    result = run_course(course, "grade")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return course


def test_due_date_is_in_the_gradebook(graded_late):
    with api(graded_late).gradebook as gradebook:
        assert gradebook.find_assignment(NAME).duedate == dt.datetime(2030, 3, 1, 11, 0, 0)


def test_late_submission_is_marked_and_penalised(graded_late):
    with api(graded_late).gradebook as gradebook:
        early = gradebook.find_submission(NAME, "early")
        late = gradebook.find_submission(NAME, "late")
        assert early.total_seconds_late == 0
        assert early.late_submission_penalty == 0
        assert late.total_seconds_late == 2 * 86400 + 3600
        assert late.score == early.score > 0  # the same right answers
        # three started days at 20 % each
        assert late.late_submission_penalty == pytest.approx(0.6 * late.score)
    rows = {r["student"]: r for r in csv.DictReader((graded_late / "grades.csv").open())}
    assert float(rows["early"]["late_penalty"]) == 0
    # the late student's rewritten timestamp.txt (an on-time claim) is named and changed nothing
    report = {e["student"]: e for e in json.loads((graded_late / "integrity_report.json").read_text())}
    assert any(e["kind"] == "timestamp_mismatch" and e["claimed"] == "2030-03-01 10:00:00.000000 UTC"
               for e in report["late"]["events"])
    assert float(rows["early"]["final_score"]) == float(rows["early"]["score"])
    assert float(rows["late"]["final_score"]) == pytest.approx(0.4 * float(rows["late"]["score"]), abs=1e-4)


def test_removing_a_due_date(graded_late, tmp_path):
    """The file is the whole truth: an assignment it no longer lists has no due date."""
    course = tmp_path / "course"
    shutil.copytree(graded_late, course)
    (course / "exercises" / "due_dates.yaml").write_text("{}\n")
    generated = run_course(course, "generate")
    assert generated.returncode == 0, generated.stderr
    assert f"{NAME}: no due date" in generated.stdout, generated.stderr
    with api(course).gradebook as gradebook:
        assert gradebook.find_assignment(NAME).duedate is None
