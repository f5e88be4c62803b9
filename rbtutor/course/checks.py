"""Step: instant checks. A JupyterHub service that judges one answer while the student works.

The service runs beside the hub (``python -m rbtutor.course.checks``, started by the hub
as a managed service named :data:`SERVICE_NAME`) and answers at
``/services/rbtutor-check/``:

``POST api/check``
    Body ``{"id": "p3.b.K", "value": ...}``, authenticated with the student's own hub
    token (``Authorization: token ...``; the notebook's ``check()`` sends the kernel's
    ``JUPYTERHUB_API_TOKEN``). The student is whoever the hub says owns that token:
    nothing in the body, the notebook or the kernel's environment names the student.
    The value is judged by :func:`rbtutor.grading.judge.judge` against that student's
    own key (:func:`rbtutor.problems.variants.student_key` when the course data switches
    variants on, the course key otherwise). The reply is
    ``{"passed", "message", "diagnosis", "checks_left"}``; before it is sent, the message
    is searched for the reference value in the formats the key is printed in, and the
    service refuses to answer (HTTP 500) if it is found.
``GET stats``
    For members of the instructors' group only: per answer id, the number of checks and
    of passes, the diagnoses counted, and who is stuck (at least ``stuck_after`` failed
    checks and no pass); an HTML page, or CSV with ``?format=csv``.

Limits and the exam switch come from ``exercises/checks.yaml`` in the course folder
(see :func:`read_settings`): by default 10 checks an hour per student and answer id,
so that the value cannot be found by bisection. Every attempt, refused ones included,
is appended to ``checks/attempts.jsonl`` in the course folder (time, student, id,
passed, diagnosis, and the submitted value for the instructor); the counts for the
limit are rebuilt from that file when the service starts, so a restart does not
reset them.

Every request that is not judged gets a 4xx reply whose JSON body ``{"error": ...}``
says why, never a 500 (the checks are in :meth:`CheckHandler.post` and :func:`parse_request`):

====== =====================================================================================
status when
====== =====================================================================================
401    no hub token (header ``Authorization: token ...`` or the service's OAuth cookie), or
       a token the hub does not know
403    a token of a service rather than a user; a browser request authenticated by cookie
       without the ``_xsrf`` value; a hub account whose name is reserved for the course
       (:mod:`rbtutor.grading.student_ids`, e.g. ``reference``); checks switched off
413    a body over :data:`MAX_BODY` bytes
415    a ``Content-Type`` other than ``application/json``
400    not UTF-8, not JSON, too deeply nested, NaN or infinity (also ``1e999``), not an object
       ``{"id", "value"}`` and nothing else, an id that is not text, a value that is not a
       number or a nested list of numbers (or not a short text, for a text answer)
404    an answer id that is not in the key
429    more checks of this answer id than the limit allows
====== =====================================================================================

The body of a request up to :data:`DRAIN_LIMIT` bytes is read to its end before any
status is sent, so a proxy in front of the service (the hub's) always hands the reply
on; a longer body announced by ``Content-Length`` is refused at once and the connection
closed, which a proxy may report as its own 502 or 503.

A reply to a judged request never says how far off a value is: it names a recognised
mistake or says the value is not accepted (see :mod:`rbtutor.grading.judge`).

Configuration comes from the environment the hub gives the service:
``RBTUTOR_COURSE`` (the course folder), ``RBTUTOR_INSTRUCTOR_GROUP`` (default
``formgrade-rbtutor``) and JupyterHub's own ``JUPYTERHUB_*`` variables.
"""

from __future__ import annotations

import functools
import html
import io
import json
import math
import os
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

SERVICE_NAME = "rbtutor-check"
#: requests with a longer body are refused (413)
MAX_BODY = 64 * 1024
#: bodies up to this size are read to the end before a refusal is sent (see the module docstring)
DRAIN_LIMIT = 1024 * 1024
#: the sliding window of the attempt limit, in seconds
WINDOW = 3600.0
DEFAULTS = {"enabled": True, "per_hour": 10}
STUCK_AFTER = 3
#: keys kept in memory, one per student and problem (a class of 300 working on one problem at a time)
KEY_CACHE = 1024
SETTINGS_FILE = Path("exercises") / "checks.yaml"
LOG_FILE = Path("checks") / "attempts.jsonl"
INSTRUCTOR_GROUP = "formgrade-rbtutor"
_MAX_DEPTH = 4


