"""Extensions and moved deadlines (rbtutor.course.late, the deadline step of a grading run).

A class of three hands Problem 3 in: ``early`` before the due date, ``extended`` and
``classmate`` at the same moment after it, ``extended`` with an extension in
``exercises/due_dates.yaml``. Graded for real: the extended student is not penalised, the
classmate is. Then the deadline moves and the extension changes, ``grade`` runs again, and
every penalty follows the new file, grades.csv naming each change and its reason. The
expected penalties are worked out here from the times and the policy of
:class:`rbtutor.course.late.PercentPerDay`, never written down. The file's checks, the
gradebook's per-submission extension and the student's own due date in the opening cell of
the fetched notebook are tested too.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import os
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
from postgres import postgres_server  # noqa: F401 - the fixture
from test_assignments import ROOT, answered, run_course, submit_as
from test_late import course_with

from rbtutor.course import api
from rbtutor.course.late import DUE_LINE, parse_due_dates, read_due_dates, show_due_date
from rbtutor.course.layout import CourseLayout
from rbtutor.course.trial import exchange_config

NAME = "problem03"
PERCENT = 20.0
DUE = dt.datetime.fromisoformat("2030-03-01T12:00:00+01:00")
HANDED_IN = {  # when each entry appeared, as its name says (UTC)
    "early": dt.datetime(2030, 3, 1, 10, 0, tzinfo=dt.UTC),
    "extended": dt.datetime(2030, 3, 3, 12, 0, tzinfo=dt.UTC),
    "classmate": dt.datetime(2030, 3, 3, 12, 0, tzinfo=dt.UTC),
}
FIRST = f"""{NAME}:
  due: {DUE.isoformat()}
  extensions:
    extended: 3d
    ghost: 2030-03-05T12:00:00+01:00
"""
MOVED_DUE = DUE + dt.timedelta(days=1)
MOVED_EXTENSION = dt.datetime.fromisoformat("2030-03-03T12:30:00+01:00")  # 30 min before it was handed in
MOVED = f"""{NAME}:
  due: {MOVED_DUE.isoformat()}
  extensions: {{extended: {MOVED_EXTENSION.isoformat()}}}
"""


def expected_penalty(score: float, handed_in: dt.datetime, due: dt.datetime) -> float:
    """The policy of PercentPerDay: PERCENT % of the score per started day late, at most the score."""
    late = (handed_in - due).total_seconds()
    if late <= 0:
        return 0.0
    return min(score, score * math.ceil(late / 86400) * PERCENT / 100)


def rows(course) -> dict[str, dict]:
    with (course / "grades.csv").open() as handle:
        return {r["student"]: r for r in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """The class graded once under FIRST; returns the course, the first grading's rows and its output."""
    if not (ROOT / "exercises" / NAME).is_dir():
        pytest.skip("Problem 3 is not among the assignments")
    course = course_with(tmp_path_factory.mktemp("extensions"), FIRST)
    with (course / "nbgrader_config.py").open("a") as config:
        config.write(f"\nget_config().PercentPerDay.percent_per_day = {PERCENT}  # noqa: F821\n")
    generated = run_course(course, "generate")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert api(course).release_assignment(NAME)["success"]
    source = course / "exercises" / NAME / f"{NAME}.ipynb"
    inbound = course / "exchange" / "rbtutor" / "inbound"
    for student, when in HANDED_IN.items():
        submit_as(course, student, NAME, lambda nb: answered(nb, source))
        (entry,) = inbound.glob(f"{student}+{NAME}+*")
        stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
        entry.rename(inbound / f"{student}+{NAME}+{stamp}+{entry.name.rsplit('+', 1)[1]}")
    taken = run_course(course, "collect", NAME)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    result = run_course(course, "grade")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return course, rows(course), result.stdout


def test_the_extended_student_is_not_penalised_and_the_classmate_is(graded_class):
    _course, first, _ = graded_class
    score = float(first["classmate"]["score"])
    assert score > 0
    assert float(first["extended"]["score"]) == score == float(first["early"]["score"])
    assert float(first["extended"]["late_penalty"]) == expected_penalty(score, HANDED_IN["extended"],
                                                                         DUE + dt.timedelta(days=3)) == 0
    classmate = expected_penalty(score, HANDED_IN["classmate"], DUE)
    assert classmate > 0
    assert float(first["classmate"]["late_penalty"]) == pytest.approx(classmate, abs=1e-4)
    assert float(first["classmate"]["final_score"]) == pytest.approx(score - classmate, abs=1e-4)
    assert float(first["early"]["late_penalty"]) == 0
    assert not any(r["late_change"] for r in first.values())  # graded for the first time: no change


