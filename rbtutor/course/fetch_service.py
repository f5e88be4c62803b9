"""Step: personalised fetch. A JupyterHub service that gives a student the released notebook with their own numbers.

On the course hub nothing a student runs can compute a key: their server and kernel run from
environments without rbtutor, and the course data with its salt are readable by the
instructor and this service only. So a student's Fetch cannot write their own numbers into
the notebook itself; it asks this service, which runs beside the hub as a Unix user of its
own (``python -m rbtutor.course.fetch_service``, a managed service named :data:`SERVICE_NAME`),
at ``/services/rbtutor-fetch/``:

``POST api/personalise``
    Body ``{"assignment": "problem03", "notebook": "problem03.ipynb"}`` (the notebook's path
    inside the released assignment, ``/``-separated), authenticated with the student's own hub
    token (``Authorization: token ...``; the Fetch of the students' servers sends the server's
    ``JUPYTERHUB_API_TOKEN``). The student is whoever the hub says owns the token: nothing in
    the request names them, so no one can ask for a classmate's numbers. The reply is
    ``{"notebook": ...}``: the released notebook (read from the exchange's outbound folder, not
    from the student) with its data cells and the text quoting the numbers rewritten with that
    student's variant (:func:`rbtutor.course.personal.personalise_notebook`), or unchanged when
    the course data switch variants off.

``GET api/due-dates``
    The logged-in student's own due dates and the course's late policy, read-only, for the
    Assignment List and the Submit dialog of the students' JupyterLab
    (``rbtutor/course/labextension``). The student is the one the hub authenticated, by the
    same token header or, from a browser, by the service's OAuth cookie (a page load: the
    extension reads the reply in a hidden frame); nothing in the request can name another
    student. The reply (:meth:`FetchCore.due_dates_of`) is ``{"student", "now", "due_dates",
    "assignments", "late"}``: for each released assignment the due-dates file lists, the
    student's own due date, the class's, and whether it is an extension; ``due_dates`` is
    false without a due-dates file (nothing is late) and null when the file cannot be read;
    ``late`` is the share of the score taken off per started day late.

Refusals get a 4xx reply whose JSON body ``{"error": ...}`` says why: a body over
:data:`MAX_BODY` bytes (413), a body that is not a JSON object with exactly those two text
fields, or names with other characters than letters, digits, ``_ . -`` (400), no token (401),
a token that is not a user's, or a user whose name is not an acceptable student id
(:func:`rbtutor.grading.student_ids.check_id`: the reserved ``reference`` and the instructor
among them) (403), no such released notebook (404), a released folder or notebook that is a
link, is not owned by the instructors or root, or is writable by others (409). ``GET
api/due-dates`` without a user is sent to the hub's OAuth log-in (302).

Configuration comes from the environment the hub gives the service: ``RBTUTOR_OUTBOUND`` (the
exchange's ``<course>/outbound`` folder), ``RBTUTOR_COURSE_DATA`` (the course data file),
``RBTUTOR_RELEASERS`` (comma-separated accounts whose files in the exchange are trusted,
besides root), ``RBTUTOR_DUE_DATES`` (optional: the course's ``exercises/due_dates.yaml``; the
opening cell then gives the student their own due date, :func:`rbtutor.course.late.show_due_date`),
``RBTUTOR_LATE_PERCENT_PER_DAY`` (optional: the course's late share per started day, which the
hub reads from the course's ``course.toml`` when it starts, :func:`course_late_share`; without
it, the default of :class:`rbtutor.course.late.PercentPerDay`) and JupyterHub's own
``JUPYTERHUB_*`` variables. The due-dates file is read afresh for every fetch and every
``api/due-dates``, with the course's bounded loader (:func:`rbtutor.course.late.parse_due_dates`: a capped
size, no YAML aliases), so the instructor's edits reach the next fetch without a restart; on the
hub it is ``/srv/rbtutor/due_dates.yaml``, which the course's ``exercises/due_dates.yaml`` links to
(``hub/hubctl.py``, :func:`rbtutor.course.late.publish_due_dates`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import pwd
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from ..grading.config import GRADING
from ..grading.student_ids import check_id
from ..problems.variants import load_course_data, per_student
from .hub_service import serve, service_address
from .settings import SettingsError, load_settings

SERVICE_NAME = "rbtutor-fetch"
#: requests with a longer body are refused (413)
MAX_BODY = 4 * 1024
#: the longest body the server reads at all (then the connection is closed without an answer)
DRAIN_LIMIT = 64 * 1024
#: a released notebook larger than this is refused (the exchange is the instructor's, but a cap costs nothing)
MAX_NOTEBOOK = 16 * 1024 * 1024
#: one name of an assignment, folder or notebook, as nbgrader and the course name them
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
#: the deepest notebook path inside an assignment
MAX_DEPTH = 4
FIELDS = ("assignment", "notebook")


class FetchRefused(Exception):
    """A request the service does not answer; ``status`` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def parse_request(body: bytes) -> tuple[str, list[str]]:
    """The assignment and the notebook's path parts a request body names; :class:`FetchRefused` (400) otherwise."""
    if len(body) > MAX_BODY:
        raise FetchRefused(413, f"the request is larger than {MAX_BODY} bytes")
    try:
        request = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FetchRefused(400, f"expected a JSON object, got text that does not parse: {exc}") from None
    if not isinstance(request, dict):
        raise FetchRefused(400, f"expected a JSON object, got a {type(request).__name__}")
    if sorted(request) != sorted(FIELDS):
        extra, missing = sorted(set(request) - set(FIELDS)), sorted(set(FIELDS) - set(request))
        raise FetchRefused(400, f"expected exactly the fields {', '.join(FIELDS)}; "
                                f"unknown: {extra or 'none'}, missing: {missing or 'none'}")
    assignment, notebook = request["assignment"], request["notebook"]
    if not isinstance(assignment, str) or not NAME.fullmatch(assignment):
        raise FetchRefused(400, "expected an assignment name of letters, digits, '_', '.', '-', "
                                f"got {assignment!r:.80}")
    if not isinstance(notebook, str):
        raise FetchRefused(400, f"expected the notebook's path as text, got a {type(notebook).__name__}")
    parts = notebook.split("/")
    if len(parts) > MAX_DEPTH or not all(NAME.fullmatch(p) and p not in (".", "..") for p in parts) \
            or not notebook.endswith(".ipynb"):
        raise FetchRefused(400, f"expected a notebook path of at most {MAX_DEPTH} names of letters, digits, "
                                f"'_', '.', '-' ending in .ipynb, got {notebook!r:.120}")
    return assignment, parts


