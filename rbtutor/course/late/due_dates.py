"""Late: the due-dates file. Parse and check ``exercises/due_dates.yaml`` (bounded, every error
naming its place), publish it, and set each submission's due date in the gradebook."""

from __future__ import annotations

import datetime as dt
import os
import re
import reprlib
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import yaml
from nbgrader.api import SubmittedAssignment

from ...grading.student_ids import check_id
from ..layout import CourseLayout

DAY = 86400.0  # seconds

DUE_DATES = "due_dates.yaml"  # in the course's exercises/ folder
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