def test_each_student_s_own_due_date_is_in_the_gradebook_and_grades_csv(graded_class):
    course, first, _ = graded_class
    with api(course).gradebook as gradebook:
        extended = gradebook.find_submission(NAME, "extended")
        classmate = gradebook.find_submission(NAME, "classmate")
        assert extended.extension == dt.timedelta(days=3)
        assert classmate.extension is None
        utc = DUE.astimezone(dt.UTC).replace(tzinfo=None)
        assert (extended.duedate, classmate.duedate) == (utc + dt.timedelta(days=3), utc)
    assert first["extended"]["due"] == f"{DUE.astimezone(dt.UTC) + dt.timedelta(days=3):%Y-%m-%d %H:%M:%S} UTC"
    assert first["classmate"]["due"] == f"{DUE.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"


@pytest.mark.parametrize(("late", "text"), [
    (dt.timedelta(seconds=30), "late by less than a minute"),
    (dt.timedelta(minutes=40, seconds=59), "late by 40 min"),
    (dt.timedelta(days=1, hours=2, minutes=5, microseconds=7), "late by 1 day 2 h 5 min"),
    (dt.timedelta(days=2, hours=3), "late by 2 days 3 h"),
])
def test_the_grader_s_note_writes_durations_as_people_do(late, text):
    from rbtutor.grading.grader_notes import due_date_note

    due = dt.datetime(2030, 3, 1, 12)
    source = due_date_note(due, dt.timedelta(days=3), due + late).source
    assert "an extension of 3 days on the class's 2030-02-26 12:00 UTC" in source, source
    assert f"{text}." in source, source
    assert ":00:00" not in source, source  # never a timedelta's own str()
    assert "on time" in due_date_note(due, None, due).source


def test_the_formgrader_shows_each_student_s_own_due_date(graded_class):
    """The notebook the Formgrader shows (autograded/) opens with a grader's note of the student's own
    due date and submission time; the student's feedback page leaves it out."""
    from rbtutor.grading.grader_notes import is_grader_note

    course, *_ = graded_class
    utc = DUE.astimezone(dt.UTC)
    for student, due in (("extended", utc + dt.timedelta(days=3)), ("classmate", utc)):
        nb = nbformat.read(course / "autograded" / student / NAME / f"{NAME}.ipynb", as_version=4)
        note = nb.cells[0]
        assert is_grader_note(note), note
        assert f"due for this student {due:%Y-%m-%d %H:%M} UTC" in note.source
        submitted = HANDED_IN[student].astimezone(dt.UTC)
        assert f"submitted {submitted:%Y-%m-%d %H:%M} UTC" in note.source
        assert ("late by" in note.source) == (submitted > due), note.source
        assert ("an extension of 3 days on the class's" in note.source) == (student == "extended"), note.source
        assert sum("due for this student" in c.source for c in nb.cells) == 1
        page = (course / "feedback" / student / NAME / f"{NAME}.html").read_text()
        assert "due for this student" not in page

def test_an_extension_for_a_student_not_in_the_gradebook_is_reported(graded_class):
    *_, output = graded_class
    assert "ghost due 2030-03-05T12:00:00+01:00 (no such student in the gradebook yet)" in output


def test_a_moved_deadline_changes_the_penalties_of_graded_work(graded_class, tmp_path):
    import shutil

    course = tmp_path / "course"
    shutil.copytree(graded_class[0], course, symlinks=True)
    (course / "exercises" / "due_dates.yaml").write_text(MOVED)
    result = run_course(course, "grade")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    before, after = graded_class[1], rows(course)
    score = float(after["classmate"]["score"])
    for student, own_due in (("classmate", MOVED_DUE), ("extended", MOVED_EXTENSION), ("early", MOVED_DUE)):
        old, new = float(before[student]["late_penalty"]), expected_penalty(score, HANDED_IN[student], own_due)
        assert float(after[student]["late_penalty"]) == pytest.approx(new, abs=1e-4), student
        if math.isclose(old, new):
            assert after[student]["late_change"] == "", student
        else:
            assert after[student]["late_change"].startswith(f"{old:g} -> {new:g}: "), after[student]
            assert f"late penalty changed: {student} {NAME} {old:g} -> {new:g}" in result.stdout
    assert float(after["extended"]["late_penalty"]) > 0  # handed in after the new, earlier extension
    assert "due date moved from 2030-03-01 11:00:00 UTC to 2030-03-02 11:00:00 UTC" in after["classmate"]["late_change"]
    assert "extension to 2030-03-03 11:30:00 UTC" in after["extended"]["late_change"]


