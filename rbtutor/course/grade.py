"""The instructor's loop over the class: generate, grade, return feedback.

``grade`` autogrades every submission in ``submitted/``, several at once (one
worker process per core plus one, see :func:`default_jobs`), with one line of
progress per student and assignment; it writes the feedback, exports the grades
to ``grades.csv`` and the integrity report; the gradebook is copied to
``gradebook.db.bak`` first. Re-running ``grade`` re-grades from the submissions and
gives the same grades. A submission that cannot be graded (whatever it raised, or a
student id that is not acceptable) is listed at the end with the reason, every other
submission is still graded, grades.csv and the integrity report are still written, and
the command then exits with status 1.

The record a grade is defended with:

* the submission time nbgrader's late penalty sees is the receipt's (the time the exchange
  entry appeared, :func:`rbtutor.grading.intake.collect`), written by the grader into its
  own intake copy; the student's ``timestamp.txt`` is never used for it;
* student ids are checked (:mod:`rbtutor.grading.student_ids`) before any of them reaches
  nbgrader, which uses ids in file globs;
* a hand grade belongs to the answer it graded: its score is kept on a re-grade only while
  the SHA-256 of that answer is unchanged (:func:`answer_hashes`, kept in
  ``integrity/<student>/<assignment>/_hand_grades.json``); otherwise the part needs a manual
  grade again, the old score is not counted and is shown to the grader in the comment, and
  the report names it (``hand_grade_reset``).
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import gc
import hashlib
import importlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

import nbformat
from nbgrader.api import MissingEntry
from sqlalchemy.exc import SQLAlchemyError

from ..grading.config import GRADING
from ..grading.execute import remove_tree
from ..grading.feedback import render_bounded, write_feedback
from ..grading.intake import collect as take
from ..grading.intake import format_time, read_receipt, take_in
from ..grading.judge import course_reference, write_class_keys
from ..grading.report import csv_cell, event, record_events, terminal_text, write_integrity_report
from ..grading.sandbox import start_zygote, zygote_starting
from ..grading.student_ids import check_id, id_problem
from ..grading.time_bound import time_bound
from ..problems.variants import per_student
from .class_report import write_class_report
from .grade_rows import class_rows
from .hand_grades import hand_grades_before_regrade, keep_hand_grades
from .late import prepare_deadlines, set_due_dates, settle_penalties
from .layout import CourseLayout
from .nbgrader import api, index_gradebook, owner_check, share_gradebook_engines


def generate(layout: CourseLayout) -> int:
    """Student versions of every source assignment into ``release/`` (nbgrader ``generate_assignment``)."""
    grader = api(layout)
    names = layout.assignments()
    for k, name in enumerate(names, 1):
        result = grader.generate_assignment(name, force=True)
        print(f"[{k}/{len(names)}] {terminal_text(name)}: {'generated' if result['success'] else 'FAILED'}",
              flush=True)
        if not result["success"]:
            print(result["log"], file=sys.stderr)
            return 1
    # due dates: exercises/due_dates.yaml, when there is one, into the gradebook

    try:
        for line in set_due_dates(layout, grader):
            print(line, flush=True)
    except ValueError as exc:  # refused in one line, as grade refuses it
        print(f"due dates: {terminal_text(exc)}", file=sys.stderr)
        return 2
    return 0


def export_grades(grader, path: Path, late_changes: dict[tuple[str, str], str] | None = None,
                  refused: list[str] | None = None,
                  withdrawn: dict[tuple[str, str], str] | None = None) -> list[str]:
    """grades.csv: one row per student and assignment (:func:`.grade_rows.class_rows`), written in place
    of the old file only once it is whole.

    ``written_parts``: ``done`` when every hand-graded part has a grade, else ``to grade (N)``;
    a submission that the last run could not grade (``withdrawn``, :meth:`CourseLayout.not_graded`,
    written by :func:`withdraw_submission`) comes first, with no score and ``not graded``.
    ``overridden``: autograded parts whose score a grader changed by hand (the Formgrader allows it),
    as ``grade_id auto->manual``, so that no override goes unseen. Returns those overrides, one
    ``student assignment grade_id auto->manual`` each. Every cell goes through
    :func:`rbtutor.grading.report.csv_cell`, so no cell is read as a formula.
    ``due``: the student's own due date (with their extension), UTC. ``late_change``: how this
    run changed the late penalty and why (``late_changes``, :func:`rbtutor.course.late.settle_penalties`).
    ``refused`` receives ``student assignment notebook/grade_id: why`` for each hand grade not counted.
    """
    with grader.gradebook as gradebook:
        rows = class_rows(gradebook, withdrawn or ())
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", newline="") as out:
            writer = csv.writer(out)
            # late_penalty, final_score: points taken off for lateness (rbtutor.course.late), score less them
            writer.writerow(["student", "assignment", "score", "max_score", "written_parts", "overridden",
                             "late_penalty", "final_score", "due", "late_change"])
            for row in rows:
                graded = row.score is not None
                writer.writerow([csv_cell(cell) for cell in (
                    row.student, row.assignment, f"{row.score:g}" if graded else "", f"{row.max_score:g}",
                    row.written_parts, "; ".join(row.overridden), f"{row.late_penalty:g}" if graded else "",
                    f"{row.final_score:g}" if graded else "", f"{row.due:%Y-%m-%d %H:%M:%S} UTC" if row.due else "",
                    (late_changes or {}).get((row.student, row.assignment), ""))])
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    if refused is not None:
        refused += [f"{row.student} {row.assignment} {why}" for row in rows for why in row.refused]
    return [f"{row.student} {row.assignment} {text}" for row in rows for text in row.overridden]


_WORKER_API = {}
INTAKE = "intake"  # under CourseLayout.scratch: the checked copies nbgrader grades from


def _sources(layout: CourseLayout, assignment: str) -> dict[str, dict]:
    """The instructor's source notebooks of ``assignment`` (for the intake's source-copy check)."""

    return {path.stem: nbformat.read(path, as_version=4)
            for path in sorted((layout.exercises / assignment).glob("*.ipynb"))}


def take_in_submission(layout: CourseLayout, assignment: str, student: str):
    """Check and copy ``submitted/<student>/<assignment>`` into the grader's own intake folder.

    nbgrader then grades from that copy (``CourseDirectory.submitted_directory``), never from
    the folder the student filled. The intake's events go to the integrity report. The copy's
    ``timestamp.txt``, which nbgrader's late penalty reads, is written here with the trusted
    submission time (:func:`submission_time`), replacing the student's claim.
    """

    stage = layout.scratch / INTAKE / student / assignment
    if stage.exists() or stage.is_symlink():
        remove_tree(stage)
    stage.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.scratch, 0o700)
    sources = _sources(layout, assignment)
    result = take_in(layout.submitted(student, assignment), stage, sources=sources)
    # A notebook the intake refused (a link, a copy of the source, unreadable) earns nothing: the
    # blank released version stands in for it, so the submission is graded (zero) and not lost.
    for name in sources:
        blank = layout.release / assignment / f"{name}.ipynb"
        if not (stage / f"{name}.ipynb").exists() and blank.is_file():
            shutil.copyfile(blank, stage / f"{name}.ipynb")
            os.chmod(stage / f"{name}.ipynb", 0o644)
    received, note = submission_time(layout, assignment, student)
    if note:
        result.events.append(note)
    _write_time(stage, received)
    record_events(layout.integrity / student / assignment / "_files.json", student, assignment,
                  "(submission files)", "intake", result.events, fresh=True)
    return result


def submission_time(layout: CourseLayout, assignment: str, student: str) -> tuple[str, dict | None]:
    """The time ``student`` handed ``assignment`` in, as nbgrader writes times, and an event or None.

    The receipt of :func:`rbtutor.grading.intake.collect` when there is one. A submission put into
    ``submitted/`` another way (``nbgrader collect``, by hand) has none: its time is then when its
    files reached ``submitted/`` (their newest ctime), never the student's claim, and a
    ``no_receipt`` event says so.
    """


    receipt = read_receipt(layout.submitted(), student, assignment)
    if receipt is not None:
        return receipt["received"], None
    folder = layout.submitted(student, assignment)
    newest = os.lstat(folder).st_ctime
    for base, folders, files in os.walk(folder):
        for name in folders + files:
            newest = max(newest, os.lstat(os.path.join(base, name)).st_ctime)
    received = format_time(dt.datetime.fromtimestamp(newest, dt.UTC))
    return received, event("no_receipt", f"{assignment} of {student} was not collected by `python -m rbtutor.course "
                           f"collect` (no receipt); its time is when its files reached submitted/, {received}, not "
                           "the time its timestamp.txt claims.", received=received)


def _write_time(stage: Path, received: str) -> None:
    """Put the trusted time into the grader's copy as ``timestamp.txt`` (whatever was there is gone)."""

    path = stage / "timestamp.txt"
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.write_text(received)
    os.chmod(path, 0o644)