def _trusted(fd: int, shown: str, releasers: frozenset[int], directory: bool) -> None:
    """Refuse (409) an exchange entry that is not the instructors' own, or that others may change."""
    info = os.fstat(fd)
    kind_ok = stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)
    if not kind_ok:
        raise FetchRefused(409, f"the released {shown} is not a {'folder' if directory else 'regular file'}")
    if info.st_uid not in releasers:
        raise FetchRefused(409, f"the released {shown} belongs to uid {info.st_uid}, not to an instructor")
    if info.st_mode & 0o022:
        raise FetchRefused(409, f"the released {shown} may be changed by others (mode {info.st_mode & 0o7777:o})")


def read_released(outbound: Path, assignment: str, parts: list[str], releasers: frozenset[int]) -> bytes:
    """The bytes of ``outbound/assignment/parts...``, reached without following links.

    Every folder from the course's exchange folder (the parent of ``outbound``) down, and the
    notebook itself, must belong to root or a releaser and not be writable by others: the
    exchange is writable by every user, and a student's file must never be taken for a release.
    """
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    chain = [(str(outbound.parent), "course folder"), ("outbound", "outbound folder"), (assignment, assignment)]
    chain += [(name, "/".join([assignment, *parts[:k + 1]])) for k, name in enumerate(parts[:-1])]
    opened: list[int] = []
    try:
        for name, shown in chain:
            try:
                fd = os.open(name, flags_dir, dir_fd=opened[-1] if opened else None)
            except FileNotFoundError:
                raise FetchRefused(404, f"no released assignment or folder {shown}") from None
            except (NotADirectoryError, OSError) as exc:
                raise FetchRefused(409, f"the released {shown} cannot be opened as a folder: {exc.strerror}") from None
            opened.append(fd)
            _trusted(fd, shown, releasers, directory=True)
        shown = "/".join([assignment, *parts])
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=opened[-1])
        except FileNotFoundError:
            raise FetchRefused(404, f"no released notebook {shown}") from None
        except OSError as exc:
            raise FetchRefused(409, f"the released notebook {shown} cannot be opened: {exc.strerror}") from None
        opened.append(fd)
        _trusted(fd, f"notebook {shown}", releasers, directory=False)
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_NOTEBOOK + 1)
        if len(data) > MAX_NOTEBOOK:
            raise FetchRefused(409, f"the released notebook {shown} is larger than {MAX_NOTEBOOK >> 20} MiB")
        return data
    finally:
        for fd in opened:
            os.close(fd)


