"""Due dates, extensions and the late policy of a course (the grading run's deadline step).

Due dates. ``exercises/due_dates.yaml`` (optional) maps an assignment to the moment it is
due, an ISO 8601 date and time with its time zone, or to that moment and the students who
were given more time::

    problem03: 2025-10-06T23:59:00+02:00
    problem04:
      due: 2025-10-13T23:59:00+02:00
      extensions:
        student1: 2025-10-16T12:00:00+02:00   # a later due date of their own
        student2: 3d                          # or time added: Nd days, Nh hours

:func:`read_due_dates` checks the whole file and refuses, naming the place and what it
expected: an assignment the course does not have, a time without its zone, a key other than
``due`` and ``extensions``, a duration that is not a positive ``Nd`` or ``Nh``, a student id
:func:`rbtutor.grading.student_ids.check_id` refuses, an extension that ends before the
assignment's due date, a time that is not between the years 1 and 9999 in UTC (or an extension
that takes it past them), and a key written twice. Every refusal is one short
:class:`ValueError` (values are quoted cut short).

Keys are read as written: an unquoted ``20231234: 3d`` (a matriculation number) is the student
id ``20231234``, and ``0123`` is ``0123``, never the number YAML 1.1 would make of it (83). The
file is read with a bounded loader (:func:`load_due_dates_text`), since the personalising
service reads it as well: at most :data:`MAX_FILE_BYTES` bytes and :data:`MAX_TOKENS` YAML
items, nested at most :data:`MAX_NESTING` deep, and no anchors, aliases or tags (``&a``,
``*a``, ``!!str``), so a few lines cannot expand into millions of items. Times are kept as
text by the loader and read by :func:`datetime.datetime.fromisoformat` (or as YAML's
timestamps, ``2030-03-01 12:00:00 +1``), so that a bad one is refused with its entry's name.

``python -m rbtutor.course generate`` (``make assignments``) and every grading run
(``make grade``, :func:`prepare_deadlines`) write the file into the gradebook: the
assignment's due date, and each submission's ``extension`` (nbgrader's, the time between the
assignment's due date and the student's own), so nbgrader's ``SubmittedAssignment.duedate``
is the student's own due date. When the file exists it is the whole truth: an assignment it
does not list has no due date and a student it does not name has no extension. When there is
no file, the gradebook's due dates and extensions are left as they are (for example set with
``nbgrader db assignment add problem03 --duedate=...``). An extension for a student the
gradebook does not know yet is reported (it takes effect when that student's work is first
graded), never dropped without a word.

The late policy. A submission is late when its submission time is after the student's own
due date. That time is the one the student cannot set: when the exchange entry appeared (the
newest ctime of the entry and of everything in it), never earlier than the time in the entry's
name, kept in the receipt ``collect`` writes (:func:`rbtutor.grading.intake.collect`) and put
by ``grade`` into the grader's own copy as the ``timestamp.txt`` nbgrader reads
(:func:`rbtutor.course.grade.submission_time`), from which nbgrader sets the submission's
``timestamp``. The ``timestamp.txt`` nbgrader's ``submit`` wrote is only the student's claim: it
is kept, compared (``timestamp_mismatch`` in the integrity report when it is more than a minute
off) and never used. The late-penalty plugin, :class:`PercentPerDay`, gives each notebook's
penalty: a fixed share (``PercentPerDay.percent_per_day``, 10 % by default) of the notebook's
score for every day or part of a day after the due date, never more than the score itself, so
a late score is never below zero. A course changes the share in its ``nbgrader_config.py``,
after ``configure``::

    c.PercentPerDay.percent_per_day = 20.0   # 0 marks late submissions without a penalty

Moved deadlines. nbgrader works a penalty out only while it autogrades a notebook, from the
score of that moment. At the end of every grading run :func:`settle_penalties` works every
submission's penalties out again from the gradebook as it is then (the due dates and
extensions of the current file, the trusted submission time, the final scores, hand grades
included), and compares them with the penalties the gradebook held before the run
(:func:`prepare_deadlines` keeps those in the course's scratch folder). Each penalty that
changed is listed with its reason (a moved due date, a new or changed extension, a new
submission time, a changed score), printed and written to the ``late_change`` column of
``grades.csv``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import reprlib
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import yaml
from nbgrader.api import SubmittedAssignment, SubmittedNotebook
from nbgrader.plugins import LateSubmissionPlugin
from sqlalchemy.orm import joinedload, selectinload, undefer
from traitlets import Float
from traitlets.utils.importstring import import_item

from ..grading.config import GRADING
from ..grading.student_ids import check_id
from .layout import CourseLayout

DAY = 86400.0  # seconds

DUE_DATES = "due_dates.yaml"  # in the course's exercises/ folder
#: under the course's scratch folder: each submission's penalty and deadline before a grading run
BEFORE_RUN = "late_before_run.json"
#: time added by an extension: a positive number of days or hours
DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([dh])")
EXAMPLE_TIME = "2025-10-06T23:59:00+02:00"
#: a larger due-dates file is refused (a class of a thousand with ten extensions each fits in a third)
MAX_FILE_BYTES = 1 << 20
#: YAML items (keys, values, brackets, indentation marks) a due-dates file may hold; a few tokens an entry
MAX_TOKENS = 200_000
#: how deep mappings and lists may nest (the file's own shape needs three)
MAX_NESTING = 8
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


class PercentPerDay(LateSubmissionPlugin):
    """Late penalty: ``percent_per_day`` % of the score for every started day late, at most the score.

    Examples
    --------
    >>> PercentPerDay(percent_per_day=10).late_submission_penalty("s1", 8.0, 1.5 * 86400)
    1.6
    """

    percent_per_day = Float(GRADING.late_percent_per_day, help="Share of the notebook's score taken off for "
                            "every day, or part of a day, that the submission is late, in percent (0 to 100)."
                            ).tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        """The points taken off a notebook scored ``score`` and submitted ``total_seconds_late`` late."""
        if not 0.0 <= self.percent_per_day <= 100.0:
            raise ValueError(f"expected PercentPerDay.percent_per_day between 0 and 100, got {self.percent_per_day}")
        if total_seconds_late <= 0 or score is None or score <= 0:
            return None
        days = math.ceil(total_seconds_late / DAY)
        share = min(1.0, days * self.percent_per_day / 100.0)
        penalty = round(score * share, 6)
        self.log.info("%s is %.0f s late (%d started day(s)): %.4g of %.4g points off",
                      student_id, total_seconds_late, days, penalty, score)
        return penalty


@dataclass(frozen=True)
class Deadline:
    """One assignment's due date and the students' own later ones (all timezone-aware)."""

    due: dt.datetime
    extensions: dict[str, dt.datetime] = field(default_factory=dict)

    def of(self, student: str) -> dt.datetime:
        """``student``'s own due date: their extension, else the assignment's."""
        return self.extensions.get(student, self.due)


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlist = _SHORT.maxdict = _SHORT.maxtuple = _SHORT.maxset = 4
_SHORT.maxlevel = 2


def _shown(value) -> str:
    """``repr(value)`` cut short, for messages: a value of the file may be long."""
    return _SHORT.repr(value)


def _names(keys) -> str:
    """Keys of a mapping for a message: the first few, each cut short."""
    keys = [str(k) for k in keys]
    shown = ", ".join(k if len(k) <= 40 else k[:37] + "..." for k in keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "") if keys else "none"


def _in_range(when: dt.datetime, where: str, shown: str) -> dt.datetime:
    """``when`` itself when it is a time the gradebook can store (in UTC, years 1 to 9999); ValueError otherwise."""
    try:
        when.astimezone(dt.UTC)
    except OverflowError:
        raise ValueError(f"expected {where} between the years 1 and 9999 in UTC, got {shown}") from None
    return when


def _yaml_time(text: str) -> dt.datetime | None:
    """``text`` read as YAML reads an unquoted timestamp (``2030-03-01 12:00:00 +1`` as well as ISO 8601),
    or None when it is not one: files written before times were kept as text read as they did."""
    if not yaml.constructor.SafeConstructor.timestamp_regexp.match(text):
        return None
    try:
        return yaml.constructor.SafeConstructor().construct_yaml_timestamp(yaml.ScalarNode(_TIMESTAMP, text))
    except (ValueError, OverflowError):
        return None


def _time(value, where: str) -> dt.datetime:
    """A timezone-aware datetime from an ISO 8601 (or YAML timestamp) text with its zone; ValueError otherwise."""
    when = value
    if isinstance(when, str):
        try:
            when = dt.datetime.fromisoformat(when)
        except ValueError:
            when = _yaml_time(value)
    if not isinstance(when, dt.datetime) or when.tzinfo is None:
        raise ValueError(f"expected {where} as a date and time with its time zone, such as {EXAMPLE_TIME}, "
                         f"got {_shown(value)}")
    return _in_range(when, where, _shown(value))


def _extension(value, due: dt.datetime, where: str) -> dt.datetime:
    """The own due date an extension entry gives: a time, or ``Nd``/``Nh`` added to ``due``."""
    match = DURATION.fullmatch(value.strip()) if isinstance(value, str) else None
    if match:
        amount = float(match.group(1))  # a long run of digits is inf, refused below
        if amount <= 0:
            raise ValueError(f"expected {where} as a positive number of days or hours (3d, 12h), "
                             f"got {_shown(value)}")
        try:
            when = due + dt.timedelta(**{"days" if match.group(2) == "d" else "hours": amount})
            when.astimezone(dt.UTC)
        except OverflowError:
            raise ValueError(f"expected {where} to end before the year 10000 in UTC, got {_shown(value)} "
                             f"after {due.isoformat()}") from None
        return when
    if isinstance(value, str) and not value[:4].isdigit():
        raise ValueError(f"expected {where} as a later date and time with its time zone ({EXAMPLE_TIME}) or "
                         f"time added as Nd or Nh (3d, 12h), got {_shown(value)}")
    when = _time(value, where)
    if when < due:
        raise ValueError(f"expected {where} no earlier than the due date {due.isoformat()}, got {when.isoformat()}")
    return when


def _deadline(name: str, value) -> Deadline:
    """One assignment's entry of the file: a time, or ``{due: time, extensions: {student: time or Nd}}``."""
    if not isinstance(value, dict):
        return Deadline(_time(value, f"{name}'s due date"))
    unknown = sorted(set(map(str, value)) - {"due", "extensions"})
    if unknown or "due" not in value:
        raise ValueError(f"expected {name} to have the keys due and (optionally) extensions, got {_names(value)}")
    due = _time(value["due"], f"{name}'s due date")
    extensions = value.get("extensions") or {}
    if not isinstance(extensions, dict):
        raise ValueError(f"expected {name}'s extensions as a mapping of student id to a time or Nd, got "
                         f"{type(extensions).__name__} {_shown(extensions)}")
    own = {}
    for student, until in extensions.items():
        try:
            check_id(student)
        except ValueError as exc:
            raise ValueError(f"{name}'s extensions: {exc}") from None
        own[student] = _extension(until, due, f"{name}'s extension for {student}")
    return Deadline(due, own)


