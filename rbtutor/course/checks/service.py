"""Step: instant checks, the web service. The JupyterHub service around :class:`.core.CheckCore`.

The service runs beside the hub (``python -m rbtutor.course.checks``, started by the hub
as a managed service named :data:`SERVICE_NAME`, configured by :func:`service_entry`) and
answers at ``/services/rbtutor-check/``:

``POST api/check``
    Body ``{"id": "p3.b.K", "value": ...}``, authenticated with the student's own hub
    token (``Authorization: token ...``; the notebook's ``check()`` sends the kernel's
    ``JUPYTERHUB_API_TOKEN``). The student is whoever the hub says owns that token:
    nothing in the body, the notebook or the kernel's environment names the student.
    Judged by :meth:`.core.CheckCore.check`; the reply is ``{"passed", "message",
    "diagnosis", "checks_left"}``.
``GET stats``
    For members of the instructors' group only: the page of :mod:`.stats` (HTML, CSV
    with ``?format=csv``, the refused checks per student and hour with ``?format=refused``).

Every request that is not judged gets a 4xx reply whose JSON body ``{"error": ...}``
says why, never a 500 (the checks are in :meth:`CheckHandler.post` and in
:func:`.core.parse_request`):

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
429    more checks of this answer id than the limit allows; or more than
       :data:`PER_USER_REQUESTS` requests of one user at once (refused as soon as the
       headers are in, without reading the body)
503    the judge's worker process died (the check is not counted; send it again)
====== =====================================================================================

What one client can hold (see :class:`..hub_service.BoundedHTTPServer`, which both hub
services use, and :meth:`CheckHandler.prepare`): the service sits behind the hub's proxy, so
every request comes from the proxy's address and a cap per address would be a cap on the
whole class. The bounds are therefore:

* before the headers are in (nobody is known yet): a connection is closed after
  ``IDLE_TIMEOUT`` s without a complete request, and at most ``MAX_CONNECTIONS`` are open
  (both of :mod:`..hub_service`); when that many are, the one waiting longest for its
  request is closed to make room (connections that never sent a request first), so a pile of
  idle connections cannot keep a new one out;
* once the headers are in: the token names the user, and one user may have
  :data:`PER_USER_REQUESTS` requests open at once (requests without a known user, all
  together, :data:`ANONYMOUS_REQUESTS`); a body must arrive within ``BODY_TIMEOUT`` s and
  may not exceed :data:`DRAIN_LIMIT` bytes;
* judging runs in worker processes (:mod:`.pool`), so neither a slow key nor the
  statistics page holds up another student's check.

The body of a request up to :data:`DRAIN_LIMIT` bytes is read to its end before any
status is sent, so a proxy in front of the service (the hub's) always hands the reply
on; a longer body announced by ``Content-Length`` is refused at once and the connection
closed, which a proxy may report as its own 502 or 503.

Configuration comes from the environment the hub gives the service:
``RBTUTOR_COURSE`` (the course folder), ``RBTUTOR_INSTRUCTOR_GROUP`` (default
``formgrade-rbtutor``) and JupyterHub's own ``JUPYTERHUB_*`` variables (read, with the
serving, by :mod:`rbtutor.course.hub_service`).

This module imports tornado and JupyterHub; the package loads it only when one of its
names is asked for (see :mod:`rbtutor.course.checks`), so the core's users do without them.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated, UserNotAllowed
from jupyterhub.utils import url_path_join
from tornado import web

from ..hub_service import RequestLog, serve, service_address
from .core import (
    DRAIN_LIMIT,
    INSTRUCTOR_GROUP,
    MAX_BODY,
    SERVICE_NAME,
    STUCK_AFTER,
    CheckCore,
    CheckRefused,
)
from .pool import JudgePool, process_pool
from .stats import refused_csv, statistics, statistics_csv, statistics_html

#: requests of one hub user open at once (a notebook's check() sends one at a time)
PER_USER_REQUESTS = 4
#: requests whose token names no user, all together
ANONYMOUS_REQUESTS = 32


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


class InstructorGroup:
    """The members of the instructors' hub group, asked of the hub again after 30 s."""

    def __init__(self, auth: HubOAuth, name: str):
        self.auth = auth
        self.name = name
        self._cache: dict = {}

    async def members(self) -> set[str]:
        cached = self._cache.get("at")
        if cached is None or time.monotonic() - cached > 30:
            model = await self.auth._api_request("GET", url_path_join(self.auth.api_url, "groups", self.name))
            self._cache.update(at=time.monotonic(), names=set((model or {}).get("users", [])))
        return self._cache["names"]