class CheckRefused(Exception):
    """A request the service does not judge; ``status`` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


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
    from ..problems import read_yaml

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
    from ..problems.variants import problem_of

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


# --------------------------------------------------------------------------- the attempt log


class AttemptLog:
    """Attempts as JSON lines in ``path``; the recent ones per (student, id) kept in memory for the limit."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._recent: dict[tuple[str, str], list[float]] = defaultdict(list)
        for record in self.records():
            if record.get("refused") is None:
                self._recent[(record["student"], record["id"])].append(float(record["epoch"]))

    def records(self) -> list[dict]:
        """Every logged attempt, oldest first (a damaged line is skipped)."""
        if not self.path.exists():
            return []
        out = []
        with self.path.open(encoding="utf-8") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and {"student", "id", "epoch"} <= set(record):
                    out.append(record)
        return out

    def recent(self, student: str, answer_id: str, now: float) -> list[float]:
        """Times of the counted attempts of ``student`` on ``answer_id`` within the last hour."""
        with self._lock:
            times = [t for t in self._recent[(student, answer_id)] if now - t < WINDOW]
            self._recent[(student, answer_id)] = times
            return list(times)

    def append(self, record: dict, counted: bool) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
            if counted:
                self._recent[(record["student"], record["id"])].append(float(record["epoch"]))


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