#: the longest one submission may take in a grading worker, every step together: the
#: notebook's own limit (``BoundedExecute.notebook_timeout``, 300 s) and the feedback's (30 s)
#: with room for intake, judging and gradebook writes. Past it the submission is NOT GRADED
#: and the run goes on.
SUBMISSION_SECONDS = GRADING.run_submission_seconds


class SubmissionTimeout(Exception):
    """One submission's grading went past its time bound (:data:`SUBMISSION_SECONDS`)."""


def autograde_one(job: tuple[str, str, str], seconds: float = SUBMISSION_SECONDS
                   ) -> tuple[str, str, str, float, str | None]:
    """Take in, autograde and make feedback for one submission; runs in a worker process.

    Whatever one submission raises (nbgrader's ``MissingEntry``, a broken gradebook row, a
    failed feedback page) is its own result, ``NOT GRADED`` with the reason: it never ends the
    run. So is a submission that takes longer than ``seconds`` in all
    (:func:`rbtutor.grading.time_bound.time_bound`; in the main thread only).
    """
    root, assignment, student = job
    start = time.perf_counter()
    try:
        with time_bound(seconds, SubmissionTimeout(f"grading it took longer than {seconds:g} s, "
                                                   "all steps together")):
            summary, problem = _grade_submission(CourseLayout(Path(root)), assignment, student)
    except Exception as exc:  # noqa: BLE001 - one submission never ends the run: whatever it raised is its reason
        summary, problem = "NOT GRADED", f"{type(exc).__name__}: {exc}"
    if problem:  # any step that failed leaves the whole submission ungraded (finish_run withdraws its points)
        summary = "NOT GRADED"
    return assignment, student, summary, time.perf_counter() - start, problem


