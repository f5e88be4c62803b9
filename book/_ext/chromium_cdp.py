"""Headless Chromium driven by the DevTools protocol over a pipe.

Shared by the browser tests (tests/conftest.py) and ``make pdf``
(book/_ext/print_pdf.py). The pipe (``--remote-debugging-pipe``: fd 3 commands in,
fd 4 replies out, NUL-separated JSON) keeps working when the browser sits in its
own network namespace, where a TCP debugging port would be unreachable.

A call waits for its reply up to ``timeout`` seconds. A long call (printing a big
book on a busy machine) can instead be waited on by progress: given ``stall``, the
wait goes on while the browser is alive and working, that is while its processes
use CPU or it sends messages, and fails early, saying which, when the browser
exits or does nothing for ``stall`` seconds; ``timeout`` then bounds the whole call.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
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


# How often a wait by progress looks at the browser, and the share of one core its processes
# must use over a stall window to count as working (an idle headless Chromium uses about 0.5 %).
PROGRESS_POLL_SECONDS = 1.0
PROGRESS_MIN_CPU_SHARE = 0.02


class CDPError(RuntimeError):
    pass


def tree_cpu_seconds(root: int) -> float:
    """CPU time (user and system, in seconds) used so far by process ``root`` and its descendants.

    Read from /proc; children already reaped count through their parent's ``cutime``/``cstime``.
    """
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process has just exited
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        ticks[pid] = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    total = 0
    for pid, used in ticks.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root:
            total += used
    return total / os.sysconf("SC_CLK_TCK")


class ProgressWatch:
    """Tells whether a browser is still alive and working while a call waits (see the module docstring)."""

    def __init__(self, browser: Chromium, stall: float):
        self.browser = browser
        self.stall = stall
        self.samples = [self._sample()]

    def _sample(self) -> tuple[float, int, float]:
        return time.monotonic(), self.browser.received, tree_cpu_seconds(self.browser.proc.pid)

    def check(self, what: str) -> None:
        """Raise CDPError when the browser has exited, or has neither used CPU nor sent a
        message for ``stall`` seconds."""
        status = self.browser.proc.poll()
        if status is not None:
            raise CDPError(f"Chromium exited (status {status}) while waiting for the {what}")
        now, received, cpu = self._sample()
        self.samples.append((now, received, cpu))
        # Keep the newest sample that is at least a stall window old, and those after it.
        while len(self.samples) > 1 and now - self.samples[1][0] >= self.stall:
            self.samples.pop(0)
        since, received_then, cpu_then = self.samples[0]
        if now - since < self.stall or received > received_then:
            return
        if cpu - cpu_then < PROGRESS_MIN_CPU_SHARE * (now - since):
            raise CDPError(f"Chromium stalled: no message and {cpu - cpu_then:.2f} s of CPU in the "
                           f"last {now - since:.0f} s while waiting for the {what}")


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
        self.received = 0  # messages read from the browser so far (progress for ProgressWatch)
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
                    self.received += 1
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def send(self, method: str, params: dict | None = None, *, session: bool = True,
             timeout: float = 30.0, stall: float | None = None) -> dict:
        """Send one command and return its result; ``stall``: wait by progress (module docstring)."""
        with self._cond:
            self._next_id += 1
            msg_id = self._next_id
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session and self.session_id:
            msg["sessionId"] = self.session_id
        try:
            self._out.write(json.dumps(msg).encode() + b"\0")
        except BrokenPipeError as exc:
            raise CDPError(f"cannot send {method}: the browser has gone "
                           f"(exit status {self.proc.poll()})") from exc
        reply = self._wait(lambda: self._replies.pop(msg_id, None), f"reply to {method}", timeout, stall)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, since: int, timeout: float = 30.0,
                   stall: float | None = None) -> dict:
        """The first event called ``method`` among ``self.events[since:]``, waiting for it if need be."""
        def found():
            return next((ev for ev in self.events[since:] if ev.get("method") == method), None)

        return self._wait(found, f"event {method}", timeout, stall)

    def _wait(self, ready: Callable[[], dict | None], what: str, timeout: float, stall: float | None):
        """Wait until ``ready()`` (called under the lock) returns a message; that message.
        ``what`` names it in the errors (``reply to Page.navigate``)."""
        deadline = time.monotonic() + timeout
        watch = ProgressWatch(self, stall) if stall else None
        with self._cond:
            while True:
                message = ready()
                if message is not None:
                    return message
                remaining = deadline - time.monotonic()
                if self._closed:
                    raise CDPError(f"the browser closed the connection (exit status {self.proc.poll()}) "
                                   f"while waiting for the {what}")
                if remaining <= 0:
                    raise CDPError(f"no {what} within {timeout:g} s")
                if watch:
                    watch.check(what)
                    remaining = min(remaining, PROGRESS_POLL_SECONDS)
                self._cond.wait(remaining)

    def open_page(self, width: int = 1280, height: int = 1000, *, timeout: float = 30.0,
                  stall: float | None = None) -> None:
        """Open one tab and attach to it; ``timeout`` and ``stall`` apply to each call, as in :meth:`send`."""
        def call(method: str, params: dict | None = None, session: bool = True) -> dict:
            return self.send(method, params, session=session, timeout=timeout, stall=stall)

        target = call("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                        session=False)
        self.session_id = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            call(f"{domain}.enable")
        # Every page load fetches every resource, so a failure cannot hide in the cache.
        call("Network.setCacheDisabled", {"cacheDisabled": True})
        call("Emulation.setDeviceMetricsOverride",
             {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def evaluate(self, expression: str, timeout: float = 30.0, stall: float | None = None):
        """The value of a page expression (awaited if it is a promise)."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            timeout=timeout, stall=stall,
        )
        if "exceptionDetails" in result:
            raise CDPError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def read_stream(self, handle: str, timeout: float = 30.0, stall: float | None = None) -> bytes:
        """The whole content of a CDP stream (e.g. ``Page.printToPDF`` with ``ReturnAsStream``),
        read in chunks (each one a sign of progress), then closed."""
        chunks = []
        while True:
            part = self.send("IO.read", {"handle": handle, "size": 1 << 20}, timeout=timeout, stall=stall)
            data = part.get("data", "")
            chunks.append(base64.b64decode(data) if part.get("base64Encoded") else data.encode("utf-8"))
            if part.get("eof"):
                break
        self.send("IO.close", {"handle": handle}, timeout=timeout, stall=stall)
        return b"".join(chunks)

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
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
