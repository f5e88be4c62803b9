"""The class record cannot be forged: who handed in, when, which answer a hand grade is for, ids, escaping.

Each test is an attack a student on a shared server could make (planting an entry under a
classmate's name, backdating their own, resubmitting after a hand grade, a hostile id), tried
for real: entries made by real Unix accounts where ownership matters (created here as root
with ``useradd``; skipped without root locally, a failure in CI).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest

from rbtutor.grading import intake
from rbtutor.grading.intake import collect, format_time, parse_time, read_receipt

# Real accounts, the hub's folders and processes: one worker runs these, one after another.
pytestmark = pytest.mark.xdist_group("machine")

ACCOUNTS = ("rbt-rec-a", "rbt-rec-b")
NOW = dt.datetime.now(dt.UTC)


def stamp(delta: dt.timedelta) -> str:
    return format_time(NOW + delta)


def make_entry(inbound: Path, student: str, when: str, *, source="x = 1", claim: str | None = None,
               tail="+Zq3x") -> Path:
    """An exchange entry as nbgrader's submit makes it (the claim defaults to the name's time)."""
    entry = inbound / f"{student}+problem03+{when}{tail}"
    entry.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nbformat.write(nb, entry / "problem03.ipynb")
    (entry / "timestamp.txt").write_text(when if claim is None else claim)
    return entry


def first_source(folder: Path) -> str:
    return nbformat.read(folder / "problem03.ipynb", as_version=4).cells[0].source


# --------------------------------------------------------------------------- real accounts


def _require_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run the ownership tests as root (they create Unix accounts)", pytrace=False)
        pytest.skip("creating the Unix accounts of the ownership tests needs root")
    if not shutil.which("useradd"):
        pytest.fail("useradd is missing: the ownership tests need real Unix accounts", pytrace=False)


@pytest.fixture(scope="module")
def accounts():
    """Two real Unix accounts (``rbt-rec-a``, ``rbt-rec-b``), removed afterwards."""
    _require_root()
    made = []
    try:
        for name in ACCOUNTS:
            try:
                pwd.getpwnam(name)
            except KeyError:
                subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
                made.append(name)
        yield {name: pwd.getpwnam(name) for name in ACCOUNTS}
    finally:
        for name in made:
            subprocess.run(["userdel", name], check=False)


@pytest.fixture
def exchange():
    """An inbound folder every account may write (as nbgrader's is), on a path they can reach."""
    top = Path(tempfile.mkdtemp(prefix="rbt-rec-", dir="/tmp"))
    os.chmod(top, 0o755)
    inbound = top / "inbound"
    inbound.mkdir()
    os.chmod(inbound, 0o1777)
    yield inbound, top / "submitted"
    shutil.rmtree(top)


AS_STUDENT = """
import json, os, sys
entry, when, source, mode = sys.argv[1:5]
os.mkdir(entry)
nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                 "source": source}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
with open(os.path.join(entry, "problem03.ipynb"), "w") as out:
    json.dump(nb, out)
with open(os.path.join(entry, "timestamp.txt"), "w") as out:
    out.write(when)
os.chmod(entry, int(mode, 8))
"""


def as_user(account: str, entry: Path, when: str, source: str, mode: str = "755") -> Path:
    """``account`` itself makes the exchange entry ``entry`` (a process running with its uid)."""
    user = pwd.getpwnam(account)
    subprocess.run(["/usr/bin/python3", "-c", AS_STUDENT, str(entry), when, source, mode], check=True,
                   user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert entry.stat().st_uid == user.pw_uid
    return entry


def test_entry_planted_under_a_classmates_name_is_refused_and_names_the_planter(accounts, exchange):
    inbound, submitted = exchange
    a, b = ACCOUNTS
    as_user(a, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=1))}+aa", stamp(dt.timedelta(hours=1)),
            "mine = 9")
    # b plants a later, blank "submission" of a's
    as_user(b, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=5))}+bb", stamp(dt.timedelta(hours=5)),
            "blank = 0")
    results = dict(collect(inbound, submitted, "problem03"))
    assert results[a].kinds() == ["wrong_owner"]
    refused = results[a].events[0]
    assert refused["owner"] == [b]
    assert b in refused["message"]
    assert first_source(submitted / a / "problem03") == "mine = 9"  # a's own newest entry
    assert read_receipt(submitted, a, "problem03")["entry"].endswith("+aa")


