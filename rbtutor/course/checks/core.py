"""Step: instant checks, the judging core. One answer of one student judged, without a web server.

Everything here is plain Python (no tornado, no JupyterHub): :mod:`.service` wraps it in
the hub service, :mod:`.pool` runs its :class:`Judge` in worker processes, :mod:`.stats`
reads the counts it keeps in :mod:`.store`.

* Settings: limits and the exam switch come from ``exercises/checks.yaml`` in the course
  folder (:func:`read_settings`): by default 10 checks an hour per student and answer id,
  so that the value cannot be found by bisection.
* Request parsing (:func:`parse_request`): the body ``{"id": "p3.b.K", "value": ...}``,
  or :class:`CheckRefused` with the HTTP status and the reason.
* The limit and the counts (:class:`.store.CheckStore`, ``checks/summary.sqlite``): the
  judged checks inside the window, per student and answer id, so a restart does not reset
  the limit; tallies for the statistics; checks refused for the limit or the exam switch,
  counted per student, answer id and hour (a flood adds to a count, not to a file).
* The attempt log (:class:`.attempt_log.AttemptLog`): every judged check is appended to
  ``checks/attempts.jsonl`` (time, student, id, passed, diagnosis, and the value sent,
  for the instructor), rotated at :data:`.attempt_log.LOG_MAX_BYTES` with :data:`.attempt_log.LOG_KEEP` old files.
* Judging (:meth:`Judge.verdict`): the value is judged by
  :func:`rbtutor.grading.judge.judge` against that student's own key
  (:func:`rbtutor.problems.variants.student_key` when the course data switches variants
  on, the course key otherwise). The reply is ``{"passed", "message", "diagnosis",
  "checks_left"}``. :meth:`CheckCore.check` does every step in one process; the service
  splits them (:meth:`CheckCore.admit` and :meth:`CheckCore.settle` in its main process,
  :meth:`Judge.verdict` in a worker).
* No value in a reply (:func:`printed_forms`, :func:`reveals`): before a reply is sent,
  the message is searched for the reference value in the formats the key is printed in,
  and the request is refused (HTTP 500) if it is found. A reply never says how far off
  a value is: it names a recognised mistake or says the value is not accepted (see
  :mod:`rbtutor.grading.judge`).
"""

from __future__ import annotations

import functools
import json
import math
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ...grading.config import GRADING
from ...grading.student import expected_form, form_problem
from ...grading.student_ids import id_problem
from ...problems import read_yaml
from ...problems.variants import load_course_data, per_student, problem_of, student_key
from ..render import answer_forms
from .attempt_log import AttemptLog
from .store import CheckStore

SERVICE_NAME = "rbtutor-check"
#: requests with a longer body are refused (413)
MAX_BODY = GRADING.check_max_body
#: bodies up to this size are read to the end before a refusal is sent (see the module docstring)
DRAIN_LIMIT = GRADING.check_drain_limit
#: the sliding window of the attempt limit, in seconds
WINDOW = GRADING.check_window
DEFAULTS = {"enabled": GRADING.check_enabled, "per_hour": GRADING.check_per_hour}
STUCK_AFTER = GRADING.check_stuck_after
#: keys kept in memory, one per student and problem (a class of 300 working on one problem at a time)
KEY_CACHE = GRADING.check_key_cache
SETTINGS_FILE = Path("exercises") / "checks.yaml"
LOG_FILE = Path("checks") / "attempts.jsonl"
#: the aggregated store: the limit window, the tallies, the refused checks (see :mod:`.store`)
STORE_FILE = Path("checks") / "summary.sqlite"
INSTRUCTOR_GROUP = "formgrade-rbtutor"
_MAX_DEPTH = 4