@dataclass(frozen=True)
class FetchCore:
    """What the service does, without the web server: ``personalised(student, body)``."""

    outbound: Path
    data_file: Path
    releasers: frozenset[int]
    due_dates: Path | None = None  # the course's exercises/due_dates.yaml, when due dates are shown
    #: the course's late share, percent of a notebook's score per started day late
    late_percent_per_day: float = GRADING.late_percent_per_day

    def personalised(self, student: str, body: bytes) -> dict:
        """The notebook the request in ``body`` names, with ``student``'s numbers, as a JSON-ready dict."""
        # deferred: nbformat takes 1743 ms to import (-X importtime, 2026-12-06); only a fetch needs it
        import nbformat

        # deferred: rbtutor.course.personal takes 1008 ms to import (-X importtime, 2026-12-06); only a fetch needs it
        from .personal import personalise_notebook

        try:
            check_id(student)
        except ValueError as exc:
            raise FetchRefused(403, f"no personal notebook for this account: {exc}") from None
        assignment, parts = parse_request(body)
        raw = read_released(self.outbound, assignment, parts, self.releasers)
        try:
            nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
        except (UnicodeDecodeError, ValueError) as exc:
            raise FetchRefused(409, f"the released notebook {'/'.join(parts)} is not a notebook: {exc}") from None
        data = load_course_data(self.data_file)
        due = self.own_due_date(assignment, student)
        personalise_notebook(nb, data if per_student(data) else None, student,
                             name="/".join([assignment, *parts]), due=due)
        return nb


    def own_due_date(self, assignment: str, student: str):
        """``(due, extended)`` of :func:`rbtutor.course.late.own_due_date`, or None without a due-dates file.

        The file is read for each call (an edit counts at once). A due-dates file that does not
        parse leaves the date out (logged in one short line for the instructor, who also hears of it
        from ``make grade``) rather than keep every student from fetching.
        """
        # deferred: rbtutor.course.late takes 1098 ms to import (-X importtime, 2026-12-06); only a fetch needs it
        from .late import own_due_date

        if self.due_dates is None:
            return None
        try:
            return own_due_date(self.due_dates, assignment, student)
        except (OSError, ValueError) as exc:
            logging.getLogger(SERVICE_NAME).error("due dates left out of %s: %s", assignment, exc)
            return None


    def due_dates_of(self, student: str, now: dt.datetime | None = None) -> dict:
        """``student``'s own due dates of the released assignments and the course's late policy, JSON-ready.

        ``{"student", "now", "due_dates", "assignments": {name: {"due", "class_due", "extended"}},
        "late": {"percent_per_day", "rule"}}``, times in ISO 8601 with their zone. Only
        assignments released in the exchange (a folder in ``outbound``) are listed, so the
        file's plans for later ones stay the instructor's. ``due_dates`` is False without a
        due-dates file and None when it does not parse (logged, as for a fetch); the
        assignments are then empty. :class:`FetchRefused` (403) for an account that is not a
        student id.
        """
        # deferred: it brings in nbgrader (3.1 s to import, python -X importtime 2026-12-06), needed only here
        from .late import parse_due_dates

        try:
            check_id(student)
        except ValueError as exc:
            raise FetchRefused(403, f"no due dates for this account: {exc}") from None
        now = now or dt.datetime.now(dt.UTC)
        share = self.late_percent_per_day
        reply = {"student": student, "now": now.isoformat(), "due_dates": False, "assignments": {},
                 "late": {"percent_per_day": share,
                          "rule": f"{share:g} % of a notebook's score is taken off for every day, or part of a day, "
                                  "it is handed in after your own due date, never more than the score"}}
        if self.due_dates is None:
            return reply
        try:
            deadlines = parse_due_dates(self.due_dates)
        except (OSError, ValueError) as exc:
            logging.getLogger(SERVICE_NAME).error("due dates not shown to %s: %s", student, exc)
            return {**reply, "due_dates": None}
        if deadlines is None:
            return reply
        released = released_names(self.outbound)
        reply["due_dates"] = True
        for name in sorted(set(deadlines) & released):
            deadline = deadlines[name]
            reply["assignments"][name] = {"due": deadline.of(student).isoformat(),
                                          "class_due": deadline.due.isoformat(),
                                          "extended": student in deadline.extensions}
        return reply


def released_names(outbound: Path) -> set[str]:
    """The names of the assignments released in the exchange's ``outbound`` folder (folders, not links)."""
    try:
        entries = list(os.scandir(outbound))
    except OSError:
        return set()
    return {e.name for e in entries if NAME.fullmatch(e.name) and e.is_dir(follow_symlinks=False)}