class OpenRequests:
    """How many check requests each user has open; a user at the cap gets no more until one ends."""

    def __init__(self, per_user: int = PER_USER_REQUESTS, anonymous: int = ANONYMOUS_REQUESTS):
        self.per_user = per_user
        self.anonymous = anonymous
        self.open: dict[str, int] = {}

    def take(self, name: str | None) -> bool:
        """One more open request for ``name`` (None: no known user), or False when at the cap."""
        key = name if name is not None else ""
        cap = self.per_user if name is not None else self.anonymous
        if self.open.get(key, 0) >= cap:
            return False
        self.open[key] = self.open.get(key, 0) + 1
        return True

    def give_back(self, name: str | None) -> None:
        key = name if name is not None else ""
        left = self.open.get(key, 0) - 1
        if left > 0:
            self.open[key] = left
        else:
            self.open.pop(key, None)


class HubHandler(HubOAuthenticated, web.RequestHandler):
    """What the service's authenticated pages share: the hub's authentication, errors as JSON."""

    def initialize(self, core: CheckCore, auth: HubOAuth):
        self.check_core = core
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

    def log_exception(self, typ, value, tb):
        if isinstance(value, web.HTTPError):  # a refusal: the access log (RequestLog) says it, with its reason
            self.refusal = value.log_message or ""
            return
        super().log_exception(typ, value, tb)


@web.stream_request_body
class CheckHandler(HubHandler):
    """``POST api/check``: the body is read to its end (up to DRAIN_LIMIT), then every test is made.

    Refusing before the body has arrived would close the connection under a proxy that is
    still sending it, and the client would see the proxy's 502/503 instead of the reason.
    """

    def initialize(self, core: CheckCore, auth: HubOAuth, judges: JudgePool, open_requests: OpenRequests):
        super().initialize(core, auth)
        self.judges = judges
        self.open_requests = open_requests
        self._holder = False  # the name whose open request this is, once counted
        self._body_in = False  # post() runs once the whole body has been read

    def write_error(self, status_code, **kwargs):
        if not self._body_in:
            # refused before the body was read: tornado closes the connection after the reply;
            # saying so keeps the hub's proxy from sending the next request (another
            # student's) on a connection that is about to close, which it would answer with 503
            self.set_header("Connection", "close")
        super().write_error(status_code, **kwargs)

    async def prepare(self):
        """Once the headers are in: the size announced, who is asking, and how many requests they have open.

        The user is asked of the hub without blocking the event loop (the hub's answer is
        cached for a minute). A user with :data:`PER_USER_REQUESTS` requests open already is
        refused at once, before the body is read: that closes the connection, which the
        proxy may show as its own 502 or 503 (the price for a client that holds requests
        open; a notebook's ``check()`` sends one at a time).
        """
        self._chunks, self._size = [], 0
        length = self.request.headers.get("Content-Length", "0")
        if length.isdigit() and int(length) > DRAIN_LIMIT:
            raise web.HTTPError(413, f"the request is larger than {MAX_BODY // 1024} kB")
        model = await self.hub_auth.get_user(self, sync=False)
        try:
            self.current_user = self.check_hub_user(model) if model else None
        except UserNotAllowed:
            self.current_user = None
        name = self.current_user["name"] if self.current_user else None
        if not self.open_requests.take(name):
            who = f"the user {name}" if name else "requests without a hub user"
            cap = self.open_requests.per_user if name else self.open_requests.anonymous
            raise web.HTTPError(429, f"too many checks at once from {who} (at most {cap}); "
                                     "send the next when one has been answered")
        self._holder = (name,)

    def _give_back(self):
        if self._holder:
            self.open_requests.give_back(self._holder[0])
            self._holder = False

    def on_finish(self):
        self._give_back()

    def on_connection_close(self):
        self._give_back()
        super().on_connection_close()

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
        self._body_in = True
        user = self._user()
        if self._size > MAX_BODY:
            raise web.HTTPError(413, f"the request is larger than {MAX_BODY // 1024} kB")
        media = self.request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media != "application/json":
            raise web.HTTPError(415, f"expected Content-Type application/json, got {media[:60] or 'none'!r}")
        try:
            reply = await self.judges.check(user["name"], b"".join(self._chunks))
        except CheckRefused as refused:
            raise web.HTTPError(refused.status, refused.message) from None
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(reply))