class CheckRefused(Exception):
    """A request the service does not judge; ``status`` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message

    def __reduce__(self):
        # so that a refusal raised in a worker process arrives whole in the service
        return (CheckRefused, (self.status, self.message))


# --------------------------------------------------------------------------- settings


def _assignment_settings(raw, where: str) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"expected a mapping for {where}, got {raw!r}")
    unknown = set(raw) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown keys in {where}: {sorted(unknown)}; expected enabled, per_hour")
    out = {}
    if "enabled" in raw:
        if not isinstance(raw["enabled"], bool):
            raise ValueError(f"expected true or false for {where}.enabled, got {raw['enabled']!r}")
        out["enabled"] = raw["enabled"]
    if "per_hour" in raw:
        n = raw["per_hour"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"expected a whole number >= 0 for {where}.per_hour, got {n!r}")
        out["per_hour"] = n
    return out


def read_settings(course: Path) -> dict:
    """The check settings of a course, from ``exercises/checks.yaml`` (defaults when it is missing).

    The file may hold::

        default: {enabled: true, per_hour: 10}   # every assignment
        stuck_after: 3                           # failed checks without a pass that make "stuck"
        assignments:
          problem03: {per_hour: 5}
          problem10: {enabled: false}            # an exam: no checks

    Returns
    -------
    dict
        ``{"default": {...}, "assignments": {name: {...}}, "stuck_after": int}``.

    Raises
    ------
    ValueError
        For an unknown key or a value of the wrong type (a typo must not switch limits off).
    """

    path = Path(course) / SETTINGS_FILE
    raw = read_yaml(path.read_text(encoding="utf-8")) if path.exists() else {}
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ValueError(f"expected a mapping at the top of {path}")
    unknown = set(raw) - {"default", "assignments", "stuck_after"}
    if unknown:
        raise ValueError(f"unknown keys in {path}: {sorted(unknown)}; expected default, assignments, stuck_after")
    default = {**DEFAULTS, **_assignment_settings(raw.get("default"), "default")}
    assignments = raw.get("assignments") or {}
    if not isinstance(assignments, dict):
        raise ValueError(f"expected a mapping for assignments in {path}")
    stuck = raw.get("stuck_after", STUCK_AFTER)
    if isinstance(stuck, bool) or not isinstance(stuck, int) or stuck < 1:
        raise ValueError(f"expected a whole number >= 1 for stuck_after, got {stuck!r}")
    return {"default": default, "stuck_after": stuck,
            "assignments": {str(name): {**default, **_assignment_settings(value, f"assignments.{name}")}
                            for name, value in assignments.items()}}


def assignment_of(answer_id: str) -> str:
    """The assignment an answer id belongs to (``"p3.b.K"`` -> ``"problem03"``)."""

    return f"problem{problem_of(answer_id):02d}"


# --------------------------------------------------------------------------- no value in a reply


def printed_forms(value) -> list[str]:
    """The strings in which a reference value may be printed (the key's formats, per entry).

    Covers ``repr`` (``rbtutor key --format json`` and ``yaml``), ``%.6g`` (the table),
    NumPy's array printing with six digits, and 3 to 6 significant figures in fixed and
    exponent notation. Strings with fewer than two digits are left out: they would match
    any small number in a message (an entry index) without telling anything.
    """
    forms = set()
    for x in np.ravel(np.asarray(value, dtype=float)):
        x = float(x)
        if not math.isfinite(x) or x == 0.0:
            continue
        candidates = {repr(x), f"{x:.6f}", f"{x:.6e}", np.format_float_positional(x, precision=6),
                      np.format_float_scientific(x, precision=6)}
        for figures in (3, 4, 5, 6):
            candidates |= {f"{x:.{figures}g}", f"{x:.{figures - 1}e}"}
        for text in candidates:
            text = text.lstrip("-")
            if sum(c.isdigit() for c in text) >= 2:
                forms.add(text)
    return sorted(forms)


def reveals(message: str, value) -> str | None:
    """The printed form of ``value`` that ``message`` contains, or None.

    A form counts only as a whole number in the message (not part of a longer run of
    digits), with or without its sign.
    """
    if isinstance(value, str):
        return value if value.strip() and value.strip().lower() in message.lower() else None
    for text, pattern in _form_patterns(tuple(np.ravel(np.asarray(value, dtype=float)).tolist())):
        if pattern.search(message):
            return text
    return None


@functools.lru_cache(maxsize=1024)
def _form_patterns(entries: tuple) -> list:
    return [(text, re.compile(r"(?<![\d.])" + re.escape(text) + r"(?![\d])")) for text in printed_forms(entries)]


# --------------------------------------------------------------------------- judging one request


def _reject_constant(name):
    raise ValueError(f"{name} is not a number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is too large to be a finite number")
    return value


def parse_request(body: bytes) -> tuple[str, object]:
    """``(answer_id, value)`` of a request body, or :class:`CheckRefused` saying what is wrong."""
    if len(body) > MAX_BODY:
        raise CheckRefused(413, f"the request is larger than {MAX_BODY // 1024} kB")
    try:
        payload = json.loads(body.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, ValueError) as exc:
        raise CheckRefused(400, f"the request is not valid JSON ({str(exc)[:120]})") from None
    except RecursionError:
        raise CheckRefused(400, "the request is not valid JSON (nested too deeply)") from None
    if not isinstance(payload, dict) or set(payload) - {"id", "value"} or "id" not in payload or "value" not in payload:
        raise CheckRefused(400, 'expected a JSON object {"id": "p3.b.K", "value": ...} and nothing else')
    answer_id = payload["id"]
    if not isinstance(answer_id, str):
        raise CheckRefused(400, f"expected the answer id as text such as 'p3.b.K', got {type(answer_id).__name__}")
    if not re.fullmatch(r"p\d{1,2}\.[a-z]\.[A-Za-z0-9_]{1,40}", answer_id):
        raise CheckRefused(404, f"unknown answer id {answer_id[:60]!r}; ids look like 'p3.b.K'")
    return answer_id, payload["value"]


def _plain_value(value, depth: int = 0) -> bool:
    """Whether ``value`` is a finite number or a list (nested at most :data:`_MAX_DEPTH` deep) of them."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) < 1e300
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list) and depth < _MAX_DEPTH:
        return all(_plain_value(v, depth + 1) for v in value)
    return False