def _grade_submission(layout: CourseLayout, assignment: str, student: str) -> tuple[str, str | None]:
    """``(summary, problem or None)`` of grading one submission."""

    check_id(student)  # nbgrader globs the id: only an id without glob characters reaches it
    start_zygote()  # kernels start as copies of one prepared process: the run's, or this worker's own
    share_gradebook_engines()
    root = str(layout.root)
    grader = _WORKER_API.get(root) or _WORKER_API.setdefault(root, api(layout))
    try:
        take_in_submission(layout, assignment, student)
    except (OSError, ValueError) as exc:
        return "NOT GRADED", f"intake: {exc}"
    grader.coursedir.submitted_directory = str((layout.scratch / INTAKE).relative_to(layout.root))
    before = hand_grades_before_regrade(grader, layout, assignment, student)
    result = grader.autograde(assignment, student, force=True)
    if not result["success"]:
        return "NOT GRADED", result["log"][-800:]
    reset = keep_hand_grades(grader, layout, assignment, student, before)
    with grader.gradebook as gradebook:
        sub = gradebook.find_submission(assignment, student)
        summary = f"{sub.code_score:g}/{sub.max_code_score:g} autograded"
        summary += ", written parts to grade" if sub.needs_manual_grade else ""
    if reset:
        summary += f", {len(reset)} hand grade(s) reset (answer changed)"
    try:
        write_feedback_pages(layout, grader, assignment, student)
    except (OSError, ValueError) as exc:
        return summary, f"feedback: {exc}"
    layout.not_graded_mark(student, assignment).unlink(missing_ok=True)  # graded now: the mark goes
    return summary, None