def parse_due_dates(path: Path, known: list[str] | None = None) -> dict[str, Deadline] | None:
    """The deadlines of the due-dates file ``path``; None when there is no file.

    ``known``, when given, are the course's assignments: any other name is an error.

    Raises
    ------
    ValueError
        Anything in the file that is not one of its two forms (see the module docstring).
    """

    path = Path(path)
    data = _read_bounded(path)
    if data is None:
        return None
    try:
        raw = load_due_dates_text(data.decode("utf-8")) or {}
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: expected UTF-8 text, got byte {exc.object[exc.start]:#04x} at {exc.start}") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of assignment to due date, got {type(raw).__name__}")
    deadlines = {}
    for name, value in raw.items():
        if known is not None and name not in known:
            raise ValueError(f"{path}: no assignment {_shown(name)} in {path.parent}")
        try:
            deadlines[str(name)] = _deadline(str(name), value)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    return deadlines


def _read_bounded(path: Path) -> bytes | None:
    """The bytes of the due-dates file ``path`` (links followed), at most :data:`MAX_FILE_BYTES`; None when
    there is no file (a link to a file not written yet included). ValueError when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError(f"{path}: expected a regular file")
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{path}: expected at most {MAX_FILE_BYTES >> 10} KiB, got a larger file")
    return data


_LOADER_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed: the same results, faster
_OPENING = (yaml.BlockMappingStartToken, yaml.BlockSequenceStartToken, yaml.FlowMappingStartToken,
            yaml.FlowSequenceStartToken)
_CLOSING = (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)


class _DueDatesLoader(_LOADER_BASE):
    """YAML's safe loader, except that times stay text (:func:`_time` reads them, naming the entry) and
    each key is the text as written (``0123`` is ``0123``), a key written twice being an error."""

    yaml_implicit_resolvers: ClassVar[dict] = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag != _TIMESTAMP]
        for first, resolvers in _LOADER_BASE.yaml_implicit_resolvers.items()}

    def construct_mapping(self, node, deep=False):
        mapping = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise ValueError(f"line {line}: expected a name as key, got a {key_node.id}")
            key = key_node.value
            if key in mapping:
                raise ValueError(f"line {line}: {_shown(key)} is written twice in the same mapping")
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _check_tokens(text: str) -> None:
    """Refuse, before anything is built, YAML that could cost more than its size: anchors, aliases and
    tags, more than :data:`MAX_TOKENS` items, nesting deeper than :data:`MAX_NESTING`."""
    depth = 0
    for count, token in enumerate(yaml.scan(text, Loader=_LOADER_BASE)):
        line = token.start_mark.line + 1
        if isinstance(token, (yaml.AnchorToken, yaml.AliasToken)):
            raise ValueError(f"line {line}: anchors and aliases (&name, *name) are not allowed here; "
                             "write each entry out")
        if isinstance(token, yaml.TagToken):
            raise ValueError(f"line {line}: tags (!!str, !name) are not allowed here; quote the value instead")
        if count >= MAX_TOKENS:
            raise ValueError(f"expected at most {MAX_TOKENS} YAML items, got more by line {line}")
        if isinstance(token, _OPENING):
            depth += 1
            if depth > MAX_NESTING:
                raise ValueError(f"line {line}: expected mappings and lists nested at most {MAX_NESTING} deep")
        elif isinstance(token, _CLOSING):
            depth -= 1


def load_due_dates_text(text: str):
    """The YAML of a due-dates file as Python objects, read within bounds (see the module docstring).

    Raises
    ------
    ValueError
        The text is not YAML, or breaks a bound; the message is short and gives the line.
    """
    try:
        _check_tokens(text)
        return yaml.load(text, Loader=_DueDatesLoader)  # a safe loader: see the class
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        raise ValueError(f"{where}expected YAML, got text that does not parse: "
                         f"{str(exc.problem or exc.context)[:120]}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"expected YAML, got text that does not parse: {str(exc)[:120]}") from None


def read_due_dates(layout: CourseLayout) -> dict[str, Deadline] | None:
    """The deadlines of ``exercises/due_dates.yaml``, checked against the course; None without the file."""
    return parse_due_dates(Path(layout.exercises) / DUE_DATES, known=list(layout.assignments()))


def due_dates_table(deadlines: dict[str, Deadline] | None, assignment: str | None = None) -> list[str]:
    """The lines of ``rbtutor due``: each assignment's due date, then each extension with its own date.

    Times in UTC, as grades.csv gives them; ``assignment`` keeps that one only.
    """
    if deadlines is None:
        return [f"no exercises/{DUE_DATES}: nothing is due and no submission is late"]
    lines = []
    for name in sorted(deadlines):
        if assignment is not None and name != assignment:
            continue
        deadline = deadlines[name]
        lines.append(f"{name}: due {deadline.due.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"
                     + (f", {len(deadline.extensions)} extension(s)" if deadline.extensions else ""))
        lines += [f"  {student}: {when.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"
                  for student, when in sorted(deadline.extensions.items())]
    if not lines:
        lines.append(f"{assignment}: no due date in exercises/{DUE_DATES} (not late, whenever handed in)")
    return lines


def publish_due_dates(layout: CourseLayout, published: str | Path | None = None) -> list[str]:
    """Make the due-dates file the hub's fetch service reads the course's own again; lines to print.

    ``published`` (by default ``$RBTUTOR_DUE_DATES``, which ``make hub`` sets for the instructor)
    is that file. On the hub the course's ``exercises/due_dates.yaml`` is a link to it, so an
    edit reaches the next fetch at once. A tool that replaces the link by a file of its own
    (``sed -i``, ``mv``, ``git checkout``) would leave the service with the old dates: then the
    course's file, checked first by the caller, is copied there (atomically, mode 0640, in the
    group of its folder, so that the service's account reads it and no student does) and the
    link is made again. Nothing happens without ``published``, without a course file, or when
    the course's file is ``published`` itself. A file that cannot be copied is said in a line,
    never raised: grading goes on.
    """
    published = published or os.environ.get("RBTUTOR_DUE_DATES")
    course_file = Path(layout.exercises) / DUE_DATES
    if not published or course_file.is_symlink() or not course_file.is_file():
        return []
    published = Path(published)
    if course_file.resolve() == published.resolve():
        return []
    temporary = None
    try:
        data = _read_bounded(course_file) or b""
        fd, temporary = tempfile.mkstemp(prefix=".due_dates-", dir=published.parent)
        with os.fdopen(fd, "wb") as handle:
            os.fchown(handle.fileno(), -1, os.stat(published.parent).st_gid)
            os.fchmod(handle.fileno(), 0o640)
            handle.write(data)
        os.replace(temporary, published)
        temporary = str(course_file.with_name(f".{DUE_DATES}-link-{os.getpid()}"))
        os.symlink(published, temporary)
        os.replace(temporary, course_file)
        temporary = None
    except (OSError, ValueError) as exc:
        return [f"could not copy {course_file} to {published}, where the hub's fetch service reads the due dates "
                f"({getattr(exc, 'strerror', None) or exc}): fetched notebooks show the dates of {published}"]
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
    return [f"{course_file} copied to {published}, where the hub's fetch service reads it, and linked to it again"]


def own_due_date(path: Path, assignment: str, student: str) -> tuple[dt.datetime | None, bool]:
    """``student``'s own due date of ``assignment`` in the due-dates file ``path`` (None: it has none),
    and whether it is an extension."""
    deadline = (parse_due_dates(path) or {}).get(assignment)
    if deadline is None:
        return None, False
    return deadline.of(student), student in deadline.extensions


def _utc(when: dt.datetime | None) -> dt.datetime | None:
    """The naive UTC time the gradebook stores (nbgrader compares it with the submission's)."""
    return when.astimezone(dt.UTC).replace(tzinfo=None) if when else None


def set_due_dates(layout: CourseLayout, grader, handing_in: list[tuple[str, str]] = ()) -> list[str]:
    """Write ``exercises/due_dates.yaml`` into the gradebook; one line per assignment and per note.

    ``grader`` is the course's ``NbGraderAPI``. Nothing is changed when there is no file.
    Assignments not yet in the gradebook are created there (as ``generate`` would). Every
    submission gets its extension (or none); ``handing_in``, pairs ``(assignment, student)``
    about to be graded for the first time, get their submission row made first, so that their
    first grading already sees their own due date. On the hub, the file the fetch service reads
    is kept the course's own (:func:`publish_due_dates`).
    """
    deadlines = read_due_dates(layout)
    if deadlines is None:
        return []
    lines = publish_due_dates(layout)
    with grader.gradebook as gradebook:
        students = {s.id for s in gradebook.students}
        for name in layout.assignments():
            deadline = deadlines.get(name)
            gradebook.update_or_create_assignment(name, duedate=_utc(deadline.due) if deadline else None)
            lines.append(f"{name}: due {deadline.due.isoformat()}" if deadline else f"{name}: no due date")
            for student in sorted(deadline.extensions if deadline else ()):
                note = "" if student in students else " (no such student in the gradebook yet)"
                lines.append(f"{name}: {student} due {deadline.extensions[student].isoformat()}{note}")
        for name, student in handing_in:
            if name in deadlines and student in deadlines[name].extensions and student in students:
                gradebook.update_or_create_submission(name, student)
        for submission in gradebook.db.query(_submission_class()).all():
            deadline = deadlines.get(submission.assignment.name)
            own = deadline.extensions.get(submission.student.id) if deadline else None
            submission.extension = _utc(own) - _utc(deadline.due) if own else None
        gradebook.db.commit()
    return lines


def _submission_class():
    return SubmittedAssignment


# ----------------------------------------------------------------------------- a grading run's penalties


def own_due(submission) -> dt.datetime | None:
    """A submission's own due date, naive UTC (nbgrader's ``duedate``); None when its assignment has none,
    even if an extension was left behind (nbgrader's ``duedate`` would fail on it)."""
    return submission.duedate if submission.assignment.duedate is not None else None


def seconds_late(submission) -> float:
    """How late a submission was handed in after its own due date, in seconds (0 when on time or undated)."""
    due = own_due(submission)
    if due is None or submission.timestamp is None:
        return 0.0
    return max(0.0, (submission.timestamp - due).total_seconds())


def _submissions(gradebook) -> list:
    """Every submission with what :func:`_state` and :func:`settle_penalties` read, in a few queries
    whatever the class size (nbgrader's defaults would cost several per submission)."""

    return gradebook.db.query(SubmittedAssignment).options(
        undefer(SubmittedAssignment.score), undefer(SubmittedAssignment.late_submission_penalty),
        joinedload(SubmittedAssignment.student), joinedload(SubmittedAssignment.assignment),
        selectinload(SubmittedAssignment.notebooks).undefer(SubmittedNotebook.score)).all()


def _state(submission, penalty: float | None = None) -> dict:
    """What a submission's penalty depends on, and the penalty itself (``penalty`` when given, else the
    one loaded), as JSON-ready text and numbers."""
    def text(when):
        return when.isoformat(sep=" ") + " UTC" if when else None

    penalty = submission.late_submission_penalty if penalty is None else penalty
    return {"penalty": float(penalty or 0.0), "score": float(submission.score or 0.0),
            "due": text(submission.assignment.duedate), "own_due": text(own_due(submission)),
            "extension": submission.extension is not None, "submitted": text(submission.timestamp)}


def _states(grader) -> dict[str, dict]:
    """:func:`_state` of every submission of the gradebook, keyed ``student/assignment``."""
    with grader.gradebook as gradebook:
        return {f"{s.student.id}/{s.assignment.name}": _state(s) for s in _submissions(gradebook)}


def prepare_deadlines(layout: CourseLayout, grader, handing_in: list[tuple[str, str]]) -> list[str]:
    """Before a grading run: keep every submission's penalty and deadline (for :func:`settle_penalties`),
    then write the current due dates and extensions into the gradebook (:func:`set_due_dates`).

    Raises
    ------
    ValueError
        The due-dates file is not valid: nothing is graded until it is.
    """
    deadlines = read_due_dates(layout)  # checked before anything changes
    layout.scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    before = layout.scratch / BEFORE_RUN
    before.write_text(json.dumps(_states(grader), indent=1))
    os.chmod(before, 0o600)
    return set_due_dates(layout, grader, handing_in) if deadlines is not None else []


def late_plugin(grader) -> LateSubmissionPlugin:
    """The course's late-penalty plugin (``c.AssignLatePenalties.plugin_class``), configured as nbgrader would."""

    section = grader.config.AssignLatePenalties
    cls = section.plugin_class if "plugin_class" in section else PercentPerDay
    cls = import_item(cls) if isinstance(cls, str) else cls
    return cls(config=grader.config)


def _notebook_penalty(plugin, student: str, notebook, seconds_late: float) -> float | None:
    """One notebook's penalty as nbgrader's ``AssignLatePenalties`` gives it: the plugin's, kept in [0, score]."""
    if seconds_late <= 0:
        return None
    penalty = plugin.late_submission_penalty(student, notebook.score, seconds_late)
    return None if penalty is None else min(max(penalty, 0.0), notebook.score)


def _why(old: dict, new: dict) -> str:
    """Why a penalty changed, from what it depended on before and after."""
    reasons = []
    if old["due"] != new["due"]:
        reasons.append(f"due date moved from {old['due']} to {new['due']}")
    if old["own_due"] != new["own_due"] and new["extension"]:
        reasons.append(f"extension to {new['own_due']}")
    elif old["extension"] and not new["extension"]:
        reasons.append("extension removed")
    if old["submitted"] != new["submitted"]:
        reasons.append(f"submitted at {new['submitted']} (was {old['submitted']})")
    if old["score"] != new["score"]:
        reasons.append(f"score {old['score']:g} -> {new['score']:g}")
    return "; ".join(reasons) or "late policy changed"


def settle_penalties(layout: CourseLayout, grader) -> dict[tuple[str, str], str]:
    """After a grading run: every submission's late penalty worked out again, and those that changed.

    Each notebook's penalty comes from the course's plugin (:func:`late_plugin`), the
    submission's trusted time and the student's own due date (nbgrader's ``duedate``, the
    assignment's plus the extension), and the notebook's score as it is now. Returns
    ``{(student, assignment): "old -> new: why"}`` for every penalty that differs from the one
    the gradebook held before the run (:func:`prepare_deadlines`); a submission graded for the
    first time is not a change.
    """
    plugin = late_plugin(grader)
    now = {}
    with grader.gradebook as gradebook:
        for submission in _submissions(gradebook):
            late = seconds_late(submission)
            for notebook in submission.notebooks:
                notebook.late_submission_penalty = _notebook_penalty(plugin, submission.student.id, notebook, late)
            penalty = sum(nb.late_submission_penalty or 0.0 for nb in submission.notebooks)
            now[f"{submission.student.id}/{submission.assignment.name}"] = _state(submission, penalty)
        gradebook.db.commit()
    path = layout.scratch / BEFORE_RUN
    try:
        before = json.loads(path.read_text())
    except FileNotFoundError:
        before = {}
    except ValueError as exc:
        raise ValueError(f"expected {path} to be JSON, got {exc}") from None
    changes = {}
    for key, new in now.items():
        old = before.get(key)
        if old is not None and not math.isclose(old["penalty"], new["penalty"], abs_tol=1e-9):
            student, assignment = key.split("/", 1)
            changes[(student, assignment)] = f"{old['penalty']:g} -> {new['penalty']:g}: {_why(old, new)}"
    path.unlink(missing_ok=True)
    return changes


# ----------------------------------------------------------------------------- the student's notebook

#: how the opening cell of a student's fetched notebook starts its due-date line
DUE_LINE = "**Due:**"


def due_line(when: dt.datetime, extended: bool) -> str:
    """The line of the opening cell that gives the student their own due date."""
    stamp = when.strftime("%A %d %B %Y, %H:%M") + f" ({when.strftime('%z')[:3]}:{when.strftime('%z')[3:]})"
    return f"{DUE_LINE} {stamp}" + (", your extended due date." if extended else ".")


def show_due_date(nb, when: dt.datetime | None, extended: bool = False) -> bool:
    """Put ``when`` into the opening markdown cell of ``nb`` (after its heading), in place.

    A due-date line already there is replaced (or removed when ``when`` is None). Returns whether
    the cell changed. The cell is the notebook's first markdown cell; it carries no nbgrader
    checksum, so Validate is unaffected.
    """
    cell = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if cell is None:
        return False
    lines = cell.source.split("\n")
    for k, line in enumerate(lines):
        if line.startswith(DUE_LINE):  # an earlier due-date line goes, with the blank line after it
            del lines[k:k + (2 if lines[k + 1:k + 2] == [""] else 1)]
            break
    if when is not None:
        heading = lines[0].startswith("#")
        at = (2 if lines[1:2] == [""] else 1) if heading else 0
        lines[at:at] = [due_line(when, extended), ""]
    source = "\n".join(lines)
    changed = source != cell.source
    cell.source = source
    return changed