class CheckCore:
    """The service without its web layer: settings, keys, judging, limits and the log of one course.

    Parameters
    ----------
    course : path
        The course folder (``nbgrader_config.py``, ``exercises/``); the course data is
        ``exercises/problem_data.yaml`` when present, else the reference data.
    clock : callable, optional
        Seconds since the epoch (``time.time``).
    """

    def __init__(self, course, clock=time.time):
        self.course = Path(course).absolute()
        self.clock = clock
        self.log = AttemptLog(self.course / LOG_FILE)
        self._data_stamp = None
        self._data = None
        self._settings_stamp = None
        self._settings = None
        self._keys: dict = {}

    # --- what is read from the course folder, again when the file changes
    @staticmethod
    def _stamp(path: Path):
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        return (stat.st_mtime_ns, stat.st_size)

    def settings(self) -> dict:
        stamp = self._stamp(self.course / SETTINGS_FILE)
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
        from ..problems.variants import load_course_data

        path = self.course / "exercises" / "problem_data.yaml"
        stamp = self._stamp(path)
        if self._data is None or stamp != self._data_stamp:
            self._data = load_course_data(path if stamp is not None else None)
            self._data_stamp = stamp
        return self._data

    def key_for(self, student: str, answer_id: str):
        """``(data, key)`` of ``student`` for the problem of ``answer_id`` (cached per student and problem)."""
        from ..problems.variants import per_student, problem_of, student_key

        data = self.data()
        # without per-student variants everyone is judged against the course's own numbers
        who = student if per_student(data) else "reference"
        cached = (who, problem_of(answer_id), self._data_stamp)
        if cached not in self._keys:
            if len(self._keys) >= KEY_CACHE:
                self._keys.clear()
            self._keys[cached] = student_key(data, who, [cached[1]])
        return data, self._keys[cached]

    def limits(self, answer_id: str) -> dict:
        settings = self.settings()
        return settings["assignments"].get(assignment_of(answer_id), settings["default"])

    def _named_reference(self, answer_id: str, value, verdict):
        """``verdict``, or the ``reference_ship`` mistake when the value is right for the course's own numbers.

        Only under per-student variants, where those numbers are not the student's. It tells
        the student no more than the published key does: the window is the pass window of the
        course's own key.
        """
        from ..grading.judge import MESSAGES, Verdict, judge
        from ..problems.variants import per_student, problem_of, student_key

        data = self.data()
        if verdict.diagnosis != "wrong_value" or not per_student(data):
            return verdict
        own = student_key(data, "reference", [problem_of(answer_id)])
        if answer_id in own and judge(answer_id, value, key=own).passed:
            return Verdict(False, MESSAGES["reference_ship"], "reference_ship")
        return verdict

    # --- one request
    def check(self, student: str, body: bytes) -> dict:
        """Judge one request of ``student`` (the hub's name for the token's owner).

        Returns
        -------
        dict
            ``{"passed", "message", "diagnosis", "checks_left"}``.

        Raises
        ------
        CheckRefused
            With the HTTP status and the reason, for anything not judged.
        """
        from ..grading.judge import judge
        from ..grading.student_ids import id_problem

        problem = id_problem(student)
        if problem is not None:
            raise CheckRefused(403, f"the hub account {ascii(student)[:80]} cannot check answers: the name {problem}")
        now = self.clock()
        answer_id, value = parse_request(body)
        try:
            _, key = self.key_for(student, answer_id)
        except ValueError as exc:
            raise CheckRefused(404, f"unknown answer id {answer_id!r} ({exc})") from None
        if answer_id not in key:
            raise CheckRefused(404, f"unknown answer id {answer_id!r}: no such part in the key")
        answer = key[answer_id]
        if answer.kind == "text":
            if not isinstance(value, str) or len(value) > 200:
                raise CheckRefused(400, f"{answer_id} expects a short text, got {type(value).__name__}")
        elif not _plain_value(value):
            raise CheckRefused(400, f"{answer_id} expects a number or a (nested) list of finite numbers, "
                                    f"got {type(value).__name__}")
        limits = self.limits(answer_id)
        record = {"time": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
                  "epoch": now, "student": student, "id": answer_id}
        if not limits["enabled"]:
            self.log.append({**record, "refused": "disabled", "passed": None, "diagnosis": None}, counted=False)
            raise CheckRefused(403, f"checks are switched off for {assignment_of(answer_id)} "
                                    "(for example during an exam); your answers are graded after you submit")
        recent = self.log.recent(student, answer_id, now)
        if len(recent) >= limits["per_hour"]:
            wait = max(1, math.ceil((WINDOW - (now - min(recent))) / 60)) if recent else 60
            self.log.append({**record, "refused": "limit", "passed": None, "diagnosis": None}, counted=False)
            raise CheckRefused(429, f"you have used the {limits['per_hour']} checks an hour allowed for "
                                    f"{answer_id}; the next one is possible in about {wait} min")
        verdict = self._named_reference(answer_id, value, judge(answer_id, value, key=key))
        leaked = reveals(verdict.message, answer.value)
        if leaked is not None:
            self.log.append({**record, "refused": "reveals", "passed": verdict.passed,
                             "diagnosis": verdict.diagnosis, "value": value}, counted=True)
            raise CheckRefused(500, "the verdict cannot be shown without giving the value away; "
                                    "the attempt was logged for your instructor")
        self.log.append({**record, "refused": None, "passed": verdict.passed, "diagnosis": verdict.diagnosis,
                         "value": value}, counted=True)
        return {"passed": verdict.passed, "message": verdict.message, "diagnosis": verdict.diagnosis,
                "checks_left": max(0, limits["per_hour"] - len(recent) - 1)}


# --------------------------------------------------------------------------- statistics


@dataclass
class PartStats:
    """The attempts on one answer id."""

    answer_id: str
    checks: int = 0
    passes: int = 0
    refused: int = 0
    diagnoses: dict | None = None
    stuck: list | None = None


def statistics(records: list[dict], stuck_after: int = STUCK_AFTER) -> list[PartStats]:
    """Per answer id: checks, passes, diagnoses counted and stuck students, the most checked first."""
    parts: dict[str, PartStats] = {}
    failed: dict[tuple[str, str], int] = defaultdict(int)
    passed: set[tuple[str, str]] = set()
    for record in records:
        part = parts.setdefault(record["id"], PartStats(record["id"], diagnoses={}, stuck=[]))
        if record.get("refused") in ("limit", "disabled"):
            part.refused += 1
            continue
        part.checks += 1
        if record.get("passed"):
            part.passes += 1
            passed.add((record["student"], record["id"]))
        else:
            failed[(record["student"], record["id"])] += 1
            code = record.get("diagnosis") or "wrong_value"
            part.diagnoses[code] = part.diagnoses.get(code, 0) + 1
    for (student, answer_id), count in sorted(failed.items()):
        if count >= stuck_after and (student, answer_id) not in passed:
            parts[answer_id].stuck.append(student)
    return sorted(parts.values(), key=lambda p: (-p.checks, p.answer_id))