def fetch_with_due_dates(course, student: str):
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory

    from rbtutor.course.personal import PersonalFetchAssignment

    home = course.parent / "fetched" / student
    home.mkdir(parents=True)
    config = exchange_config(course, home)
    config.PersonalFetchAssignment.due_dates_file = str(course / "exercises" / "due_dates.yaml")
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id, coursedir.student_id = NAME, student
    PersonalFetchAssignment(coursedir=coursedir, authenticator=Authenticator(config=config), config=config).start()
    return nbformat.read(home / NAME / f"{NAME}.ipynb", as_version=4)


def test_the_fetched_notebook_shows_the_student_s_own_due_date(graded_class):
    course = graded_class[0]
    own = DUE + dt.timedelta(days=3)
    extended = fetch_with_due_dates(course, "extended").cells[0].source
    classmate = fetch_with_due_dates(course, "classmate").cells[0].source
    for text, when, note in ((extended, own, "your extended due date"), (classmate, DUE, None)):
        (line,) = [x for x in text.split("\n") if x.startswith(DUE_LINE)]
        assert when.strftime("%d %B %Y, %H:%M") in line, line
        assert "(+01:00)" in line, line
        assert (note in line) if note else ("extended" not in line)
    assert text.startswith("# Problem 3")  # after the heading, the rest unchanged


def test_the_due_date_line_is_replaced_and_removed_cleanly():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title\n\nText.")])
    assert show_due_date(nb, DUE)
    assert nb.cells[0].source.count(DUE_LINE) == 1
    assert show_due_date(nb, DUE + dt.timedelta(days=1), extended=True)
    assert nb.cells[0].source.count(DUE_LINE) == 1
    assert "extended" in nb.cells[0].source
    assert show_due_date(nb, None)
    assert nb.cells[0].source == "# Title\n\nText."