def withdraw_submission(layout: CourseLayout, grader, assignment: str, student: str, reason: str) -> None:
    """Leave a submission that a step could not grade with no points anywhere, and say so.

    Its rows go from the gradebook (whatever a step wrote before the failure, scores included),
    its ``autograded/`` notebook and its ``feedback/`` pages are removed, and the event
    ``not_graded`` with the reason is kept in ``integrity/<student>/<assignment>/_not_graded.json``
    until a run grades it: :func:`export_grades`, the class report and the integrity report
    read that file, so all three say "not graded". Hand grades are not lost: their scores,
    comments and the hashes of the answers they graded stay in the hand-grade record, and
    the next run that grades the submission gives them back while the answers are unchanged
    (:func:`.hand_grades.hand_grades_before_regrade`). Safe to call twice.
    """
    with grader.gradebook as gradebook, contextlib.suppress(MissingEntry):
        gradebook.remove_submission(assignment, student)
    for folder in (layout.autograded(student, assignment), layout.feedback(student, assignment)):
        if folder.exists() or folder.is_symlink():
            remove_tree(folder)
    record_events(layout.not_graded_mark(student, assignment), student, assignment, "(grading)", "grade",
                  [event("not_graded", f"{assignment} of {student} could not be graded: {reason}. It holds no "
                         "points until a run grades it; the next `grade` tries again.", reason=reason)],
                  fresh=True)


def _submission_secret(path: Path) -> str | None:
    """The token nbgrader's submit wrote, if ``path`` is a small regular file holding one; else None."""

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        text = handle.read(257).decode("ascii", "replace").strip()
    return text if re.fullmatch(r"[A-Za-z0-9+/=_.-]{1,256}", text) else None


def write_feedback_pages(layout: CourseLayout, grader, assignment: str, student: str) -> list[Path]:
    """``feedback/<student>/<assignment>/<notebook>.html`` for each autograded notebook.

    The folder is made afresh and holds only the pages written here (nbgrader's own
    feedback would copy every other file of the autograded folder, include hidden tests
    and load MathJax from a CDN). Pages are rendered by :func:`rbtutor.grading.feedback.render_feedback`.
    """


    scores: dict[str, dict] = {}
    with grader.gradebook as gradebook:
        submission = gradebook.find_submission(assignment, student)
        timestamp = submission.timestamp
        for notebook in submission.notebooks:
            comments = {c.name: c.comment for c in notebook.comments}
            scores[notebook.name] = {g.name: (g.score if not g.needs_manual_grade else None, g.max_score,
                                              comments.get(g.name)) for g in notebook.grades}
    folder = layout.feedback(student, assignment)
    if folder.exists() or folder.is_symlink():
        remove_tree(folder)
    folder.mkdir(parents=True)
    # what nbgrader's release_feedback and fetch_feedback match a student's pages by, written
    # here by the grader (the secret is checked to be a short token before it is copied)
    if timestamp is not None:
        (folder / "timestamp.txt").write_text(timestamp.strftime("%Y-%m-%d %H:%M:%S.%f %Z").strip())
    secret = _submission_secret(layout.autograded(student, assignment) / "submission_secret.txt")
    if secret:
        (folder / "submission_secret.txt").write_text(secret)
    written = []
    for name, notebook_scores in sorted(scores.items()):
        source = layout.autograded(student, assignment) / f"{name}.ipynb"
        nb = nbformat.read(source, as_version=4)
        # bounded in time and size (rendering one hostile notebook once took 55 s); a cut is named
        page, cuts = render_bounded(nb, notebook_scores, title=f"{assignment}: feedback for {student}")
        write_feedback(folder / f"{name}.html", page)
        written.append(folder / f"{name}.html")
        events = layout.integrity / student / assignment / f"_feedback_{name}.json"
        if cuts:
            record_events(events, student, assignment, name, "feedback",
                          [event("feedback_cut", f"feedback page {name}: {c}") for c in cuts], fresh=True)
        else:
            events.unlink(missing_ok=True)
    return written


#: What a grading worker imports, once in the process the workers are forked from; the last
#: one fills the caches a worker's first notebook would otherwise fill (:mod:`.warm_worker`).
WORKER_MODULES = ("rbtutor.course.grade", "nbgrader.apps", "nbgrader.converters.autograde", "nbclient",
                  "rbtutor.grading.execute", "rbtutor.grading.feedback", "rbtutor.grading.judge",
                  "rbtutor.grading.restore", "rbtutor.grading.intake", "rbtutor.grading.report",
                  "rbtutor.course.warm_worker")


