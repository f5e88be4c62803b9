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

What one client can hold (see :class:`BoundedHTTPServer` and :meth:`CheckHandler.prepare`):
the service sits behind the hub's proxy, so every request comes from the proxy's address
and a cap per address would be a cap on the whole class. The bounds are therefore:

* before the headers are in (nobody is known yet): a connection is closed after
  :data:`IDLE_TIMEOUT` s without a complete request, and at most :data:`MAX_CONNECTIONS`
  are open; when that many are, the one waiting longest for its request is closed to make
  room (connections that never sent a request first), so a pile of idle connections
  cannot keep a new one out;
* once the headers are in: the token names the user, and one user may have
  :data:`PER_USER_REQUESTS` requests open at once (requests without a known user, all
  together, :data:`ANONYMOUS_REQUESTS`); a body must arrive within :data:`BODY_TIMEOUT` s
  and may not exceed :data:`DRAIN_LIMIT` bytes;
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

import asyncio
import json
import os
import resource
import secrets
import signal
import time
from pathlib import Path

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated, UserNotAllowed
from jupyterhub.utils import url_path_join
from tornado import httputil, web
from tornado.httpserver import HTTPServer
from tornado.log import app_log

from ..hub_service import service_address
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

#: seconds a connection may stay open without a complete request's headers (tornado's default: 3600)
IDLE_TIMEOUT = 10.0
#: seconds a request's body may take to arrive once its headers are in (tornado's default: no limit)
BODY_TIMEOUT = 10.0
#: connections open at once; when full, the one waiting longest for its request is closed
MAX_CONNECTIONS = 512
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
    ], cookie_secret=secrets.token_bytes(32), xsrf_cookies=True)


class _Watched(httputil.HTTPMessageDelegate):
    """A request's delegate that tells the server when the headers and the body are in."""

    def __init__(self, server: BoundedHTTPServer, conn, delegate: httputil.HTTPMessageDelegate):
        self.server, self.conn, self.delegate = server, conn, delegate

    def headers_received(self, start_line, headers):
        self.server._phase(self.conn, "body")
        return self.delegate.headers_received(start_line, headers)

    def data_received(self, chunk):
        return self.delegate.data_received(chunk)

    def finish(self):
        self.server._phase(self.conn, "answer")
        return self.delegate.finish()

    def on_connection_close(self):
        return self.delegate.on_connection_close()


class BoundedHTTPServer(HTTPServer):
    """tornado's HTTPServer with at most ``max_connections`` connections open.

    Each connection is known to be waiting for a request's headers, for its body, or being
    answered (its request is complete). When a new connection comes and the cap is reached,
    the connection that has waited longest for headers or body is closed, those that never
    completed a request first; if every connection is being answered, the new one is
    closed. A client that opens many connections and sends nothing (or little) thus loses
    its own oldest ones, and a client that sends a request at once gets in.
    """

    def initialize(self, *args, max_connections: int = MAX_CONNECTIONS, **kwargs):
        super().initialize(*args, **kwargs)
        if max_connections < 1:
            raise ValueError(f"expected max_connections >= 1, got {max_connections}")
        self.max_connections = max_connections
        self.closed_for_room = 0
        # connection -> [phase, since (monotonic), requests completed]
        self._state: dict = {}
        self._said = 0.0

    def handle_stream(self, stream, address):
        if len(self._connections) >= self.max_connections and not self._make_room():
            stream.close()
            self._say("a new connection was refused: every connection is being answered")
            return
        super().handle_stream(stream, address)

    def _make_room(self) -> bool:
        waiting = [(served > 0, since, id(conn), conn) for conn, (phase, since, served) in self._state.items()
                   if phase in ("headers", "body") and conn in self._connections]
        if not waiting:
            return False
        conn = min(waiting)[3]
        self._state.pop(conn, None)
        conn.stream.close()
        self.closed_for_room += 1
        self._say(f"{self.closed_for_room} connection(s) closed so far to make room "
                  f"({self.max_connections} open at most)")
        return True

    def _say(self, message: str) -> None:
        # at most one line every 10 s in the hub's log, however hard the service is pressed
        if time.monotonic() - self._said > 10:
            self._said = time.monotonic()
            app_log.warning("rbtutor-check: %s", message)

    def _phase(self, conn, phase: str) -> None:
        state = self._state.get(conn)
        if state is not None:
            state[0], state[1] = phase, time.monotonic()
            if phase == "answer":
                state[2] += 1

    def start_request(self, server_conn, request_conn):
        state = self._state.setdefault(server_conn, ["headers", time.monotonic(), 0])
        state[0], state[1] = "headers", time.monotonic()
        return _Watched(self, server_conn, super().start_request(server_conn, request_conn))

    def on_close(self, server_conn):
        self._state.pop(server_conn, None)
        super().on_close(server_conn)


def _allow_open_files(needed: int) -> int:
    """Raise this process's soft limit of open files to at least ``needed`` when the hard limit allows.

    Returns the connection cap that fits under the soft limit (``needed`` less a margin for
    the service's own files and the workers' pipes, when it could not be raised far enough).
    """
    margin = 128
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + margin
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        soft = new
    return needed if soft == resource.RLIM_INFINITY else max(1, min(needed, soft - margin))


def serve(app, bind, banner: str, judges: JudgePool | None = None, max_connections: int = MAX_CONNECTIONS) -> None:
    """Serve ``app`` at ``bind`` with the service's bounds, until the process is stopped (SIGTERM or SIGINT).

    The client's address is read from the ``X-Real-Ip`` and ``X-Forwarded-For`` headers the
    hub's proxy sets (``xheaders``); ``banner`` is printed once the socket listens, for the
    hub's log. On the way out the judge's workers are stopped.
    """
    cap = _allow_open_files(max_connections)

    async def run():
        server = BoundedHTTPServer(app, xheaders=True, idle_connection_timeout=IDLE_TIMEOUT,
                                   body_timeout=BODY_TIMEOUT, max_body_size=DRAIN_LIMIT, max_connections=cap)
        server.listen(bind.port or 80, bind.hostname or "127.0.0.1")
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        print(banner, flush=True)
        await stop.wait()
        server.stop()

    try:
        asyncio.run(run())
    finally:
        if judges is not None:
            judges.shutdown()


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
    serve(app, bind, f"rbtutor-check: serving {prefix} on {bind.geturl()} for {course}", judges)
    return 0