class StatsHandler(HubHandler):
    """``GET stats``: the page of :mod:`.stats`, for the members of the instructors' group."""

    def initialize(self, core: CheckCore, auth: HubOAuth, instructors: InstructorGroup):
        super().initialize(core, auth)
        self.instructors = instructors

    @web.authenticated
    async def get(self):
        if self.current_user["name"] not in await self.instructors.members():
            raise web.HTTPError(403, f"the statistics are for the group {self.instructors.name} only")
        try:
            stuck_after = self.check_core.settings()["stuck_after"]
        except CheckRefused:
            stuck_after = STUCK_AFTER
        store = self.check_core.store
        wanted = self.get_argument("format", "html")
        if wanted == "refused":
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            self.set_header("Content-Disposition", 'attachment; filename="checks-refused.csv"')
            self.finish(refused_csv(store))
            return
        parts = statistics(store, stuck_after)
        if wanted == "csv":
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            self.set_header("Content-Disposition", 'attachment; filename="checks.csv"')
            self.finish(statistics_csv(parts))
        else:
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(statistics_html(parts, stuck_after))


class IndexHandler(web.RequestHandler):
    """The service's own address: where checks and statistics are."""

    def initialize(self, prefix: str):
        self.prefix = prefix

    def get(self):
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"service": SERVICE_NAME, "check": url_path_join(self.prefix, "api/check"),
                                "stats": url_path_join(self.prefix, "stats")}))


def make_app(core: CheckCore, prefix: str, instructor_group: str = INSTRUCTOR_GROUP,
             judges: JudgePool | None = None, open_requests: OpenRequests | None = None):
    """The tornado application of the service under ``prefix`` (``/services/rbtutor-check/``).

    ``judges`` judges the checks (by default in worker processes, :func:`.pool.process_pool`);
    ``open_requests`` counts each user's open requests (by default :data:`PER_USER_REQUESTS`).
    """
    auth = HubOAuth.instance(api_token=os.environ.get("JUPYTERHUB_API_TOKEN", ""), cache_max_age=60)
    hub = {"core": core, "auth": auth}
    if judges is None:
        judges = JudgePool(core, lambda: process_pool(core.course))
    checking = {**hub, "judges": judges, "open_requests": open_requests or OpenRequests()}
    return web.Application([
        (prefix, IndexHandler, {"prefix": prefix}),
        (url_path_join(prefix, "api/check"), CheckHandler, checking),
        (url_path_join(prefix, "stats"), StatsHandler, {**hub, "instructors": InstructorGroup(auth, instructor_group)}),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=secrets.token_bytes(32), xsrf_cookies=True, log_function=RequestLog())


def main() -> int:
    """Run the service with the configuration the hub passes in the environment."""
    course = os.environ.get("RBTUTOR_COURSE")
    if not course or not Path(course).is_dir():
        raise SystemExit(f"rbtutor-check: RBTUTOR_COURSE must name the course folder, got {course!r}")
    prefix, bind = service_address(SERVICE_NAME, "http://127.0.0.1:10101")
    core = CheckCore(course)
    core.settings()  # a broken checks.yaml is said at start-up, in the hub's log
    judges = JudgePool(core, lambda: process_pool(core.course))
    judges.warm()
    app = make_app(core, prefix, os.environ.get("RBTUTOR_INSTRUCTOR_GROUP", INSTRUCTOR_GROUP), judges=judges)
    serve(app, bind, f"rbtutor-check: serving {prefix} on {bind.geturl()} for {course}", max_body_size=DRAIN_LIMIT,
          on_stop=judges.shutdown)
    return 0