def worker_pool(jobs: int):
    """A pool of ``jobs`` grading workers (a ``ProcessPoolExecutor``).

    The workers are forked from a process that has imported the grading code (each would spend
    1.3 CPU s on it otherwise): this one, which imports :data:`WORKER_MODULES` first, when it runs
    no other thread; else multiprocessing's fork server, which imports them itself. A fork copies
    only the forking thread, so a lock another thread held at that moment (a Dask client's event
    loop, a broken pool's manager thread still ending) would stay locked in the worker for ever.
    Forking this process spares the fork server's own import of the grading code: 1.75 CPU s and
    as many seconds before the first worker starts (measured 2026-12-04, class of 30). Before the
    fork, ``gc.freeze()`` moves this process's objects out of the collector's reach, so that a
    worker's collections do not write to (and so copy) every page it shares with this process:
    the run's processes held 676-682 MB at most instead of 825-830 (class of 300, two runs each).
    Each worker then takes this process's environment and working folder as they are now.
    """

    if threading.active_count() == 1:
        for name in WORKER_MODULES:
            importlib.import_module(name)
        gc.freeze()
        context = get_context("fork")
    else:
        context = get_context("forkserver")
        context.set_forkserver_preload(list(WORKER_MODULES))
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_adopt,
                               initargs=(dict(os.environ), os.getcwd()))


def _adopt(environ: dict[str, str], folder: str) -> None:
    """A new worker's start: the grading process's environment and working folder."""
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(folder)