@pytest.mark.parametrize(("text", "message"), [
    (f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, extensions: {{s1: 2030-02-28T12:00:00+01:00}}}}\n",
     re.escape("expected problem03's extension for s1 no earlier than the due date 2030-03-01T12:00:00+01:00, "
               "got 2030-02-28T12:00:00+01:00")),
    (f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, deadline: 2030-03-02T12:00:00+01:00}}\n",
     re.escape("expected problem03 to have the keys due and (optionally) extensions, got due, deadline")),
    (f"{NAME}: {{extensions: {{s1: 3d}}}}\n", "expected problem03 to have the keys due"),
    (f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, extensions: {{s1: 3 days}}}}\n",
     "expected problem03's extension for s1 as a later date and time .* or time added as Nd or Nh .* got '3 days'"),
    (f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, extensions: {{s1: 0d}}}}\n",
     "expected problem03's extension for s1 as a positive number of days or hours"),
    (f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, extensions: {{s1: 3}}}}\n",
     "expected problem03's extension for s1 as a date and time with its time zone.* got 3"),
    (f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, extensions: {{'../s1': 3d}}}}\n",
     r"problem03's extensions: expected a student id, got '\.\./s1'"),
    (f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, extensions: {{reference: 3d}}}}\n",
     "problem03's extensions: expected a student id, got 'reference'"),
    (f"{NAME}: {{due: 2030-03-01T12:00:00, extensions: {{s1: 3d}}}}\n",
     "expected problem03's due date as a date and time with its time zone"),
    (f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, extensions: {{s1: 2030-03-05T12:00:00}}}}\n",
     "expected problem03's extension for s1 as a date and time with its time zone"),
    (f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, extensions: [s1]}}\n",
     "expected problem03's extensions as a mapping of student id"),
])
def test_bad_extensions_are_refused(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_due_dates(CourseLayout(course_with(tmp_path, text)))


def test_a_bad_file_stops_grading_before_anything_is_graded(tmp_path):
    course = course_with(tmp_path, f"{NAME}: {{due: 2030-03-01T12:00:00+01:00, extensions: {{s1: soon}}}}\n")
    result = run_course(course, "grade")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "got 'soon'" in result.stderr, result.stdout + result.stderr
    assert not (course / "grades.csv").exists()


def test_both_forms_and_both_durations(tmp_path):
    path = tmp_path / "due_dates.yaml"
    path.write_text(f"{NAME}: 2030-03-01T12:00:00+01:00\nproblem04:\n  due: 2030-03-08T12:00:00+01:00\n"
                    "  extensions: {s1: 36h, s2: 1.5d, s3: 2030-03-09T00:00:00Z, s5: 2030-03-09 01:00:00 +1}\n")
    deadlines = parse_due_dates(path)
    assert deadlines[NAME].due == DUE
    assert deadlines[NAME].extensions == {}
    later = deadlines["problem04"]
    assert later.of("s1") == later.of("s2") == later.due + dt.timedelta(hours=36)
    assert later.of("s3") == later.of("s5") == dt.datetime(2030, 3, 9, tzinfo=dt.UTC)  # ISO and YAML's own form
    assert later.of("s4") == later.due


def test_the_hub_fetch_service_shows_the_own_due_date(tmp_path):
    """The hub's fetch (rbtutor.course.fetch_service) puts each student's own due date in, variants on or off."""
    import json

    from rbtutor.course.fetch_service import FetchCore

    released = tmp_path / "exchange" / "outbound" / NAME
    released.mkdir(parents=True)
    for folder in (released, released.parent, released.parent.parent):
        folder.chmod(0o755)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Problem 3\n\nText.")])
    nbformat.write(nb, released / f"{NAME}.ipynb")
    due_dates = tmp_path / "due_dates.yaml"
    due_dates.write_text(FIRST)
    data_file = tmp_path / "problem_data.yaml"
    data_file.write_text("variants: {per_student: false}\n")
    core = FetchCore(released.parent, data_file, frozenset({os.getuid()}), due_dates)
    request = json.dumps({"assignment": NAME, "notebook": f"{NAME}.ipynb"}).encode()
    own = {s: core.personalised(s, request)["cells"][0]["source"] for s in ("extended", "classmate")}
    assert (DUE + dt.timedelta(days=3)).strftime("%d %B %Y, %H:%M") in own["extended"]
    assert "your extended due date" in own["extended"]
    assert DUE.strftime("%d %B %Y, %H:%M") in own["classmate"]
    assert "extended" not in own["classmate"]
    without = FetchCore(released.parent, data_file, frozenset({os.getuid()}))
    assert DUE_LINE not in without.personalised("classmate", request)["cells"][0]["source"]


def test_extensions_and_a_moved_deadline_on_postgresql(graded_class, postgres_server, tmp_path):  # noqa: F811
    """The same class graded into a PostgreSQL gradebook: the same penalties, and the same change on a move."""
    import shutil
    import subprocess
    import sys

    from nbgrader.api import Gradebook

    url = postgres_server.create_database("extensions")
    env = {**os.environ, "RBTUTOR_GRADEBOOK": url}
    course = tmp_path / "course"
    shutil.copytree(graded_class[0], course, symlinks=True, ignore=shutil.ignore_patterns("gradebook.db*"))

    def course_command(*args):
        result = subprocess.run([sys.executable, "-m", "rbtutor.course", "--root", str(course), *args], env=env,
                                capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        return rows(course)

    course_command("generate")
    first = course_command("grade")
    assert not (course / "gradebook.db").exists(), "graded into SQLite, not PostgreSQL"
    for student in HANDED_IN:
        assert first[student]["late_penalty"] == graded_class[1][student]["late_penalty"], student
    with Gradebook(url, course_id="rbtutor") as gradebook:
        assert gradebook.find_submission(NAME, "extended").extension == dt.timedelta(days=3)
    (course / "exercises" / "due_dates.yaml").write_text(MOVED)
    after = course_command("grade")
    score = float(after["classmate"]["score"])
    new = expected_penalty(score, HANDED_IN["classmate"], MOVED_DUE)
    assert float(after["classmate"]["late_penalty"]) == pytest.approx(new, abs=1e-4)
    assert after["classmate"]["late_change"].startswith(f"{float(first['classmate']['late_penalty']):g} -> {new:g}")
    assert "extension to" in after["extended"]["late_change"]


def test_an_extension_left_on_an_undated_assignment_breaks_nothing():
    """nbgrader's own duedate fails on an extension without a due date; the run's step does not."""
    from types import SimpleNamespace

    from rbtutor.course.late import own_due, seconds_late

    undated = SimpleNamespace(assignment=SimpleNamespace(duedate=None), extension=dt.timedelta(days=2),
                              timestamp=dt.datetime(2030, 3, 3), duedate="not to be read")
    assert own_due(undated) is None
    assert seconds_late(undated) == 0.0
    dated = SimpleNamespace(assignment=SimpleNamespace(duedate=dt.datetime(2030, 3, 1)),
                            duedate=dt.datetime(2030, 3, 2), timestamp=dt.datetime(2030, 3, 2, 1))
    assert own_due(dated) == dt.datetime(2030, 3, 2)
    assert seconds_late(dated) == 3600.0


def test_settling_penalties_runs_as_many_queries_for_a_large_class_as_for_a_small_one(tmp_path, monkeypatch):
    """The end-of-run step reads the gradebook in bulk: its query count does not grow with the class."""
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    from nbgrader.api import Gradebook
    from sqlalchemy import event
    from test_growth import _gradebook
    from traitlets.config import Config

    from rbtutor.course.late import settle_penalties

    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    counts = {}
    for students in (3, 30):
        url = f"sqlite:///{tmp_path / f'gradebook{students}.db'}"
        _gradebook(url, students)
        gradebook = Gradebook(url)
        statements = []
        event.listen(gradebook.engine, "before_cursor_execute", lambda *args, seen=statements: seen.append(args[2]))
        layout = SimpleNamespace(scratch=tmp_path / f"scratch{students}")
        assert settle_penalties(layout, SimpleNamespace(gradebook=gradebook, config=Config())) == {}
        counts[students] = len(statements)
    assert counts[3] == counts[30], f"expected the same number of queries, got {counts}"


def test_a_broken_due_dates_file_leaves_the_date_out_of_the_fetch(tmp_path, caplog):
    """A due-dates file that does not parse never keeps students from fetching: the date is left out, and logged."""
    import json

    from rbtutor.course.fetch_service import FetchCore

    released = tmp_path / "exchange" / "outbound" / NAME
    released.mkdir(parents=True)
    for folder in (released, released.parent, released.parent.parent):
        folder.chmod(0o755)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Problem 3")]),
                   released / f"{NAME}.ipynb")
    due_dates = tmp_path / "due_dates.yaml"
    due_dates.write_text(f"{NAME}: {{due: 2030-03-01T12:00:00+00:00, extensions: {{s1: -3d}}}}\n")
    data_file = tmp_path / "problem_data.yaml"
    data_file.write_text("variants: {per_student: false}\n")
    core = FetchCore(released.parent, data_file, frozenset({os.getuid()}), due_dates)
    request = json.dumps({"assignment": NAME, "notebook": f"{NAME}.ipynb"}).encode()
    source = core.personalised("s1", request)["cells"][0]["source"]
    assert source.startswith("# Problem 3")
    assert DUE_LINE not in source
    assert any("due dates left out" in r.getMessage() for r in caplog.records), caplog.records


@pytest.mark.xdist_group("machine")  # the staff group and the hub's folders
def test_the_hub_keeps_the_due_dates_where_the_fetch_service_reads_them(tmp_path):
    """hubctl moves the instructor's exercises/due_dates.yaml beside the course data, staff-readable
    only, links it back, and passes it to the fetch service; no file is fine (nothing is due)."""
    import stat

    from rbtutor.course.fetch_service import service_entry

    hubctl, gid = _hubctl_as_root()
    link, target = tmp_path / "course" / "due_dates.yaml", tmp_path / "srv" / "due_dates.yaml"
    link.parent.mkdir()
    target.parent.mkdir()
    owner = (os.getuid(), os.getgid())
    hubctl.ensure_due_dates(link, owner, target)
    assert not target.exists()  # optional: nothing made, but the link, so that the first write makes it
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    folder = target.parent.stat()  # what the instructor writes there later is the staff group's
    assert (stat.S_IMODE(folder.st_mode), folder.st_gid) == (0o2750, gid)
    link.unlink()  # a file of the instructor's own instead: moved there, linked back
    link.write_text(FIRST)
    hubctl.ensure_due_dates(link, owner, target)
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert target.read_text() == FIRST
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.stat().st_gid == gid
    hubctl.ensure_due_dates(link, owner, target)  # again: unchanged
    assert link.is_symlink()
    assert target.read_text() == FIRST
    service, _ = service_entry("/x/outbound", "/x/data.yaml", "python", "fetch", [], due_dates=target)
    assert service["environment"]["RBTUTOR_DUE_DATES"] == str(target)
    assert "RBTUTOR_DUE_DATES" not in service_entry("/x/outbound", "/x/data.yaml", "python", "fetch", [])[0][
        "environment"]


#: a fetch service that is never restarted: one personalised notebook's opening cell per student id on stdin.
#: It starts as root and becomes the service's account (``uid``, in the staff group) after a first fetch has
#: imported all it needs: the interpreter of this checkout may live where only root may read.
FETCHER = """
import json, os, sys
from pathlib import Path
from rbtutor.course.fetch_service import FetchCore
outbound, data, due, name = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
uid, staff = int(sys.argv[5]), int(sys.argv[6])
core = FetchCore(outbound, data, frozenset({0}), due)
request = json.dumps({"assignment": name, "notebook": name + ".ipynb"}).encode()
def fetch(student):
    return json.dumps(core.personalised(student, request)["cells"][0]["source"])
fetch("warmup")
os.setgroups([staff]); os.setgid(uid); os.setuid(uid)
for line in sys.stdin:
    print(fetch(line.strip()), flush=True)
"""
#: the instructor's publish step, run as the instructor (``uid``, in the staff group) in the same way
PUBLISH = """
import os, sys
from rbtutor.course.late import publish_due_dates
from rbtutor.course.layout import CourseLayout
uid, staff = int(sys.argv[3]), int(sys.argv[4])
os.setgroups([staff]); os.setgid(uid); os.setuid(uid); os.umask(0o027)
print(publish_due_dates(CourseLayout(sys.argv[1]), sys.argv[2]))
"""
#: accounts of no one on this machine: the instructor, the service's account and a student
INSTRUCTOR_UID, FETCH_UID, STUDENT_UID = 61001, 61002, 61003


def _hubctl_as_root():
    """hub/hubctl.py and the staff group's id; skipped (failed on CI) unless run as root."""
    import grp
    import importlib.util

    spec = importlib.util.spec_from_file_location("hubctl", Path(__file__).parents[1] / "hub" / "hubctl.py")
    hubctl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hubctl)
    if os.getuid() != 0:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs as root; this test gives files to the group {hubctl.STAFF_GROUP} and other users")
        pytest.skip(f"needs root: it gives files to the group {hubctl.STAFF_GROUP} and other users")
    try:
        gid = grp.getgrnam(hubctl.STAFF_GROUP).gr_gid
    except KeyError:  # made as the hub set-up makes it (hubctl.ensure_staff)
        subprocess.run(["groupadd", "--system", hubctl.STAFF_GROUP], check=True)
        gid = grp.getgrnam(hubctl.STAFF_GROUP).gr_gid
    return hubctl, gid