def _diagnoses_text(part: PartStats) -> str:
    return "; ".join(f"{code}: {n}" for code, n in sorted(part.diagnoses.items(), key=lambda kv: (-kv[1], kv[0])))


def statistics_csv(parts: list[PartStats]) -> str:
    import csv

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "checks", "passes", "refused", "diagnoses", "stuck"])
    for p in parts:
        writer.writerow([p.answer_id, p.checks, p.passes, p.refused, _diagnoses_text(p), " ".join(p.stuck)])
    return out.getvalue()


def statistics_html(parts: list[PartStats], stuck_after: int) -> str:
    rows = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in
                         (p.answer_id, p.checks, p.passes, p.refused, _diagnoses_text(p), ", ".join(p.stuck)))
        + "</tr>" for p in parts)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Answer checks: statistics</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #999;padding:.3em .6em;text-align:left}}</style></head>
<body><main><h1>Answer checks</h1>
<p>Per part, the most checked first: checks judged, passes, checks refused (limit or switched off),
the mistakes diagnosed, and the students stuck there ({stuck_after} or more failed checks and no pass).
<a href="?format=csv">CSV</a></p>
<table><thead><tr><th scope="col">part</th><th scope="col">checks</th><th scope="col">passes</th>
<th scope="col">refused</th><th scope="col">diagnoses</th><th scope="col">stuck</th></tr></thead>
<tbody>
{rows}
</tbody></table></main></body></html>
"""


# --------------------------------------------------------------------------- the web service


def service_entry(course, python: str, url: str = "http://127.0.0.1:10101", user: str | None = None,
                  instructor_group: str = INSTRUCTOR_GROUP) -> tuple[dict, list[dict]]:
    """The hub configuration of the service: ``(service, roles)`` for ``c.JupyterHub.services`` and
    ``c.JupyterHub.load_roles``.

    The service's own role may read user names and the instructors' group (to decide who
    sees the statistics); the course's users get a role that lets them reach the service.
    """
    service = {"name": SERVICE_NAME, "url": url, "command": [python, "-m", "rbtutor.course.checks"],
               "environment": {"RBTUTOR_COURSE": str(course), "RBTUTOR_INSTRUCTOR_GROUP": instructor_group},
               "oauth_no_confirm": True}
    if user:
        service["user"] = user
    roles = [{"name": f"{SERVICE_NAME}-service", "services": [SERVICE_NAME],
              "scopes": ["read:users:name", f"read:groups!group={instructor_group}"]},
             {"name": f"{SERVICE_NAME}-user", "scopes": [f"access:services!service={SERVICE_NAME}"]}]
    return service, roles


def make_app(core: CheckCore, prefix: str, instructor_group: str = INSTRUCTOR_GROUP):
    """The tornado application of the service under ``prefix`` (``/services/rbtutor-check/``)."""
    import secrets

    from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import web

    auth = HubOAuth.instance(api_token=os.environ.get("JUPYTERHUB_API_TOKEN", ""), cache_max_age=60)
    groups_cache: dict = {}

    class Base(HubOAuthenticated, web.RequestHandler):
        def initialize(self):
            self.hub_auth = auth

        def get_login_url(self):
            if self.request.method != "GET" or self.request.path.rstrip("/").endswith("api/check"):
                raise web.HTTPError(401, "a hub token is needed (Authorization: token ...)")
            return super().get_login_url()

        def write_error(self, status_code, **kwargs):
            exc = kwargs.get("exc_info", (None, None))[1]
            message = getattr(exc, "log_message", None) or self._reason
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"error": message}))

    @web.stream_request_body
    class CheckHandler(Base):
        """``POST api/check``: the body is read to its end (up to DRAIN_LIMIT), then every test is made.

        Refusing before the body has arrived would close the connection under a proxy that is
        still sending it, and the client would see the proxy's 502/503 instead of the reason.
        """

        def prepare(self):
            self._chunks, self._size = [], 0
            length = self.request.headers.get("Content-Length", "0")
            if length.isdigit() and int(length) > DRAIN_LIMIT:
                raise web.HTTPError(413, f"the request is larger than {MAX_BODY // 1024} kB")

        def check_xsrf_cookie(self):
            # tornado calls this before the body is read; the test is made in _user() afterwards
            return None

        def data_received(self, chunk):
            self._size += len(chunk)
            if self._size > DRAIN_LIMIT:
                raise web.HTTPError(413, f"the request is larger than {MAX_BODY // 1024} kB")
            if self._size <= MAX_BODY:
                self._chunks.append(chunk)

        def _user(self) -> dict:
            """The hub user the request comes from, or HTTPError 401/403 saying why not."""
            user = self.current_user  # from the Authorization header's token, else the OAuth cookie
            if not user:
                raise web.HTTPError(401, "a hub token of a course user is needed (Authorization: token ...)")
            if not getattr(self, "_token_authenticated", False):
                # a browser's request authenticated by the cookie: it must carry the _xsrf value
                HubOAuthenticated.check_xsrf_cookie(self)
            if user.get("kind", "user") != "user":
                raise web.HTTPError(403, "only users' tokens can check answers")
            return user

        async def post(self):
            user = self._user()
            if self._size > MAX_BODY:
                raise web.HTTPError(413, f"the request is larger than {MAX_BODY // 1024} kB")
            media = self.request.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if media != "application/json":
                raise web.HTTPError(415, f"expected Content-Type application/json, got {media[:60] or 'none'!r}")
            try:
                reply = core.check(user["name"], b"".join(self._chunks))
            except CheckRefused as refused:
                raise web.HTTPError(refused.status, refused.message) from None
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(reply))

    class StatsHandler(Base):
        async def _instructors(self) -> set[str]:
            cached = groups_cache.get("at")
            if cached is None or time.monotonic() - cached > 30:
                model = await auth._api_request("GET", url_path_join(auth.api_url, "groups", instructor_group))
                groups_cache.update(at=time.monotonic(), names=set((model or {}).get("users", [])))
            return groups_cache["names"]

        @web.authenticated
        async def get(self):
            if self.current_user["name"] not in await self._instructors():
                raise web.HTTPError(403, f"the statistics are for the group {instructor_group} only")
            try:
                stuck_after = core.settings()["stuck_after"]
            except CheckRefused:
                stuck_after = STUCK_AFTER
            parts = statistics(core.log.records(), stuck_after)
            if self.get_argument("format", "html") == "csv":
                self.set_header("Content-Type", "text/csv; charset=utf-8")
                self.set_header("Content-Disposition", 'attachment; filename="checks.csv"')
                self.finish(statistics_csv(parts))
            else:
                self.set_header("Content-Type", "text/html; charset=utf-8")
                self.finish(statistics_html(parts, stuck_after))

    class IndexHandler(web.RequestHandler):
        def get(self):
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"service": SERVICE_NAME, "check": url_path_join(prefix, "api/check"),
                                    "stats": url_path_join(prefix, "stats")}))

    return web.Application([
        (prefix, IndexHandler),
        (url_path_join(prefix, "api/check"), CheckHandler),
        (url_path_join(prefix, "stats"), StatsHandler),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=secrets.token_bytes(32), xsrf_cookies=True)


def main() -> int:
    """Run the service with the configuration the hub passes in the environment."""
    import asyncio
    from urllib.parse import urlparse

    from tornado.httpserver import HTTPServer

    course = os.environ.get("RBTUTOR_COURSE")
    if not course or not Path(course).is_dir():
        raise SystemExit(f"rbtutor-check: RBTUTOR_COURSE must name the course folder, got {course!r}")
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{SERVICE_NAME}/")
    bind = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101"))
    core = CheckCore(course)
    core.settings()  # a broken checks.yaml is said at start-up, in the hub's log
    app = make_app(core, prefix, os.environ.get("RBTUTOR_INSTRUCTOR_GROUP", INSTRUCTOR_GROUP))

    async def serve():
        server = HTTPServer(app, xheaders=True)
        server.listen(bind.port or 80, bind.hostname or "127.0.0.1")
        print(f"rbtutor-check: serving {prefix} on {bind.geturl()} for {course}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