def course_late_share(course: str | os.PathLike) -> tuple[float, str]:
    """The late share the course ``course`` grades with, as far as its ``course.toml`` says, and where from.

    For the hub's configuration, which hands it to the service (``RBTUTOR_LATE_PERCENT_PER_DAY``).
    A share set in the course's ``nbgrader_config.py`` instead is not seen here (that file is
    code, and the hub does not run it); a ``course.toml`` that does not load gives the default,
    and the second value says why.
    """

    name = "late_percent_per_day"
    try:
        settings = load_settings(course)
    except SettingsError as exc:
        return GRADING.late_percent_per_day, f"the default: course.toml does not load ({exc})"
    if name in settings.values:
        return float(settings.values[name]), f"{settings.path}"
    return GRADING.late_percent_per_day, "the default"


def releaser_uids(names: str) -> frozenset[int]:
    """Root and the uids of the comma-separated account ``names`` (an unknown account is an error)."""
    uids = {0}
    for name in filter(None, (n.strip() for n in names.split(","))):
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            raise ValueError(f"expected an account name in RBTUTOR_RELEASERS, got {name!r}: no such user") from None
    return frozenset(uids)


def service_entry(outbound, data_file, python: str, user: str, releasers: list[str],
                  url: str = "http://127.0.0.1:10102", due_dates=None,
                  late_percent_per_day: float | None = None) -> tuple[dict, list[dict]]:
    """The hub configuration of the service: ``(service, roles)`` for ``c.JupyterHub.services`` and
    ``c.JupyterHub.load_roles``.

    The service itself needs no scope: it learns whom a token belongs to from the hub with that
    token. The second role, given to the course's groups by the caller, lets users reach it.
    ``due_dates``, when given, is the course's due-dates file (it need not exist yet): each
    fetched notebook then shows its student's own due date. ``late_percent_per_day``, when given,
    is the course's late share (:func:`course_late_share`), which ``api/due-dates`` tells students.
    """
    service = {"name": SERVICE_NAME, "url": url, "user": user, "cwd": "/",
               "command": [python, "-m", "rbtutor.course.fetch_service"],
               "environment": {"RBTUTOR_OUTBOUND": str(outbound), "RBTUTOR_COURSE_DATA": str(data_file),
                               "RBTUTOR_RELEASERS": ",".join(releasers),
                               **({"RBTUTOR_DUE_DATES": str(due_dates)} if due_dates else {}),
                               **({"RBTUTOR_LATE_PERCENT_PER_DAY": repr(float(late_percent_per_day))}
                                  if late_percent_per_day is not None else {})},
               "oauth_no_confirm": True}
    roles = [{"name": f"{SERVICE_NAME}-user", "scopes": [f"access:services!service={SERVICE_NAME}"]}]
    return service, roles


def due_dates_handler(core: FetchCore, token: str):
    """The tornado handler of ``GET api/due-dates`` (:meth:`FetchCore.due_dates_of` for the hub's user).

    The user comes from a token in the ``Authorization`` header or from the service's OAuth
    cookie, which a browser gets by going through the hub's OAuth once (the hub asks nothing:
    ``oauth_no_confirm``). A read-only page load needs no ``_xsrf`` value (JupyterHub's rule for
    ``GET`` navigations); a script's ``fetch`` does, so the students' JupyterLab loads the page in
    a hidden frame.
    """
    # deferred: jupyterhub.services.auth takes 0.69 s to import (python -X importtime 2026-12-06)
    from jupyterhub.services.auth import HubOAuth, HubOAuthenticated

    # deferred: tornado.web takes 0.10 s to import (python -X importtime 2026-12-06); only this step needs it
    from tornado import web

    # the one instance the OAuth callback (HubOAuthCallbackHandler) uses as well
    auth = HubOAuth.instance(api_token=token, cache_max_age=60)

    class DueDatesHandler(HubOAuthenticated, web.RequestHandler):
        """``GET api/due-dates``: the authenticated student's own due dates and the late policy."""

        def initialize(self):
            self.hub_auth = auth

        def write_error(self, status_code, **kwargs):
            exc = kwargs.get("exc_info", (None, None))[1]
            message = getattr(exc, "log_message", None) or self._reason
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"error": message}))

        @web.authenticated  # a browser without the service's cookie is sent through the hub's OAuth first
        def get(self):
            user = self.current_user
            if user.get("kind", "user") != "user":
                raise web.HTTPError(403, "only users have due dates")
            try:
                reply = core.due_dates_of(user["name"])
            except FetchRefused as refused:
                raise web.HTTPError(refused.status, refused.message) from None
            self.set_header("Content-Type", "application/json")
            self.set_header("Cache-Control", "no-store")
            self.finish(json.dumps(reply))

    return DueDatesHandler


