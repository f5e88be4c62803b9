"""Headless Chromium driven by the DevTools protocol over a pipe.

Shared by the browser tests (tests/conftest.py) and ``make pdf``
(book/_ext/print_pdf.py). The pipe (``--remote-debugging-pipe``: fd 3 commands in,
fd 4 replies out, NUL-separated JSON) keeps working when the browser sits in its
own network namespace, where a TCP debugging port would be unreachable.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

# Debian's Chromium; RBTUTOR_CHROMIUM names another build (or, for a check of the skips, none)
CHROMIUM = Path(os.environ.get("RBTUTOR_CHROMIUM") or "/usr/bin/chromium")


def settle_js(report: str, mathjax_ms: int, other_ms: int) -> str:
    """A page script that waits, each wait bounded, for MathJax's first typeset pass (``mathjax_ms``),
    then for the images and web fonts (``other_ms`` each), and returns the JS expression ``report``,
    which may read ``mathjax`` (``'ok'``, ``'timeout'``, ``'error: ...'`` or ``'not loaded'``)."""
    return f"""
(async () => {{
  const within = (p, ms) => Promise.race([p, new Promise(r => setTimeout(() => r('timeout'), ms))]);
  const mj = window.MathJax;
  let mathjax = 'not loaded';
  if (mj && mj.startup && mj.startup.promise) {{
    mathjax = await within(mj.startup.promise.then(() => 'ok', e => 'error: ' + e), {int(mathjax_ms)});
  }}
  const settled = img => img.complete ? 0 : new Promise(r => {{
    img.addEventListener('load', r);
    img.addEventListener('error', r);
  }});
  await within(Promise.all([...document.images].map(settled)), {int(other_ms)});
  await within(document.fonts.ready, {int(other_ms)});
  return {report};
}})()
"""


def chromium_available() -> bool:
    """Whether :data:`CHROMIUM` is a file this process can execute."""
    return CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


class CDPError(RuntimeError):
    pass


class Chromium:
    """Headless Chromium driven by the DevTools protocol over --remote-debugging-pipe.

    ``wrap`` turns the browser's argv into the one to run (the tests put it in a
    network namespace of its own).
    """

    def __init__(self, executable: Path, profile: Path, log_path: Path,
                 wrap: Callable[[list[str]], list[str]] = list):
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        # Move the child's ends out of the way of 3 and 4 before dup2 in the child.
        hi_cmd_r = _dup_high(cmd_r)
        hi_res_w = _dup_high(res_w)
        os.close(cmd_r)
        os.close(res_w)

        def wire_pipe():  # runs in the child between fork and exec
            os.dup2(hi_cmd_r, 3)
            os.dup2(hi_res_w, 4)

        argv = wrap(
            [str(executable), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"]
        )
        with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=wire_pipe,
                close_fds=False,  # Python's own fds are non-inheritable; 3 and 4 must survive
            )
        os.close(hi_cmd_r)
        os.close(hi_res_w)
        self._out = os.fdopen(cmd_w, "wb", buffering=0)
        self._in = os.fdopen(res_r, "rb", buffering=0)
        self._next_id = 0
        self._replies: dict[int, dict] = {}
        self.events: list[dict] = []
        self._cond = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.session_id: str | None = None

    def _read_loop(self) -> None:
        buf = b""
        while True:
            chunk = self._in.read(65536)
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def send(self, method: str, params: dict | None = None, *, session: bool = True,
             timeout: float = 30.0) -> dict:
        with self._cond:
            self._next_id += 1
            msg_id = self._next_id
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session and self.session_id:
            msg["sessionId"] = self.session_id
        self._out.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while msg_id not in self._replies:
                remaining = deadline - time.monotonic()
                if self._closed or remaining <= 0:
                    raise CDPError(f"no reply to {method} (browser closed={self._closed})")
                self._cond.wait(remaining)
            reply = self._replies.pop(msg_id)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, since: int, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for ev in self.events[since:]:
                    if ev.get("method") == method:
                        return ev
                remaining = deadline - time.monotonic()
                if self._closed or remaining <= 0:
                    raise CDPError(f"timed out waiting for {method}")
                self._cond.wait(remaining)

    def open_page(self, width: int = 1280, height: int = 1000) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
            session=False,
        )
        self.session_id = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        # Every page load fetches every resource, so a failure cannot hide in the cache.
        self.send("Network.setCacheDisabled", {"cacheDisabled": True})
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def evaluate(self, expression: str, timeout: float = 30.0):
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            raise CDPError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        with contextlib.suppress(CDPError):
            self.send("Browser.close", session=False, timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        self._reader.join(timeout=5)
        self._in.close()


def _dup_high(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
