"""Step: the course's hub services (instant checks, personalised fetch) put on the network.

Both services (:mod:`rbtutor.course.checks.service`, :mod:`rbtutor.course.fetch_service`)
are managed services of JupyterHub: the hub starts them and tells each, in its environment,
the path prefix it answers under and the address it listens on. This module reads that
address (:func:`service_address`) and serves a tornado application there until the process
is stopped (:func:`serve`), with the same bounds for both: students reach them, so a
connection may not idle before its request (tornado's default is an hour) or take for ever
over its body, and the connections open at once are capped (:class:`BoundedHTTPServer`).
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import time
from urllib.parse import ParseResult, urlparse

from tornado import httputil
from tornado.httpserver import HTTPServer
from tornado.log import access_log, app_log

#: seconds a connection may stay open without a complete request's headers (tornado's default: 3600)
IDLE_TIMEOUT = 10.0
#: seconds a request's body may take to arrive once its headers are in (tornado's default: no limit)
BODY_TIMEOUT = 10.0
#: connections open at once; when full, the one waiting longest for its request is closed
MAX_CONNECTIONS = 512


#: refused requests of one sender and status written to the log in a minute; the rest are counted in one line
REFUSALS_LOGGED_PER_MINUTE = 5


class RequestLog:
    """The access log of a hub service (tornado's ``log_function``): one line a request, as tornado's own,
    with the reason of a refusal; but of the refusals of one sender (the hub user, else the client's
    address) with one status, only :data:`REFUSALS_LOGGED_PER_MINUTE` a minute. A flood of one student
    wrote two lines for each refused request, some 490 a second into the hub's log; now the rest of a
    minute's refusals are one line, written with the sender's next refusal after the minute. The
    service's own records (the check store's refused checks) still count every one.
    """

    def __init__(self, per_minute: int = REFUSALS_LOGGED_PER_MINUTE, clock=time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self.windows: dict[tuple[str, int], list] = {}  # (sender, status): [minute's start, logged, held back]

    def __call__(self, handler) -> None:
        request, status = handler.request, handler.get_status()
        line = f"{status} {request.method} {request.uri} ({request.remote_ip}) {1000.0 * request.request_time():.2f}ms"
        if status < 400:
            access_log.info(line)
            return
        user = getattr(handler, "current_user", None)
        sender = user["name"] if isinstance(user, dict) and user.get("name") else request.remote_ip
        now = self.clock()
        window = self.windows.get((sender, status))
        if window is None or now - window[0] >= 60:
            if window is not None and window[2]:
                access_log.warning("%s: %d more refused with %d in the minute from %.0f s ago", sender, window[2],
                                   status, now - window[0])
            if len(self.windows) >= 4096:  # a bound on what is kept: minutes long past are forgotten
                self.windows = {key: kept for key, kept in self.windows.items() if now - kept[0] < 60}
            window = self.windows[(sender, status)] = [now, 0, 0]
        if window[1] < self.per_minute:
            window[1] += 1
            reason = getattr(handler, "refusal", "")
            access_log.warning("%s %s%s", line, sender, f": {reason}" if reason else "")
        else:
            window[2] += 1


def service_address(name: str, default_url: str) -> tuple[str, ParseResult]:
    """``(prefix, bind)`` of the service ``name`` from the hub's ``JUPYTERHUB_SERVICE_PREFIX`` and
    ``JUPYTERHUB_SERVICE_URL`` (``/services/<name>/`` and ``default_url`` when they are unset)."""
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{name}/")
    bind = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", default_url))
    return prefix, bind


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

    def initialize(self, *args, max_connections: int = MAX_CONNECTIONS, name: str = "rbtutor", **kwargs):
        super().initialize(*args, **kwargs)
        self.name = name
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
            app_log.warning("%s: %s", self.name, message)

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


def serve(app, bind: ParseResult, banner: str, *, max_body_size: int, on_stop=None,
          max_connections: int = MAX_CONNECTIONS) -> None:
    """Serve ``app`` at ``bind`` with the services' bounds, until the process is stopped (SIGTERM or SIGINT).

    The client's address is read from the ``X-Real-Ip`` and ``X-Forwarded-For`` headers the
    hub's proxy sets (``xheaders``); ``banner`` is printed once the socket listens, for the
    hub's log. A connection has :data:`IDLE_TIMEOUT` s to send a request's headers and
    :data:`BODY_TIMEOUT` s for its body, of at most ``max_body_size`` bytes; at most
    ``max_connections`` are open (:class:`BoundedHTTPServer`). ``on_stop`` is called on the way out.
    """
    cap = _allow_open_files(max_connections)

    async def run():
        server = BoundedHTTPServer(app, xheaders=True, idle_connection_timeout=IDLE_TIMEOUT,
                                   body_timeout=BODY_TIMEOUT, max_body_size=max_body_size, max_connections=cap,
                                   name=banner.split(":", 1)[0])
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
        if on_stop is not None:
            on_stop()