def make_app(core: FetchCore, prefix: str):
    """The tornado application of the service under ``prefix`` (``/services/rbtutor-fetch/``)."""

    # deferred: jupyterhub.services.auth takes 651 ms to import (-X importtime, 2026-12-06); only the app needs it
    from jupyterhub.services.auth import HubAuth, HubAuthenticated, HubOAuthCallbackHandler

    # deferred: jupyterhub.utils takes 351 ms to import (-X importtime, 2026-12-06); only the app needs it
    from jupyterhub.utils import url_path_join

    # deferred: tornado.web takes 42 ms to import (-X importtime, 2026-12-06); only the app needs it
    from tornado import web

    # deferred: tornado.log takes 21 ms to import (-X importtime, 2026-12-06); only the app needs it
    from tornado.log import app_log

    token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
    auth = HubAuth(api_token=token, cache_max_age=60)  # personalise: a token in the header, nothing else

    @web.stream_request_body
    class PersonaliseHandler(HubAuthenticated, web.RequestHandler):
        def initialize(self):
            self.hub_auth = auth

        def prepare(self):
            self._chunks, self._size = [], 0
            length = self.request.headers.get("Content-Length")
            if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
                raise web.HTTPError(413, f"the request is larger than {MAX_BODY} bytes")

        def check_xsrf_cookie(self):
            # only a token in the Authorization header is taken (a browser never sends one on its
            # own, so there is no forgery to guard against); anything else is unauthenticated
            if not self.hub_auth.get_token(self, in_cookie=False):
                raise web.HTTPError(401, "a hub token is needed (Authorization: token ...)")

        def get_login_url(self):
            raise web.HTTPError(401, "a hub token of a course user is needed (Authorization: token ...)")

        def data_received(self, chunk):
            self._size += len(chunk)
            if self._size > MAX_BODY:
                raise web.HTTPError(413, f"the request is larger than {MAX_BODY} bytes")
            self._chunks.append(chunk)

        def write_error(self, status_code, **kwargs):
            exc = kwargs.get("exc_info", (None, None))[1]
            message = getattr(exc, "log_message", None) or self._reason
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"error": message}))

        async def post(self):
            user = self.current_user
            if not user:
                raise web.HTTPError(401, "a hub token of a course user is needed (Authorization: token ...)")
            if user.get("kind", "user") != "user":
                raise web.HTTPError(403, "only users' tokens can fetch a personal notebook")
            try:
                nb = core.personalised(user["name"], b"".join(self._chunks))
            except FetchRefused as refused:
                raise web.HTTPError(refused.status, refused.message) from None
            app_log.info("rbtutor-fetch: a personal notebook for %s", user["name"])
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"notebook": nb}))

    return web.Application([(url_path_join(prefix, "api/personalise"), PersonaliseHandler),
                            (url_path_join(prefix, "api/due-dates"), due_dates_handler(core, token)),
                            (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler)],
                           cookie_secret=secrets.token_bytes(32), xsrf_cookies=True)


def main() -> int:
    """Run the service with the configuration the hub passes in the environment."""
    outbound = Path(os.environ.get("RBTUTOR_OUTBOUND", ""))
    data_file = Path(os.environ.get("RBTUTOR_COURSE_DATA", ""))
    if not outbound.is_absolute() or not data_file.is_file():
        raise SystemExit(f"rbtutor-fetch: RBTUTOR_OUTBOUND must be an absolute path and RBTUTOR_COURSE_DATA a "
                         f"readable file, got {str(outbound)!r} and {str(data_file)!r}")
    due_dates = os.environ.get("RBTUTOR_DUE_DATES") or None
    share = os.environ.get("RBTUTOR_LATE_PERCENT_PER_DAY") or GRADING.late_percent_per_day
    try:
        share = float(share)
    except ValueError:
        raise SystemExit(f"rbtutor-fetch: RBTUTOR_LATE_PERCENT_PER_DAY must be a number, got {share!r}") from None
    core = FetchCore(outbound, data_file, releaser_uids(os.environ.get("RBTUTOR_RELEASERS", "")),
                     Path(due_dates) if due_dates else None, share)
    prefix, bind = service_address(SERVICE_NAME, "http://127.0.0.1:10102")
    app = make_app(core, prefix)
    # bodies up to the drain limit are read, so that one over MAX_BODY gets its 413; larger ones are cut off
    serve(app, bind, f"rbtutor-fetch: serving {prefix} on {bind.geturl()} from {outbound}", max_body_size=DRAIN_LIMIT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
