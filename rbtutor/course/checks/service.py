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
    For members of the instructors' group only: the page of :mod:`.stats` (HTML, or CSV
    with ``?format=csv``).

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
429    more checks of this answer id than the limit allows
====== =====================================================================================

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

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join
from tornado import web

from ..hub_service import serve_forever, service_address
from .core import (
    DRAIN_LIMIT,
    INSTRUCTOR_GROUP,
    MAX_BODY,
    SERVICE_NAME,
    STUCK_AFTER,
    CheckCore,
    CheckRefused,
)
from .stats import statistics, statistics_csv, statistics_html


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
            reply = self.check_core.check(user["name"], b"".join(self._chunks))
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
        parts = statistics(self.check_core.log.records(), stuck_after)
        if self.get_argument("format", "html") == "csv":
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


def make_app(core: CheckCore, prefix: str, instructor_group: str = INSTRUCTOR_GROUP):
    """The tornado application of the service under ``prefix`` (``/services/rbtutor-check/``)."""
    auth = HubOAuth.instance(api_token=os.environ.get("JUPYTERHUB_API_TOKEN", ""), cache_max_age=60)
    hub = {"core": core, "auth": auth}
    return web.Application([
        (prefix, IndexHandler, {"prefix": prefix}),
        (url_path_join(prefix, "api/check"), CheckHandler, hub),
        (url_path_join(prefix, "stats"), StatsHandler, {**hub, "instructors": InstructorGroup(auth, instructor_group)}),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=secrets.token_bytes(32), xsrf_cookies=True)


def main() -> int:
    """Run the service with the configuration the hub passes in the environment."""
    course = os.environ.get("RBTUTOR_COURSE")
    if not course or not Path(course).is_dir():
        raise SystemExit(f"rbtutor-check: RBTUTOR_COURSE must name the course folder, got {course!r}")
    prefix, bind = service_address(SERVICE_NAME, "http://127.0.0.1:10101")
    core = CheckCore(course)
    core.settings()  # a broken checks.yaml is said at start-up, in the hub's log
    app = make_app(core, prefix, os.environ.get("RBTUTOR_INSTRUCTOR_GROUP", INSTRUCTOR_GROUP))
    serve_forever(app, bind, f"rbtutor-check: serving {prefix} on {bind.geturl()} for {course}")
    return 0