@pytest.mark.xdist_group("machine")  # the staff group and the hub's folders
def test_the_instructor_s_edits_reach_the_next_fetch_without_root_or_restart():
    """On the hub's layout, the instructor (not root, in the staff group, umask 027) writes and edits
    exercises/due_dates.yaml after the set-up, made before any file existed; one running fetch service
    (another account of the staff group) shows each version at its next fetch. A student reads neither
    file. A link replaced by a file of its own is put right by the instructor's own publish step."""
    import json
    import shutil
    import sys
    import tempfile

    hubctl, staff = _hubctl_as_root()
    base = Path(tempfile.mkdtemp(prefix="rbtutor-due-"))  # not under pytest's tmp_path: other users must enter
    try:
        base.chmod(0o755)
        instructor = {"user": INSTRUCTOR_UID, "group": INSTRUCTOR_UID, "extra_groups": [staff], "umask": 0o027}
        course = base / "course"
        (course / "exercises").mkdir(parents=True)
        for path in (course, course / "exercises"):
            os.chown(path, INSTRUCTOR_UID, INSTRUCTOR_UID)
        course.chmod(0o700)
        link, target = course / "exercises" / "due_dates.yaml", base / "srv" / "due_dates.yaml"
        hubctl.ensure_due_dates(link, (INSTRUCTOR_UID, INSTRUCTOR_UID), target)  # make hub: no due dates yet
        released = base / "exchange" / "outbound" / NAME
        released.mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Problem 3\n\nText.")]),
                       released / f"{NAME}.ipynb")
        data_file = base / "problem_data.yaml"
        data_file.write_text("variants: {per_student: false}\n")
        for path in (base / "exchange", released.parent, released, released / f"{NAME}.ipynb", data_file):
            path.chmod(0o755 if path.is_dir() else 0o644)

        def as_instructor(script: str, *args) -> str:  # a shell the instructor runs, umask 027
            done = subprocess.run(["/bin/sh", "-c", script, "sh", *map(str, args)], capture_output=True, text=True,
                                  cwd="/", **instructor)
            assert done.returncode == 0, done.stderr[-2000:]
            return done.stdout

        write = 'printf "%s" "$2" > "$1"'
        service = subprocess.Popen(
            [sys.executable, "-c", FETCHER, str(released.parent), str(data_file), str(target), NAME,
             str(FETCH_UID), str(staff)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
        try:
            def fetch(student: str) -> str:
                service.stdin.write(student + "\n")
                service.stdin.flush()
                line = service.stdout.readline()
                assert line, service.stderr.read()[-3000:] if service.poll() is not None else "no reply"
                (due,) = [x for x in json.loads(line).split("\n") if x.startswith(DUE_LINE)] or [""]
                return due

            assert fetch("extended") == ""  # nothing is due yet
            as_instructor(write, link, FIRST)
            assert (DUE + dt.timedelta(days=3)).strftime("%d %B %Y, %H:%M") in fetch("extended")
            assert DUE.strftime("%d %B %Y, %H:%M") in fetch("classmate")
            as_instructor(write, link, MOVED)  # a moved deadline and a changed extension
            assert MOVED_EXTENSION.strftime("%d %B %Y, %H:%M") in fetch("extended")
            assert MOVED_DUE.strftime("%d %B %Y, %H:%M") in fetch("classmate")
            # a tool that writes a new file and renames it over the link (sed -i, mv): the course's
            # own file then differs from the service's until the instructor's publish step
            later = MOVED_EXTENSION + dt.timedelta(days=2)
            as_instructor('printf "%s" "$2" > "$1.new" && mv "$1.new" "$1"', link,
                          MOVED.replace(MOVED_EXTENSION.isoformat(), later.isoformat()))
            assert not link.is_symlink()
            published = subprocess.run([sys.executable, "-c", PUBLISH, str(course), str(target),
                                        str(INSTRUCTOR_UID), str(staff)], capture_output=True, text=True, cwd="/")
            assert "linked to it again" in published.stdout, published.stdout + published.stderr[-2000:]
            assert link.is_symlink()
            assert os.readlink(link) == str(target)
            assert later.strftime("%d %B %Y, %H:%M") in fetch("extended")
        finally:
            service.stdin.close()
            assert service.wait(timeout=60) == 0, service.stderr.read()[-3000:]
        for path in (target, link):  # a student reads neither file: no one's extensions, no salt beside them
            peek = subprocess.run(["/bin/cat", str(path)], capture_output=True, text=True, cwd="/",
                                  user=STUDENT_UID, group=STUDENT_UID)
            assert peek.returncode != 0, path
            assert "Permission denied" in peek.stderr, (path, peek.stderr[-500:])
    finally:
        shutil.rmtree(base)


def test_grade_gives_the_fetch_service_the_course_s_due_dates(tmp_path):
    """``grade`` with ``RBTUTOR_DUE_DATES`` (make hub sets it for the instructor) naming the service's file:
    a course file that is not the link to it is copied there and linked again."""
    import sys

    course = course_with(tmp_path, FIRST)
    published = tmp_path / "srv" / "due_dates.yaml"
    published.parent.mkdir()
    published.write_text(f"{NAME}: 2030-01-01T00:00:00+00:00\n")  # the dates of an earlier make hub
    result = subprocess.run([sys.executable, "-m", "rbtutor.course", "--root", str(course), "grade"],
                            capture_output=True, text=True, timeout=1800,
                            env={**os.environ, "RBTUTOR_DUE_DATES": str(published)})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    link = course / "exercises" / "due_dates.yaml"
    assert f"{link} copied to {published}" in result.stdout, result.stdout[-3000:]
    assert published.read_text() == FIRST
    assert link.is_symlink()
    assert os.readlink(link) == str(published)
    assert oct(published.stat().st_mode & 0o777) == oct(0o640)
