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

from rbtutor.course import api, late
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


#: one entry whose anchors and aliases stand for thousands of items (9 * 9 * 9 * 9 in the last list)
ALIAS_BOMB = ("problem03: {due: 2030-03-01T12:00:00+01:00, extensions: [&a [x, x, x, x, x, x, x, x, x],\n"
              "  &b [*a, *a, *a, *a, *a, *a, *a, *a, *a], &c [*b, *b, *b, *b, *b, *b, *b, *b, *b],\n"
              "  [*c, *c, *c, *c, *c, *c, *c, *c, *c]]}\n")
EXTENDED = "problem03: {{due: {due}, extensions: {{s1: {extension}}}}}\n"
#: the longest message a refusal may print: one line a person reads
SHORT = 400


@pytest.mark.parametrize(("text", "message"), [
    ("problem03: 2030-03-01T12:00:00\n", "time zone"),       # no zone
    ("problem03: 2030-03-01\n", "time zone"),                # a date only
    ("problem03: next friday\n", "time zone"),
    ("problem99: 2030-03-01T12:00:00+01:00\n", "no assignment"),
    ("- problem03\n", "mapping"),
    # times the gradebook cannot hold, and extensions that take a time past them
    (EXTENDED.format(due="2030-03-01T12:00:00+01:00", extension="99999999999d"),
     r"problem03's extension for s1 to end before the year 10000 .* got '99999999999d'"),
    (EXTENDED.format(due="2030-03-01T12:00:00+01:00", extension="9" * 400 + "h"),
     "problem03's extension for s1 to end before the year 10000"),
    (EXTENDED.format(due="9999-12-30T12:00:00+00:00", extension="3d"),
     "problem03's extension for s1 to end before the year 10000 .* got '3d'"),
    ("problem03: 0001-01-01T00:00:00+01:00\n", "problem03's due date between the years 1 and 9999 in UTC"),
    ("problem03: 9999-12-31T23:00:00-05:00\n", "problem03's due date between the years 1 and 9999 in UTC"),
    ("problem03: 2030-02-31T12:00:00+01:00\n", "problem03's due date as a date and time"),  # no such day
    ("problem03: 2030-03-01T12:00:00+25:00\n", "problem03's due date as a date and time"),  # no such zone
    # YAML that costs more than its size, or hides what the instructor wrote
    (ALIAS_BOMB, "line 1: anchors and aliases"),
    ("problem03: !!str 2030-03-01T12:00:00+01:00\n", "line 1: tags"),
    ("problem03: " + "[" * 20 + "]" * 20 + "\n", "nested at most"),
    ("problem03: [" + ", ".join(["a"] * (late.MAX_TOKENS // 2 + 1)) + "]\n", f"at most {late.MAX_TOKENS} YAML items"),
    ("problem03: 2030-03-01T12:00:00+01:00\n#" + "x" * late.MAX_FILE_BYTES + "\n", "KiB"),
    (EXTENDED.format(due="2030-03-01T12:00:00+01:00", extension="3d, s1: 4d"), "line 1: 's1' is written twice"),
    ("problem03: [\n", "line 2: expected YAML"),
    ("? [problem03]\n: 2030-03-01T12:00:00+01:00\n", "line 1: expected a name as key"),
])
def test_bad_due_dates_are_refused(tmp_path, text, message):
    with pytest.raises(ValueError, match=message) as refused:
        read_due_dates(CourseLayout(course_with(tmp_path, text)))
    assert len(str(refused.value)) < SHORT + len(str(tmp_path)), str(refused.value)[:2000]


def test_a_due_dates_file_that_is_not_utf8_is_refused(tmp_path):
    course = course_with(tmp_path, None)
    (course / "exercises" / "due_dates.yaml").write_bytes(b"problem03: 2030-03-01T12:00:00+01:00 \xff\n")
    with pytest.raises(ValueError, match="expected UTF-8 text"):
        read_due_dates(CourseLayout(course))


def test_student_ids_are_read_as_written(tmp_path):
    """Unquoted matriculation numbers are ids, leading zeros and all, never numbers."""
    ids = ["20231234", "0123", "0777", "1_000"]
    extensions = ", ".join(f"{i}: 3d" for i in ids)
    course = course_with(tmp_path, f"problem03: {{due: 2030-03-01T12:00:00+01:00, extensions: {{{extensions}}}}}\n")
    deadline = read_due_dates(CourseLayout(course))["problem03"]
    assert list(deadline.extensions) == ids
    assert {deadline.of(i) for i in ids} == {deadline.due + dt.timedelta(days=3)}


@pytest.mark.parametrize(("text", "named"), [
    (EXTENDED.format(due="2030-03-01T12:00:00+01:00", extension="99999999999d"), "extension for s1"),
    (EXTENDED.format(due="9999-12-30T12:00:00+00:00", extension="3d"), "extension for s1"),
    ("problem03: 0001-01-01T00:00:00+01:00\n", "problem03's due date"),
    (ALIAS_BOMB, "line 1"),
])
def test_grade_refuses_a_bad_due_dates_file_in_one_short_line(tmp_path, text, named):
    """``python -m rbtutor.course grade``: exit status 2 and one short line naming the entry, no traceback."""
    course = course_with(tmp_path, text)
    result = run_course(course, "grade")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert named in result.stderr, result.stderr[-2000:]
    assert len(result.stderr) < SHORT + len(str(course)), result.stderr[:2000]
    assert not (course / "grades.csv").exists()


def test_assign_refuses_a_bad_due_dates_file_as_grade_does(tmp_path):
    """``rbtutor assign`` (generate) also puts the due dates into the gradebook: the same refusal."""
    course = course_with(tmp_path, ALIAS_BOMB)
    result = run_course(course, "generate")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "line 1" in result.stderr
    assert len(result.stderr) < SHORT + len(str(course)), result.stderr[:2000]


def test_grade_takes_numeric_student_ids(tmp_path):
    course = course_with(tmp_path, "problem03: {due: 2030-03-01T12:00:00+01:00, extensions: {20231234: 3d}}\n")
    result = run_course(course, "grade")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "problem03: 20231234 due 2030-03-04T12:00:00+01:00" in result.stdout, result.stdout[-2000:]


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


def test_due_lists_each_due_date_and_extension_as_grading_reads_them(tmp_path):
    """`rbtutor due`: the instructor checks the file before grading: dates in UTC, extensions under them."""
    course = course_with(tmp_path, EXTENDED.format(due="2030-03-01T12:00:00+01:00", extension="3d"))
    result = run_course(course, "due")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["problem03: due 2030-03-01 11:00 UTC, 1 extension(s)",
                                          "  s1: 2030-03-04 11:00 UTC"]
    assert run_course(course, "due", "problem03").stdout == result.stdout
    assert run_course(course, "due", "problem99").returncode == 2
    bad = run_course(course_with(tmp_path / "bad", ALIAS_BOMB), "due")
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "Traceback" not in bad.stderr