def default_jobs() -> int:
    """Worker processes for ``grade``: one per usable core, plus one.

    A worker spends part of each notebook waiting (its kernel starting inside the
    sandbox, messages to and from it), so one spare worker keeps the cores busy:
    measured on 2 cores with 66 notebooks of the reference solutions (2026-12-03), 0.47 s
    per notebook with 3 workers, 0.45 s with 4 or 5, which cost 8 and 14 % more CPU.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores + 1


REFUSED = "_refused"  # under integrity/: events of ids that are not acceptable (no id starts with '_')


def record_refused_id(layout: CourseLayout, assignment: str, student: str, stage: str, events: list[dict]) -> None:
    """Put the events of a refused student id into the report, in a file not named by the id."""
    name = hashlib.sha256(student.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    record_events(layout.integrity / REFUSED / assignment / f"{stage}-{name}.json", student, assignment,
                  "(student id)", stage, events, fresh=True)


def _students(layout: CourseLayout) -> list[str]:
    """The folder names of ``submitted/`` (each a claimed student id), sorted."""
    folder = layout.submitted()
    if not folder.is_dir():
        return []
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))


def start_run(layout: CourseLayout):
    """Before a grading run: back up the gradebook, list the submissions as jobs
    ``(course root, assignment, student)`` and create their students (so that workers never race
    to create one). A folder of ``submitted/`` whose name is not an acceptable id is not a job: it
    is named (``bad_name``) and listed as not graded. Returns ``(grader, jobs, refused)``, refused
    as ``(assignment, student, reason)``."""
    root = layout.root
    grader = api(layout)
    if layout.gradebook_file.exists():
        shutil.copy2(layout.gradebook_file, root / "gradebook.db.bak")
    work, refused = [], []
    for assignment in layout.assignments():
        for student in _students(layout):
            if not (layout.submitted() / student / assignment).is_dir():
                continue
            why = id_problem(student)
            if why is None:
                work.append((str(root), assignment, student))
                continue
            reason = f"bad_name: the student id {why}; not graded"
            record_refused_id(layout, assignment, student, "grade", [event(
                "bad_name", f"The folder submitted/{student}/{assignment} names a student id that {why}; "
                "it was not graded.", path=f"submitted/{student}/{assignment}")])
            refused.append((assignment, student, reason))
    with grader.gradebook as gradebook:
        index_gradebook(gradebook.engine)  # each notebook's lookups: no scan of the class's rows
        for student in sorted({s for _, _, s in work}):
            gradebook.update_or_create_student(student)
        class_list = [s.id for s in gradebook.students]
    # due dates and extensions of exercises/due_dates.yaml, before any penalty is worked out
    for line in prepare_deadlines(layout, grader, [(a, s) for _, a, s in work]):
        print(f"due dates: {terminal_text(line)}", flush=True)
    if work:
        store_class_keys(layout, grader, class_list)
    return grader, work, refused


def store_class_keys(layout: CourseLayout, grader, students: list[str]) -> Path | None:
    """Work out every student's key once, before the workers start, where the judges read them
    (``c.JudgeAnswers.class_keys``, under the grader's scratch folder). Only when the course has
    per-student variants: otherwise there are no classmates' numbers to compare with. Returns the
    folder, or None when nothing was stored."""

    section = grader.config.JudgeAnswers
    store = section.class_keys if "class_keys" in section else ""
    data_file = section.data_file if "data_file" in section else None
    data, _ = course_reference(data_file)
    if not store or not per_student(data):
        return None
    layout.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(layout.scratch, 0o700)
    return write_class_keys(store, data, students, new_pool=lambda _: worker_pool(default_jobs()))


def finish_run(layout: CourseLayout, grader, count: int, failures: list, elapsed: float, where: str) -> int:
    """After a grading run: grades.csv, the integrity report, the class report, the summary line and
    every submission not graded with its reason. Returns the exit status (1 when some submission was
    not graded, or grades.csv or a report could not be written)."""

    status = 1 if failures else 0
    for assignment, student, reason in failures:  # no points anywhere for a submission not graded
        if id_problem(student):
            continue  # a refused id never reached the gradebook or the grader's folders
        try:
            withdraw_submission(layout, grader, assignment, student, str(reason))
        except (OSError, ValueError, SQLAlchemyError) as exc:
            print(f"could not withdraw {terminal_text(student)} {terminal_text(assignment)}, which was not "
                  f"graded: {terminal_text(exc)}", file=sys.stderr)
    try:  # every late penalty again, from the current due dates and the final scores
        late_changes = settle_penalties(layout, grader)
    except (OSError, ValueError) as exc:
        print(f"could not work out the late penalties: {terminal_text(exc)}", file=sys.stderr)
        late_changes, status = {}, 1
    for (student, assignment), change in sorted(late_changes.items()):
        print(f"late penalty changed: {terminal_text(student)} {terminal_text(assignment)} {terminal_text(change)}")
    refused: list[str] = []  # hand grades that are not a number from 0 to the part's points
    try:
        changed = export_grades(grader, layout.grades_csv, late_changes, refused, layout.not_graded())
    except (OSError, ValueError) as exc:
        print(f"could not write {layout.grades_csv}: {terminal_text(exc)}", file=sys.stderr)
        changed, status = [], 1
    for line in refused:
        print(f"hand grade not counted, grade this part again: {terminal_text(line)}", file=sys.stderr)
    status = 1 if refused else status
    if changed:
        print(f"{len(changed)} autograded score(s) changed by hand in the Formgrader (the overridden "
              "column of grades.csv):")
        for line in changed:
            print(f"  {terminal_text(line)}")
    try:
        print(f"integrity report: {write_integrity_report(layout.root)}")
    except (OSError, ValueError) as exc:
        print(f"could not write the integrity report: {terminal_text(exc)}", file=sys.stderr)
        status = 1

    try:
        print(f"class report: {write_class_report(layout, grader, failures)}")
    except (OSError, ValueError) as exc:
        print(f"could not write the class report: {terminal_text(exc)}", file=sys.stderr)
        status = 1
    left = f" ({len(failures)} not graded or with a problem, listed below)" if failures else ""
    print(f"graded {count - len(failures)} submissions{left} in {elapsed:.1f} s {where}; "
          f"grades: {layout.grades_csv}; feedback: {layout.root / 'feedback'}")
    for assignment, student, reason in failures:
        print(f"could not grade {terminal_text(student)} {terminal_text(assignment)}: {terminal_text(reason)}",
              file=sys.stderr)
    return status


def progress_line(k: int, total: int, student: str, assignment: str, summary: str, seconds: float,
                  elapsed: float | None = None) -> str:
    """One line of progress, with whatever a submission could put into it shown as text.

    With ``elapsed`` (seconds since the first submission started), the time the rest will take at
    the pace so far: ``[3/60] s1 problem03: 11/13 autograded (0.4 s; about 1 min left)``.
    """
    took = [] if seconds != seconds else [f"{seconds:.1f} s"]  # NaN: the task never returned
    if elapsed is not None and 0 < k < total:
        took.append(f"about {duration_text(elapsed / k * (total - k))} left")
    took_text = f" ({'; '.join(took)})" if took else ""
    return f"[{k}/{total}] {terminal_text(student)} {terminal_text(assignment)}: {terminal_text(summary)}{took_text}"


def duration_text(seconds: float) -> str:
    """A duration as a person says it: ``under 1 s``, ``40 s``, ``3 min``, ``1 h 20 min``."""
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def grade(layout: CourseLayout, jobs: int | None = None) -> int:
    """Autograde every submission, ``jobs`` at a time (:func:`default_jobs` by default)."""

    # one zygote for the run (the workers inherit its name): every kernel starts as a copy of it;
    # it starts while start_run works out the class's keys
    with zygote_starting() as zygote_ready:
        try:
            grader, work, failures = start_run(layout)
        except ValueError as exc:  # exercises/due_dates.yaml is checked before anything is graded
            print(f"rbtutor.course grade: {terminal_text(exc)}", file=sys.stderr)
            return 2
        jobs = jobs or default_jobs()
        count = len(work) + len(failures)
        start = time.perf_counter()
        zygote_ready()
        if jobs == 1:
            results = map(autograde_one, work)
        else:
            pool = worker_pool(jobs)
            results = _pool_results(pool, work)
        for k, (assignment, student, summary, seconds, problem) in enumerate(results, 1):
            print(progress_line(k, len(work), student, assignment, summary, seconds, time.perf_counter() - start),
                  flush=True)
            if problem:
                failures.append((assignment, student, problem))
        if jobs != 1:
            pool.shutdown()
    return finish_run(layout, grader, count, failures, time.perf_counter() - start, f"with {jobs} worker(s)")


def _pool_results(pool, work, task=None, new_pool=None):
    """The result of every job of ``work``, in order, from ``pool``.

    When a worker process dies, ``ProcessPoolExecutor`` fails every job still pending, not
    only the one that worker held. So the jobs whose result was lost are tried once more, each
    in a pool of its own (``new_pool(1)``, :func:`worker_pool` by default): a job that kills its
    worker again is its own failure, and the others are graded.
    """

    task = task or autograde_one
    new_pool = new_pool or worker_pool
    futures = [pool.submit(task, job) for job in work]
    for job, future in zip(work, futures, strict=True):
        try:
            yield future.result()
        except BrokenProcessPool:
            yield _alone(job, task, new_pool)


def _alone(job, task, new_pool):
    """``task(job)`` in a new one-worker pool; a worker that dies makes it NOT GRADED."""

    _, assignment, student = job
    with new_pool(1) as pool:
        try:
            return pool.submit(task, job).result()
        except BrokenProcessPool as exc:
            return assignment, student, "NOT GRADED", float("nan"), f"its worker process died ({exc})"


def return_feedback(layout: CourseLayout) -> int:
    """Put every generated feedback file into the exchange, where students fetch it.

    Uses nbgrader's exchange class directly (NbGraderAPI.release_feedback of nbgrader
    0.9.6 misspells its ``authenticator`` argument), one student at a time, so that
    one failure is reported and the others still get their feedback.
    """
    grader = api(layout)
    failures = 0
    for name in layout.assignments():
        students = sorted(p.parent.name for p in layout.feedback().glob(f"*/{name}"))
        returned = 0
        for student in students:
            if id_problem(student):  # nbgrader's release_feedback globs the id: only checked ids reach it
                print(f"not returning {name} feedback to {terminal_text(student)}: the student id "
                      f"{id_problem(student)}", file=sys.stderr)
                failures += 1
                continue
            grader.coursedir.assignment_id, grader.coursedir.student_id = name, student
            release = grader.exchange.ReleaseFeedback(coursedir=grader.coursedir,
                                                      authenticator=grader.authenticator, parent=grader)
            try:
                release.start()
            except Exception as exc:  # noqa: BLE001 - nbgrader raises ExchangeError and plain OSError alike
                print(f"could not return {name} feedback to {student}: {terminal_text(exc)}", file=sys.stderr)
                failures += 1
                continue
            returned += 1
        if students:
            print(f"{name}: feedback returned to {returned} students", flush=True)
    return 1 if failures else 0


PLANTED = "_planted.json"  # in integrity/<owner>/<assignment>/: entries the owner made under other names


def record_planted(layout: CourseLayout, assignment: str, results) -> None:
    """Name the owner of every refused ``wrong_owner`` entry in the owner's own part of the report.

    The student an entry named gets the ``wrong_owner`` event; the account that made it gets a
    ``planted_entry`` event (when its name is an acceptable id), so that the report points at
    who did it. That evidence is kept: an entry named once stays in the owner's part of every
    later report, whatever the students hand in afterwards and even once the entry is gone
    from the exchange or no longer checked (then marked ``found_by_last_collect: false``), until
    the instructor clears it
    (:func:`clear_planted`).
    """
    planted: dict[str, list[dict]] = {}
    for student, intake in results:
        for found in intake.events:
            if found["kind"] != "wrong_owner":
                continue
            for owner in found.get("owner", []):
                planted.setdefault(owner, []).append(event(
                    "planted_entry", f"This account owns the exchange entry {found['path']} (or something in "
                    f"it), which names another student ({student}); it was not collected.",
                    path=found["path"], named=student, found_by_last_collect=True))
    for old in layout.integrity.glob(f"*/{assignment}/{PLANTED}"):
        planted.setdefault(old.parent.parent.name, [])
    for owner, events in planted.items():
        if id_problem(owner):
            record_refused_id(layout, assignment, owner, "planted", events)
            continue
        path = layout.integrity / owner / assignment / PLANTED
        seen = {(e["path"], e["named"]) for e in events}
        for earlier in _planted_events(path):
            if (earlier.get("path"), earlier.get("named")) not in seen:
                events.append({**earlier, "found_by_last_collect": False})
        record_events(path, owner, assignment, "(exchange entry)", "collect", events, fresh=True)


def _planted_events(path: Path) -> list[dict]:
    """The ``planted_entry`` events kept in ``path`` by earlier collects ([] when there are none)."""
    try:
        events = json.loads(path.read_text())["stages"]["collect"]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"expected the evidence file {path} to be a report record, got {exc}") from None
    return [e for e in events if isinstance(e, dict) and e.get("kind") == "planted_entry"]


def clear_planted(layout: CourseLayout, assignment: str, owner: str) -> bool:
    """Drop the kept evidence of the entries ``owner`` planted in ``assignment``; True if there was some.

    For the instructor, once the case is dealt with (and the entries removed from the exchange:
    an entry still there is found, and named, again by the next collect).
    """
    path = layout.integrity / owner / assignment / PLANTED if not id_problem(owner) else None
    if path is None or not path.exists():
        return False
    path.unlink()
    return True


def collect(layout: CourseLayout, assignment: str, clear: tuple[str, ...] = ()) -> int:
    """Take every student's newest submission of ``assignment`` from the exchange into ``submitted/``.

    Replaces ``nbgrader collect``, which copies with ``shutil.copytree`` from folders students can
    write and so follows their links: here every file goes through :func:`rbtutor.grading.intake.collect`.
    """

    if assignment not in layout.assignments():
        print(f"no assignment {assignment!r} in {layout.exercises}", file=sys.stderr)
        return 2
    inbound = layout.exchange / "rbtutor" / "inbound"
    if not inbound.is_dir():
        print(f"nothing to collect: {inbound} does not exist", file=sys.stderr)
        return 1
    try:
        check_owner = owner_check(api(layout).config)
    except ValueError as exc:
        print(f"rbtutor.course collect: {exc}", file=sys.stderr)
        return 2
    for owner in clear:
        cleared = clear_planted(layout, assignment, owner)
        print(f"{terminal_text(owner)} {assignment}: evidence of planted entries "
              + ("cleared" if cleared else "not found, nothing cleared"))
    results = take(inbound, layout.submitted(), assignment, sources=_sources(layout, assignment),
                   check_owner=check_owner)
    record_planted(layout, assignment, results)
    taken = 0
    for student, intake in results:
        # what was refused in the exchange is in the integrity report until the next collect
        if id_problem(student):
            record_refused_id(layout, assignment, student, "collect", intake.events)
        else:
            record_events(layout.integrity / student / assignment / "_collect.json", student, assignment,
                          "(exchange entry)", "collect", intake.events, fresh=True)
        taken += bool(intake.taken)
        problems = "; ".join(e["message"] for e in intake.events)
        print(terminal_text(f"{student} {assignment}: {len(intake.taken)} file(s) taken"
                            + (f", {len(intake.events)} problem(s): {problems}" if problems else "")))
    owners = "checked" if check_owner else "not checked (c.ExchangeCollect.check_owner = False)"
    print(f"collected {assignment} from {taken} student(s) into {layout.submitted()}; entry owners {owners}")
    return 0
