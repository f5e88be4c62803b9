"""Step: the course's hub services (instant checks, personalised fetch) put on the network.

Both services (:mod:`rbtutor.course.checks.service`, :mod:`rbtutor.course.fetch_service`)
are managed services of JupyterHub: the hub starts them and tells each, in its environment,
the path prefix it answers under and the address it listens on. This module reads that
address (:func:`service_address`) and serves a tornado application there until the process
is stopped (:func:`serve_forever`), the same way for both.

tornado is imported inside :func:`serve_forever` only: the fetch service imports this
module at its top, and its core is imported by tests that need no web server.
"""

from __future__ import annotations

import asyncio
import os
from urllib.parse import ParseResult, urlparse


def service_address(name: str, default_url: str) -> tuple[str, ParseResult]:
    """``(prefix, bind)`` of the service ``name`` from the hub's ``JUPYTERHUB_SERVICE_PREFIX`` and
    ``JUPYTERHUB_SERVICE_URL`` (``/services/<name>/`` and ``default_url`` when they are unset)."""
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{name}/")
    bind = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", default_url))
    return prefix, bind


def serve_forever(app, bind: ParseResult, banner: str) -> None:
    """Serve the tornado application ``app`` at ``bind`` (host and port) until the process is stopped.

    The client's address is read from the ``X-Real-Ip`` and ``X-Forwarded-For`` headers the
    hub's proxy sets (``xheaders``); ``banner`` is printed once the socket listens, for the
    hub's log.
    """

    # deferred: tornado takes about 0.1 s to import, and only this step needs it
    from tornado.httpserver import HTTPServer

    async def serve():
        server = HTTPServer(app, xheaders=True)
        server.listen(bind.port or 80, bind.hostname or "127.0.0.1")
        print(banner, flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())