def _json_kind(value) -> str:
    """What a JSON value that is no number or list of numbers is, in words (for a refusal)."""
    if isinstance(value, list):
        return "a list that is not of numbers, or nested too deeply"
    if isinstance(value, int) and not isinstance(value, bool):
        return "a number too large"
    return {str: "text", bool: "true or false", dict: "an object", type(None): "null"}.get(type(value), "no number")


def _stamp(path: Path):
    """What tells that a file changed: ``(mtime_ns, size)``, or None when it does not exist."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


class Judge:
    """What judging one value needs, and nothing else: the course data, the students' keys, the judge.

    The service runs it in its worker processes (:mod:`.pool`), so a slow key or verdict
    never holds up another request; :meth:`CheckCore.check` runs it in its own process.

    Parameters
    ----------
    course : path
        The course folder; the course data is ``exercises/problem_data.yaml`` when present,
        else the reference data.
    """

    def __init__(self, course):
        self.course = Path(course).absolute()
        self._data_stamp = None
        self._data = None
        self._keys: dict = {}

    def warm(self) -> None:
        """Import the judge (nbgrader, about 3 s) before the first check needs it."""
        # deferred: rbtutor.grading.judge takes 3272 ms to import (-X importtime, 2026-12-06); warm() pays it on purpose
        from ...grading import judge  # noqa: F401

    def data_stamp(self):
        return _stamp(self.course / "exercises" / "problem_data.yaml")

    def data(self) -> dict:
        path = self.course / "exercises" / "problem_data.yaml"
        stamp = _stamp(path)
        if self._data is None or stamp != self._data_stamp:
            self._data = load_course_data(path if stamp is not None else None)
            self._data_stamp = stamp
        return self._data

    def key_for(self, student: str, answer_id: str):
        """``(data, key)`` of ``student`` for the problem of ``answer_id`` (cached per student and problem)."""

        data = self.data()
        # without per-student variants everyone is judged against the course's own numbers
        who = student if per_student(data) else "reference"
        cached = (who, problem_of(answer_id), self._data_stamp)
        if cached not in self._keys:
            if len(self._keys) >= KEY_CACHE:
                self._keys.clear()
            self._keys[cached] = student_key(data, who, [cached[1]])
        return data, self._keys[cached]

    def answer_kinds(self, problem: int) -> dict:
        """``{answer id: form}`` of a problem (the same for every student; forms as in
        :func:`rbtutor.course.render.answer_forms`), or ValueError."""
        return answer_forms(student_key(self.data(), "reference", [problem]))

    def _named_reference(self, answer_id: str, value, verdict):
        """``verdict``, or the ``reference_ship`` mistake when the value is right for the course's own numbers.

        Only under per-student variants, where those numbers are not the student's. It tells
        the student no more than the published key does: the window is the pass window of the
        course's own key.
        """
        # deferred: rbtutor.grading.judge takes 3272 ms to import (-X importtime, 2026-12-06); only judging needs it
        from ...grading.judge import MESSAGES, Verdict, judge

        data = self.data()
        if verdict.diagnosis != "wrong_value" or not per_student(data):
            return verdict
        own = student_key(data, "reference", [problem_of(answer_id)])
        if answer_id in own and judge(answer_id, value, key=own, diagnose=False).passed:
            return Verdict(False, MESSAGES["reference_ship"], "reference_ship")
        return verdict

    def verdict(self, student: str, answer_id: str, value) -> dict:
        """``{"passed", "message", "diagnosis", "leaked"}`` for ``value`` against ``student``'s key.

        ``leaked`` is the printed form of the reference value that the message contains, or
        None (see :func:`reveals`); plain data, so that it can come back from a worker process.
        """
        # deferred: rbtutor.grading.judge takes 3272 ms to import (-X importtime, 2026-12-06); only judging needs it
        from ...grading.judge import check_reply, judge

        _, key = self.key_for(student, answer_id)
        if answer_id not in key:
            raise CheckRefused(404, f"unknown answer id {answer_id!r}: no such part in the key")
        verdict = self._named_reference(answer_id, value, judge(answer_id, value, key=key))
        message = check_reply(verdict, key[answer_id])  # at most one short diagnosis, never "Correct."
        return {"passed": bool(verdict.passed), "message": message, "diagnosis": verdict.diagnosis,
                "leaked": reveals(message, key[answer_id].value)}


@dataclass
class Admission:
    """A check let through to judging: it already counts against the limit (see :meth:`CheckCore.admit`)."""

    student: str
    answer_id: str
    value: object
    epoch: float
    per_hour: int
    used: int  # judged checks of this student and answer id in the window, before this one


class CheckCore:
    """The service without its web layer: settings, limits, the store and the log of one course.

    A check goes through three steps, so that the service can judge in another process
    while the bookkeeping stays in one place: :meth:`request` (parse the body),
    :meth:`admit` (the switch and the limit; the check is counted from here),
    judging (:meth:`Judge.verdict`), and :meth:`settle` (log, tally, reply).
    :meth:`check` runs all of them in this process.

    Parameters
    ----------
    course : path
        The course folder (``nbgrader_config.py``, ``exercises/``).
    clock : callable, optional
        Seconds since the epoch (``time.time``).
    judge : Judge, optional
        What judges in this process (a :class:`Judge` of the course by default).
    """

    def __init__(self, course, clock=time.time, judge: Judge | None = None):
        self.course = Path(course).absolute()
        self.clock = clock
        self.judge = judge or Judge(self.course)
        self.log = AttemptLog(self.course / LOG_FILE)
        self.store = CheckStore(self.course / STORE_FILE, WINDOW)
        self._settings_stamp = None
        self._settings = None
        self._kinds: dict = {}
        if not self.store.imported():
            self._import_log()

    def _import_log(self) -> None:
        """Carry the counts of a log written before the store existed into it, then drop its refused lines."""
        files = self.log.files()
        if self.store.import_records(self.log.iter_records(files), now=self.clock()):
            self.log.drop_refused()

    # --- what is read from the course folder, again when the file changes
    def settings(self) -> dict:
        stamp = _stamp(self.course / SETTINGS_FILE)
        if self._settings is None or stamp != self._settings_stamp:
            try:
                self._settings = read_settings(self.course)
            except (OSError, ValueError) as exc:
                self._settings = None
                raise CheckRefused(503, f"checks are not available: the course's {SETTINGS_FILE} is "
                                        f"wrong ({exc}); tell your instructor") from None
            self._settings_stamp = stamp
        return self._settings

    def data(self) -> dict:
        return self.judge.data()

    def key_for(self, student: str, answer_id: str):
        return self.judge.key_for(student, answer_id)

    def limits(self, answer_id: str) -> dict:
        settings = self.settings()
        return settings["assignments"].get(assignment_of(answer_id), settings["default"])

    def cached_kinds(self, problem: int) -> dict | None:
        """The answer ids and kinds of ``problem`` if known for the current course data, else None."""
        return self._kinds.get((problem, self.judge.data_stamp()))

    def remember_kinds(self, problem: int, stamp, kinds: dict) -> None:
        self._kinds[(problem, stamp)] = kinds

    def answer_kinds(self, problem: int) -> dict:
        """The answer ids and kinds of ``problem``, worked out here when not known yet (ValueError: no such problem)."""
        kinds = self.cached_kinds(problem)
        if kinds is None:
            stamp = self.judge.data_stamp()
            kinds = self.judge.answer_kinds(problem)
            self.remember_kinds(problem, stamp, kinds)
        return kinds

    # --- one request, step by step
    def request(self, student: str, body: bytes) -> tuple[str, object]:
        """``(answer_id, value)`` of the body, or CheckRefused (403 for a reserved name, 400, 404)."""
        problem = id_problem(student)
        if problem is not None:
            raise CheckRefused(403, f"the hub account {ascii(student)[:80]} cannot check answers: the name {problem}")
        answer_id, value = parse_request(body)
        try:
            problem_of(answer_id)
        except ValueError as exc:
            raise CheckRefused(404, f"unknown answer id {answer_id!r} ({exc})") from None
        return answer_id, value

    def admit(self, student: str, answer_id: str, value, kinds: dict) -> Admission:
        """Let a check through to judging, counting it against the limit, or CheckRefused saying why not.

        ``kinds`` are the answer ids and forms of its problem (:meth:`answer_kinds`). A value that
        does not have the answer's form is refused (400) with the words the student's kernel uses
        (:func:`rbtutor.grading.student.form_problem`), and is not counted: only a well-formed value
        spends a check. A check refused because checks are switched off (403) or the limit is used
        up (429) is counted in the store, per student, answer id and hour; nothing is appended.
        """
        if answer_id not in kinds:
            raise CheckRefused(404, f"unknown answer id {answer_id!r}: no such part in the key")
        form = kinds[answer_id]
        if form != "text" and not _plain_value(value):
            problem = f"expected {expected_form(form)}, got {_json_kind(value)}"
        else:
            problem = form_problem(value, form)
        if problem:
            raise CheckRefused(400, problem)
        limits = self.limits(answer_id)
        now = self.clock()
        if not limits["enabled"]:
            self.store.refused(student, answer_id, now, "disabled")
            raise CheckRefused(403, f"checks are switched off for {assignment_of(answer_id)} "
                                    "(for example during an exam); your answers are graded after you submit")
        recent = self.store.recent(student, answer_id, now)
        if len(recent) >= limits["per_hour"]:
            wait = max(1, math.ceil((WINDOW - (now - min(recent))) / 60)) if recent else 60
            self.store.refused(student, answer_id, now, "limit")
            allowed = f"{limits['per_hour']} check" + ("" if limits["per_hour"] == 1 else "s")
            raise CheckRefused(429, f"you have used the {allowed} an hour allowed for "
                                    f"{answer_id}; the next one is possible in about {wait} min")
        self.store.reserve(student, answer_id, now)
        return Admission(student, answer_id, value, now, limits["per_hour"], len(recent))

    def release(self, admission: Admission) -> None:
        """Give the check back to the student: it could not be judged (the judge failed)."""
        self.store.release(admission.student, admission.answer_id, admission.epoch)

    def settle(self, admission: Admission, outcome: dict) -> dict:
        """Log and tally a judged check (``outcome`` of :meth:`Judge.verdict`) and make its reply.

        Raises CheckRefused (500) instead of a reply that would quote the reference value.
        """
        a = admission
        record = {"time": datetime.fromtimestamp(a.epoch, UTC).isoformat(timespec="seconds"), "epoch": a.epoch,
                  "student": a.student, "id": a.answer_id,
                  "refused": "reveals" if outcome["leaked"] is not None else None,
                  "passed": outcome["passed"], "diagnosis": outcome["diagnosis"], "value": a.value}
        self.store.judged(a.student, a.answer_id, outcome["passed"], outcome["diagnosis"])
        self.log.append(record)
        if outcome["leaked"] is not None:
            raise CheckRefused(500, "the verdict cannot be shown without giving the value away; "
                                    "the attempt was logged for your instructor")
        return {"passed": outcome["passed"], "message": outcome["message"], "diagnosis": outcome["diagnosis"],
                "checks_left": max(0, a.per_hour - a.used - 1)}

    def check(self, student: str, body: bytes) -> dict:
        """Judge one request of ``student`` (the hub's name for the token's owner), all in this process.

        Returns
        -------
        dict
            ``{"passed", "message", "diagnosis", "checks_left"}``.

        Raises
        ------
        CheckRefused
            With the HTTP status and the reason, for anything not judged.
        """
        answer_id, value = self.request(student, body)
        try:
            kinds = self.answer_kinds(problem_of(answer_id))
        except ValueError as exc:
            raise CheckRefused(404, f"unknown answer id {answer_id!r} ({exc})") from None
        admission = self.admit(student, answer_id, value, kinds)
        try:
            outcome = self.judge.verdict(student, answer_id, value)
        except BaseException:
            self.release(admission)
            raise
        return self.settle(admission, outcome)