def test_a_file_planted_inside_a_classmates_entry_refuses_that_entry(accounts, exchange):
    inbound, submitted = exchange
    a, b = ACCOUNTS
    as_user(a, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=1))}+aa", stamp(dt.timedelta(hours=1)),
            "first = 1")
    # a's newer entry is world-writable (a's mistake); b swaps a notebook into it
    newer = as_user(a, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=2))}+cc",
                    stamp(dt.timedelta(hours=2)), "second = 2", mode="777")
    user_b = pwd.getpwnam(b)
    subprocess.run(["/usr/bin/python3", "-c",
                    "import os, sys; os.rename(sys.argv[1], sys.argv[1] + '.x'); "
                    "open(sys.argv[1], 'w').write(open(sys.argv[1] + '.x').read().replace('second = 2', 'b = 0'))",
                    str(newer / "problem03.ipynb")], check=True, user=user_b.pw_uid, group=user_b.pw_gid,
                   extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin"})
    results = dict(collect(inbound, submitted, "problem03"))
    assert results[a].kinds() == ["wrong_owner"]
    assert results[a].events[0]["owner"] == [b]
    assert "problem03.ipynb" in results[a].events[0]["paths"]
    assert first_source(submitted / a / "problem03") == "first = 1"


def test_only_foreign_entries_means_nothing_is_collected(accounts, exchange):
    inbound, submitted = exchange
    a, b = ACCOUNTS
    as_user(b, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=1))}+bb", stamp(dt.timedelta(hours=1)),
            "blank = 0")
    results = dict(collect(inbound, submitted, "problem03"))
    assert results[a].kinds() == ["wrong_owner"]
    assert results[a].taken == []
    assert not (submitted / a / "problem03").exists()
    assert read_receipt(submitted, a, "problem03") is None


def test_without_the_owner_check_the_planted_entry_is_taken(accounts, exchange):
    """What the course setting gives up (an exchange where one service account owns every entry)."""
    inbound, submitted = exchange
    a, b = ACCOUNTS
    as_user(a, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=1))}+aa", stamp(dt.timedelta(hours=1)),
            "mine = 9")
    as_user(b, inbound / f"{a}+problem03+{stamp(dt.timedelta(hours=5))}+bb", stamp(dt.timedelta(hours=5)),
            "blank = 0")
    results = dict(collect(inbound, submitted, "problem03", check_owner=False))
    assert results[a].events == []
    assert first_source(submitted / a / "problem03") == "blank = 0"


def test_an_id_without_an_account_is_not_owner_checked(accounts, exchange):
    inbound, submitted = exchange
    make_entry(inbound, "no-such-account-rbt", stamp(dt.timedelta(hours=1)))  # owned by root
    results = dict(collect(inbound, submitted, "problem03"))
    assert results["no-such-account-rbt"].events == []


# --------------------------------------------------------------------------- when


def test_backdated_entry_name_and_claim_count_from_when_the_entry_appeared(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    old = "2020-01-01 10:00:00.000000 UTC"
    entry = make_entry(inbound, "ann", old)  # name and timestamp.txt both say 2020
    newest = max(os.stat(p, follow_symlinks=False).st_ctime for p in [entry, *entry.iterdir()])
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    received = parse_time(result.timestamp)
    assert abs(received.timestamp() - newest) < 1e-5
    assert received > parse_time(old)
    assert result.kinds() == ["timestamp_mismatch"]
    assert result.events[0]["claimed"] == old
    assert result.events[0]["received"] == result.timestamp
    assert result.claimed == old
    assert (submitted / "ann" / "problem03" / "timestamp.txt").read_text() == old  # kept as the claim only


def test_a_rewritten_claim_is_named_and_changes_nothing(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    later = stamp(dt.timedelta(days=2, hours=12))  # the entry's own time (its name)
    make_entry(inbound, "ann", later, claim="2020-01-01 00:00:00.000000 UTC")
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert result.timestamp == later
    assert result.kinds() == ["timestamp_mismatch"]


def test_an_answer_rewritten_inside_an_old_entry_moves_its_time(tmp_path):
    """An entry made early and filled in later: the newest change of anything read is the time."""
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    entry = make_entry(inbound, "ann", "2020-01-01 10:00:00.000000 UTC", source="early = 0")
    folder_ctime = entry.stat().st_ctime
    with (entry / "problem03.ipynb").open("r+") as handle:  # same file, new contents, folder untouched
        text = handle.read().replace("early = 0", "later = 1")
        handle.seek(0)
        handle.write(text)
        handle.truncate()
    file_ctime = (entry / "problem03.ipynb").stat().st_ctime
    assert entry.stat().st_ctime == folder_ctime
    assert file_ctime > folder_ctime
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert abs(parse_time(result.timestamp).timestamp() - file_ctime) < 1e-5


def test_recollect_keeps_the_time_of_an_unchanged_entry_and_moves_a_changed_one(tmp_path):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    entry = make_entry(inbound, "ann", "2020-01-01 10:00:00.000000 UTC")
    first = dict(collect(inbound, submitted, "problem03"))["ann"].timestamp
    os.chmod(entry, 0o700)  # a status change (a backup restore, a chmod) that leaves the contents alone
    assert entry.stat().st_ctime > parse_time(first).timestamp()
    again = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert again.timestamp == first
    assert "entry_changed" not in again.kinds()
    (entry / "extra.txt").write_text("added later")
    changed = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert "entry_changed" in changed.kinds()
    assert parse_time(changed.timestamp) > parse_time(first)
    assert read_receipt(submitted, "ann", "problem03")["received"] == changed.timestamp


@pytest.mark.parametrize(("claim", "why"), [
    (None, "is missing"),
    ("x" * 500, "larger than"),
    ("2024-03-01 10:00:00" + " " * 95, "larger than"),
    ("next friday", "not a date"),
    ("2024-13-45 10:00:00 UTC", "not a date"),
    ("0001-01-01 00:00:00.000000 UTC", "not a date"),
    ("9999-12-31 23:59:59.999999 -1000", "not a date"),  # overflows when put into UTC
    ("2024-03-01 10:00:00 America/../../../etc/passwd", "not a date"),  # no zone files looked up
    ("\udcff", "not a date"),
])
def test_bad_claims_are_named_never_crash_and_never_make_it_on_time(tmp_path, claim, why):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    when = stamp(dt.timedelta(days=3))
    entry = make_entry(inbound, "ann", when)
    if claim is None:
        (entry / "timestamp.txt").unlink()
    else:
        (entry / "timestamp.txt").write_bytes(claim.encode("utf-8", "surrogateescape"))
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert result.kinds() == ["bad_timestamp"]
    assert why in result.events[0]["message"]
    assert result.timestamp == when
    assert result.claimed is None
    assert not (submitted / "ann" / "problem03" / "timestamp.txt").exists()


@pytest.mark.parametrize("when", ["0001-01-01 00:00:00.000000 UTC", "1969-12-31 23:59:59 UTC",
                                  "9999-12-31 23:59:59 -1000", "2024-02-30 10:00:00 UTC"])
def test_entry_names_with_impossible_times_are_not_collected(tmp_path, when):
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    make_entry(inbound, "ann", when)
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert result.kinds() == ["bad_name"]
    assert result.taken == []


def test_parse_time_reads_nbgraders_formats():
    assert parse_time("2024-03-01 10:00:00.000000 UTC") == dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC)
    assert parse_time("2024-03-01 12:00:00+0200") == dt.datetime(2024, 3, 1, 10, tzinfo=dt.UTC)
    assert parse_time("2024-03-01T10:00:00.5") == dt.datetime(2024, 3, 1, 10, 0, 0, 500000, tzinfo=dt.UTC)
    with pytest.raises(ValueError, match="at most 14 hours"):
        parse_time("2024-03-01 10:00:00 +2300")


def test_receipt_lives_beside_the_copy_where_no_entry_can_write(tmp_path):
    """A file named like the receipt inside an entry lands inside the copy, never on the receipt."""
    inbound, submitted = tmp_path / "inbound", tmp_path / "submitted"
    entry = make_entry(inbound, "ann", stamp(dt.timedelta(days=1)))
    forged = {"entry": entry.name, "received": "2020-01-01 00:00:00.000000 UTC", "claimed": None,
              "digest": "0" * 64, "first_seen": "2020-01-01 00:00:00.000000 UTC"}
    (entry / ".problem03.receipt.json").write_text(json.dumps(forged))
    result = dict(collect(inbound, submitted, "problem03"))["ann"]
    assert read_receipt(submitted, "ann", "problem03")["received"] == result.timestamp != forged["received"]


def test_a_damaged_receipt_is_an_error_not_a_time(tmp_path):
    (tmp_path / "ann").mkdir()
    intake.receipt_path(tmp_path, "ann", "problem03").write_text("{not json")
    with pytest.raises(ValueError, match="expected a receipt"):
        read_receipt(tmp_path, "ann", "problem03")


# --------------------------------------------------------------------------- a class graded twice

NAME = "problem03"
LATE_BY = dt.timedelta(days=2, hours=12)  # the due date is this long before the test runs
HOSTILE_IDS = ("[A-Z]*", "reference", "<img src=x onerror=alert(1)>", "ev\x1b[2Jil")


def _written(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution")
            and c.metadata.get("nbgrader", {}).get("grade")]


@pytest.fixture(scope="module")
def record_class(tmp_path_factory):
    """Problem 3 due 2.5 days ago. ``ann`` and ``ben`` answer and get their written parts graded by
    hand; then ``ann`` resubmits with her first written answer blanked. ``sly`` backdates the
    entry name and the claim to before the due date. Hostile ids are planted in the exchange and
    in ``submitted/``. Graded twice; returns the course and both runs."""
    from test_assignments import ROOT, answered, run_course, student_exchange, submit_as

    from rbtutor.course import api

    if not (ROOT / "exercises" / NAME).is_dir():
        pytest.skip("Problem 3 is not among the assignments")
    course = tmp_path_factory.mktemp("record") / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    due = (NOW - LATE_BY).isoformat(timespec="seconds")
    (course / "exercises" / "due_dates.yaml").write_text(f"{NAME}: {due}\n")
    assert run_course(course, "generate").returncode == 0
    grader = api(course)
    assert grader.release_assignment(NAME)["success"]
    source = course / "exercises" / NAME / f"{NAME}.ipynb"
    for student in ("ann", "ben", "sly"):
        submit_as(course, student, NAME, lambda nb: answered(nb, source))
    inbound = course / "exchange" / "rbtutor" / "inbound"
    # sly makes the work 2.5 days late look on time: entry name and timestamp.txt from before the due date
    (entry,) = inbound.glob(f"sly+{NAME}+*")
    early = format_time(NOW - LATE_BY - dt.timedelta(hours=1))
    (entry / "timestamp.txt").write_text(early)
    entry.rename(inbound / f"sly+{NAME}+{early}+x1")
    (ben_entry,) = inbound.glob(f"ben+{NAME}+*")
    for hostile in HOSTILE_IDS:  # entries under ids that glob, are reserved, hold markup or escapes
        shutil.copytree(ben_entry, inbound / f"{hostile}+{NAME}+{stamp(dt.timedelta(0))}+h")
    collected = run_course(course, "collect", NAME)
    assert collected.returncode == 0, collected.stdout + collected.stderr

    first = run_course(course, "grade")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:  # what the Formgrader does
        for student in ("ann", "ben"):
            notebook = gradebook.find_submission_notebook(NAME, NAME, student)
            comments = {c.name: c for c in notebook.comments}
            for grade in notebook.grades:
                if grade.auto_score is None:
                    grade.manual_score = grade.max_score
                    comments[grade.name].manual_comment = "well argued"
        gradebook.db.commit()

    home = course.parent / "students" / "ann"  # ann resubmits, her first written answer now blank
    path = home / NAME / f"{NAME}.ipynb"
    nb = nbformat.read(path, as_version=4)
    _written(nb)[0].source = ""
    nbformat.write(nb, path)
    student_exchange("submit", course, home, NAME, "ann")
    recollected = run_course(course, "collect", NAME)
    assert recollected.returncode == 0, recollected.stderr
    for hostile in HOSTILE_IDS:  # folders put into submitted/ another way (a copy, a hub script)
        shutil.copytree(course / "submitted" / "ben" / NAME, course / "submitted" / hostile / NAME)
    second = run_course(course, "grade")
    return course, collected, first, second


def _rows(course: Path) -> dict[str, dict]:
    import csv

    return {r["student"]: r for r in csv.DictReader((course / "grades.csv").open())}


def _report(course: Path) -> dict[str, list[dict]]:
    return {e["student"]: e["events"] for e in json.loads((course / "integrity_report.json").read_text())}


def test_hostile_ids_are_never_collected(record_class):
    course, collected, _, _ = record_class
    report = _report(course)
    for hostile in HOSTILE_IDS:
        assert [e["kind"] for e in report[hostile]] == ["bad_name"] * (1 + 1), (hostile, report[hostile])
    assert "\x1b" not in collected.stdout + collected.stderr


def test_backdated_late_work_is_late(record_class):
    from rbtutor.course import api

    course = record_class[0]
    with api(course).gradebook as gradebook:
        sly = gradebook.find_submission(NAME, "sly")
        # late from when the entry appeared (when the fixture ran), not from the forged times
        assert sly.total_seconds_late >= LATE_BY.total_seconds() - 60
        assert sly.late_submission_penalty > 0
    assert any(e["kind"] == "timestamp_mismatch" for e in _report(course)["sly"])


def test_one_run_grades_everyone_else_and_names_the_refused_ids(record_class):
    course, _, _, second = record_class
    assert second.returncode == 1, second.stdout[-3000:] + second.stderr[-3000:]
    assert sorted(_rows(course)) == ["ann", "ben", "sly"]
    assert "graded 3 submissions" in second.stdout
    for hostile in ("[A-Z]*", "reference"):
        assert f"could not grade {hostile} {NAME}: bad_name" in second.stderr
    assert "could not grade ev\\x1b[2Jil" in second.stderr
    for text in (second.stdout, second.stderr):
        assert "\x1b" not in text
        assert "\r" not in text
    assert sorted(p.name for p in (course / "autograded").iterdir()) == ["ann", "ben", "sly"]


def test_a_changed_answer_loses_its_hand_grade_and_shows_the_old_one(record_class):
    from nbgrader.api import Gradebook

    course = record_class[0]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(NAME, NAME, "ann")
        written = [g for g in notebook.grades if g.auto_score is None]
        comments = {c.name: c.manual_comment for c in notebook.comments}
        reset = [g for g in written if g.manual_score is None]
        assert len(reset) == 1
        assert reset[0].needs_manual_grade
        assert "Previous grade" in comments[reset[0].name]
        assert "well argued" in comments[reset[0].name]
        kept = [g for g in written if g.manual_score is not None]
        assert kept
        assert all(g.manual_score == g.max_score and not g.needs_manual_grade for g in kept)
        ann = gradebook.find_submission(NAME, "ann")
        ben = gradebook.find_submission(NAME, "ben")
        assert ann.score == pytest.approx(ben.score - reset[0].max_score)  # the old score is not counted
    rows = _rows(course)
    assert rows["ann"]["written_parts"] == "to grade (1)"
    assert rows["ben"]["written_parts"] == "done"
    events = [e for e in _report(course)["ann"] if e["kind"] == "hand_grade_reset"]
    assert len(events) == 1
    assert events[0]["grade_id"] == reset[0].name


def _rendered(markdown: str) -> str:
    """The report as JupyterLab or a forge would show it (CommonMark with GFM tables)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("gfm-like").render(markdown)


def test_the_report_shows_hostile_text_as_text(record_class):
    """Readable as written in an editor (no character references) and inert when rendered."""
    course = record_class[0]
    text = (course / "integrity_report.md").read_text()
    assert "`<img src=x onerror=alert(1)>`" in text
    assert "&#" not in text
    assert "\x1b" not in text
    page = _rendered(text)
    assert "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_grades_csv_cells_are_never_formulas(record_class, tmp_path):
    import csv

    from rbtutor.course import api
    from rbtutor.course.grade import export_grades

    course = tmp_path / "course"
    shutil.copytree(record_class[0], course, symlinks=True, ignore=shutil.ignore_patterns("exchange"))
    grader = api(course)
    with grader.gradebook as gradebook:  # an id from elsewhere (an older gradebook, a hub import)
        gradebook.add_student("=SUM(7;7)")
        gradebook.add_submission(NAME, "=SUM(7;7)")
    export_grades(grader, course / "grades.csv")
    rows = list(csv.reader((course / "grades.csv").open()))
    assert rows[1][:2] == ["'=SUM(7;7)", NAME]
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r")) for row in rows for cell in row)


# --------------------------------------------------------------------------- one student never ends the run


@pytest.fixture
def small_course(tmp_path):
    from test_assignments import ROOT

    course = tmp_path / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for student in ("ann", "ben", "cat", "[bc]*", "reference"):
        (course / "submitted" / student / NAME).mkdir(parents=True)
    return course


def test_an_exception_of_one_submission_never_ends_the_run(small_course, monkeypatch, capsys):
    import contextlib

    from nbgrader.api import MissingEntry

    from rbtutor.course import CourseLayout, grade
    from rbtutor.course.grade import run as grade_run
    from rbtutor.course.grade import submission as grade_submission

    graded = []

    def grade_one(layout, assignment, student):
        graded.append(student)
        if student == "ben":
            raise MissingEntry("no such submission")
        return "fake\r[9/9] forged line\x1b[2K", None

    monkeypatch.setattr(grade_submission, "_grade_submission", grade_one)
    # no kernel runs here
    monkeypatch.setattr(grade_run, "zygote_starting", lambda: contextlib.nullcontext(lambda: None))
    status = grade.grade(CourseLayout(small_course), jobs=1)
    out, err = capsys.readouterr()
    assert status == 1
    assert graded == ["ann", "ben", "cat"]  # everyone after ben too; the refused ids never reach grading
    assert "could not grade ben problem03: MissingEntry: no such submission" in err
    assert "could not grade [bc]* problem03: bad_name" in err
    assert "could not grade reference problem03" in err
    assert (small_course / "grades.csv").is_file()
    assert (small_course / "integrity_report.md").is_file()
    assert "\r" not in out
    assert "\x1b" not in out
    assert "fake\\r[9/9] forged line\\x1b[2K" in out
    report = {e["student"]: e for e in json.loads((small_course / "integrity_report.json").read_text())}
    assert [e["kind"] for e in report["[bc]*"]["events"]] == ["bad_name"]


def test_a_refused_id_never_reaches_nbgrader(small_course):
    from rbtutor.course import CourseLayout
    from rbtutor.course.grade import autograde_one

    _assignment, _student, summary, _, problem = autograde_one((str(small_course), NAME, "[A-Z]*"))
    assert summary == "NOT GRADED"
    assert "expected a student id" in problem
    assert not CourseLayout(small_course).autograded().exists()


# --------------------------------------------------------------------------- escaping, settings


def test_escaping_where_student_text_lands():
    from rbtutor.grading.report import csv_cell, markdown_text, terminal_text

    for start in "=+-@\t\r":
        assert csv_cell(f"{start}1+1") == f"'{start}1+1"
    assert csv_cell("ann") == "ann"
    assert csv_cell("3.5") == "3.5"
    hostile = "<script>x</script> ![t](http://e/x.png) | `c` \\ \n"
    shown = markdown_text(hostile)
    assert "\n" not in shown
    assert shown.count("|") == shown.count("\\|") == 1
    cell = _rendered(f"| a |\n| --- |\n| {shown} |")
    assert "<script" not in cell
    assert "<img" not in cell
    assert "<a " not in cell
    assert "&lt;script&gt;x&lt;/script&gt; ![t](http://e/x.png) | `c` \\ \\n" in cell  # every character kept
    assert terminal_text("a\x1b[31mb\rc\u202ed\x00") == "a\\x1b[31mb\\rc\\u202ed\\x00"


def test_markdown_report_escapes_every_column(tmp_path):
    from rbtutor.grading.report import write_integrity_report

    record = {"student": "<b>x</b>", "assignment": "a|b", "notebook": "<i>n</i>",
              "stages": {"scan": [{"kind": "k<", "message": "m <script>", "cell": "<c>", "grade_id": "[g](j:x)"}]}}
    text = write_integrity_report(tmp_path, events=[record]).read_text()
    assert "`<b>x</b>`" in text
    page = _rendered(text)
    for tag in ("<b>", "<i>", "<script", "<c>", "<a "):
        assert tag not in page, tag
    assert "&lt;b&gt;x&lt;/b&gt;" in page


def test_owner_check_setting_is_nbgraders():
    from traitlets.config import Config

    from rbtutor.course.nbgrader import owner_check

    config = Config()
    assert owner_check(config) is True
    config.ExchangeCollect.check_owner = False
    assert owner_check(config) is False
    config.ExchangeCollect.check_owner = "no"
    with pytest.raises(ValueError, match="True or False"):
        owner_check(config)


@pytest.fixture
def exchange_course(accounts):
    """A Problem 3 course whose exchange inbound every account may write, on a path they can reach."""
    from test_assignments import ROOT

    top = Path(tempfile.mkdtemp(prefix="rbt-rec-", dir="/tmp"))
    course = top / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    inbound = course / "exchange" / "rbtutor" / "inbound"
    inbound.mkdir(parents=True)
    for folder in (top, course, course / "exchange", course / "exchange" / "rbtutor"):
        os.chmod(folder, 0o755)
    os.chmod(inbound, 0o1777)
    yield course
    shutil.rmtree(top)


def test_collect_command_names_the_planter_and_follows_the_course_setting(exchange_course, capsys):
    from rbtutor.course import CourseLayout
    from rbtutor.course.grade import collect as collect_command

    a, b = ACCOUNTS
    inbound = exchange_course / "exchange" / "rbtutor" / "inbound"
    as_user(a, inbound / f"{a}+{NAME}+{stamp(dt.timedelta(hours=1))}+aa", stamp(dt.timedelta(hours=1)), "mine = 9")
    as_user(b, inbound / f"{a}+{NAME}+{stamp(dt.timedelta(hours=5))}+bb", stamp(dt.timedelta(hours=5)), "blank = 0")
    layout = CourseLayout(exchange_course)
    assert collect_command(layout, NAME) == 0
    assert "entry owners checked" in capsys.readouterr().out
    assert first_source(layout.submitted(a, NAME)) == "mine = 9"
    victim = json.loads((layout.integrity / a / NAME / "_collect.json").read_text())
    assert [e["kind"] for e in victim["stages"]["collect"]] == ["wrong_owner"]
    planter = json.loads((layout.integrity / b / NAME / "_planted.json").read_text())
    assert [(e["kind"], e["named"]) for e in planter["stages"]["collect"]] == [("planted_entry", a)]

    with layout.config.open("a") as config:  # the course turns the check off (one service account)
        config.write("\nget_config().ExchangeCollect.check_owner = False  # noqa: F821\n")
    assert collect_command(layout, NAME) == 0
    assert "entry owners not checked" in capsys.readouterr().out
    assert first_source(layout.submitted(a, NAME)) == "blank = 0"
    kept = json.loads((layout.integrity / b / NAME / "_planted.json").read_text())["stages"]["collect"]
    assert [(e["named"], e["found_by_last_collect"]) for e in kept] == [(a, False)]  # evidence, until cleared
    assert collect_command(layout, NAME, clear=(b,)) == 0
    assert f"{b} {NAME}: evidence of planted entries cleared" in capsys.readouterr().out
    assert not (layout.integrity / b / NAME / "_planted.json").exists()


def _named(layout, student: str) -> list[tuple[str, object]]:
    """What the integrity report says of ``student`` in Problem 3: (kind, named or owner) of each event."""
    from rbtutor.grading.report import write_integrity_report

    write_integrity_report(layout.root)
    report = json.loads((layout.root / "integrity_report.json").read_text())
    return sorted((e["kind"], e.get("named") or tuple(e.get("owner", ()))) for r in report
                  if r["student"] == student and r["assignment"] == NAME for e in r["events"])


def test_a_planted_entry_stays_named_after_the_victim_hands_in_again(exchange_course, capsys):
    """The victim's next honest entry (newer than the planted one) does not wipe the evidence: the
    planted entry is still found while it is in the exchange, and the planter stays named even after
    deleting it, until the instructor clears it."""
    from rbtutor.course import CourseLayout
    from rbtutor.course.grade import collect as collect_command

    a, b = ACCOUNTS
    inbound = exchange_course / "exchange" / "rbtutor" / "inbound"
    layout = CourseLayout(exchange_course)
    as_user(a, inbound / f"{a}+{NAME}+{stamp(dt.timedelta(hours=1))}+aa", stamp(dt.timedelta(hours=1)), "mine = 9")
    planted = as_user(b, inbound / f"{a}+{NAME}+{stamp(dt.timedelta(hours=5))}+bb", stamp(dt.timedelta(hours=5)),
                      "blank = 0")
    assert collect_command(layout, NAME) == 0
    assert _named(layout, a) == [("wrong_owner", (b,))]
    assert _named(layout, b) == [("planted_entry", a)]

    as_user(a, inbound / f"{a}+{NAME}+{stamp(dt.timedelta(hours=6))}+cc", stamp(dt.timedelta(hours=6)), "mine = 10")
    assert collect_command(layout, NAME) == 0
    assert first_source(layout.submitted(a, NAME)) == "mine = 10"
    assert _named(layout, a) == [("wrong_owner", (b,))]  # the older, planted entry is still examined
    assert _named(layout, b) == [("planted_entry", a)]

    user = pwd.getpwnam(b)  # the planter removes the entry from the exchange
    subprocess.run(["/usr/bin/python3", "-c", "import shutil, sys; shutil.rmtree(sys.argv[1])", str(planted)],
                   check=True, user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd="/",
                   env={"PATH": "/usr/bin:/bin"})
    assert not planted.exists()
    assert collect_command(layout, NAME) == 0
    assert _named(layout, b) == [("planted_entry", a)]
    kept = json.loads((layout.integrity / b / NAME / "_planted.json").read_text())["stages"]["collect"]
    assert kept[0]["found_by_last_collect"] is False
    assert collect_command(layout, NAME, clear=(b,)) == 0
    assert _named(layout, b) == []


def test_feedback_is_never_returned_to_a_refused_id(small_course, capsys):
    from rbtutor.course import CourseLayout
    from rbtutor.course.grade import return_feedback

    layout = CourseLayout(small_course)
    (layout.feedback("[A-Z]*", NAME)).mkdir(parents=True)
    (layout.feedback("[A-Z]*", NAME) / f"{NAME}.html").write_text("<p>x</p>")
    assert return_feedback(layout) == 1
    out, err = capsys.readouterr()
    assert "not returning problem03 feedback to [A-Z]*: the student id starts with '['" in err
    assert "feedback returned to 0 students" in out
    assert not (small_course / "exchange" / "rbtutor" / "outbound").exists()


def test_feedback_for_a_hand_made_entry_says_what_is_missing(small_course, capsys):
    """A submission put into submitted/ by hand has no submission time: returning its feedback fails
    with the file named in the course and what to do, never a raw '[Errno 2]'; counts are plural-right."""
    from rbtutor.course import CourseLayout
    from rbtutor.course.grade import return_feedback

    layout = CourseLayout(small_course)
    layout.exchange.mkdir(mode=0o777, exist_ok=True)
    (layout.feedback("student1", NAME)).mkdir(parents=True)
    (layout.feedback("student1", NAME) / f"{NAME}.html").write_text("<p>x</p>")
    assert return_feedback(layout) == 1
    out, err = capsys.readouterr()
    assert "[Errno" not in err, err
    assert f"could not return {NAME} feedback to student1: feedback/student1/{NAME}/timestamp.txt is missing" in err
    assert "put into submitted/ by hand" in err
    assert f"{NAME}: feedback returned to 0 students of 1" in out
