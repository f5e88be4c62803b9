"""Shared fixtures: the offline book build and a headless Chromium driven over CDP."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = ROOT / "_build" / "html"
ARTIFACTS = ROOT / "test-artifacts"
VENV_BIN = Path(sys.executable).parent

# The same command as JB_BUILD in the Makefile; keep the two in step.
JB_BUILD_ARGS = ["build", ".", "--all", "-W", "--keep-going", "--path-output", "."]

CHROMIUM = Path("/usr/bin/chromium")
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


def _can_unshare_net() -> bool:
    """True when `unshare -n` works here (root, or user namespaces allowed) and `ip` exists."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, check=False
    )
    return probe.returncode == 0


OFFLINE = _can_unshare_net()


def offline_argv(argv: list[str]) -> list[str]:
    """Wrap argv so it runs in a fresh network namespace with only loopback up.

    Falls back to argv unchanged when network namespaces are not available; the
    tests that depend on the wrapper say so in their report.
    """
    if not OFFLINE:
        return list(argv)
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]


def build_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    # As in the Makefile: book kernels use book/_jupyter's kernelspec (inline figures).
    jupyter_path = [str(ROOT / "book" / "_jupyter"), *filter(None, [env.get("JUPYTER_PATH")])]
    env["JUPYTER_PATH"] = os.pathsep.join(dict.fromkeys(jupyter_path))
    env.pop("DISPLAY", None)
    return env


def toc_pages() -> list[str]:
    """Docnames listed in _toc.yml (root first), e.g. ['book/intro', 'book/smoke']."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            for key in ("parts", "chapters", "sections"):
                walk(entry.get(key))

    for key in ("parts", "chapters", "sections"):
        walk(toc.get(key))
    return [str(Path(n).with_suffix("")) if Path(n).suffix in {".md", ".ipynb"} else n
            for n in names]


# Browser checks against a book built elsewhere (e.g. a helper's own --path-output):
# RBTUTOR_BOOK_HTML=/path/to/_build/html skips the build and uses that folder.
BOOK_HTML_ENV = "RBTUTOR_BOOK_HTML"


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build the book exactly as `make book` does, without network; return _build/html."""
    if os.environ.get(BOOK_HTML_ENV):
        html = Path(os.environ[BOOK_HTML_ENV]).resolve()
        if not (html / "index.html").is_file():
            pytest.fail(f"{BOOK_HTML_ENV}={html} has no index.html", pytrace=False)
        return html
    jb = VENV_BIN / "jb"
    if not jb.exists():
        pytest.fail(f"jupyter-book is not installed in the test environment ({jb} missing)")
    argv = offline_argv([str(jb), *JB_BUILD_ARGS])
    started = time.monotonic()
    proc = subprocess.run(
        argv, cwd=ROOT, env=build_env(), capture_output=True, text=True, check=False
    )
    elapsed = time.monotonic() - started
    ARTIFACTS.mkdir(exist_ok=True)
    log = (f"$ {' '.join(argv)}\n(exit {proc.returncode}, {elapsed:.1f} s)\n"
           f"{proc.stdout}\n{proc.stderr}")
    (ARTIFACTS / "book-build.log").write_text(log, encoding="utf-8")
    if proc.returncode != 0:
        lines = re.sub(r"\x1b\[[0-9;]*m", "", log).splitlines()
        flagged = [ln for ln in lines if any(w in ln for w in ("WARNING", "ERROR", "Error"))]
        pytest.fail(
            f"book build failed (exit {proc.returncode}, offline={OFFLINE}); "
            f"full log in {ARTIFACTS / 'book-build.log'}\n\n"
            + "\n".join(flagged[:40]) + "\n\n--- end of log ---\n" + "\n".join(lines[-60:]),
            pytrace=False,
        )
    return HTML_DIR


class CDPError(RuntimeError):
    pass


class Chromium:
    """Headless Chromium driven by the DevTools protocol over --remote-debugging-pipe.

    The pipe (fd 3 commands in, fd 4 replies out, NUL-separated JSON) keeps working
    when the browser sits in its own network namespace, where a TCP debugging port
    would be unreachable from the test process.
    """

    def __init__(self, executable: Path, profile: Path, log_path: Path):
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

        argv = offline_argv(
            [str(executable), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"]
        )
        self._log = open(log_path, "wb")  # closed in close()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
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
        try:
            self.send("Browser.close", session=False, timeout=5)
        except CDPError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        self._reader.join(timeout=5)
        self._in.close()
        self._log.close()


def _dup_high(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)


@pytest.fixture(scope="session")
def chromium(built_book: Path):
    """A headless Chromium (offline when possible) with one open tab; skip or fail if absent."""
    if not CHROMIUM.exists():
        reason = (
            f"{CHROMIUM} not found: install it with "
            "`apt-get install -y --no-install-recommends chromium` to run the browser tests"
        )
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    ARTIFACTS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rbtutor-chromium-") as profile:
        log_path = ARTIFACTS / "chromium.log"
        browser = Chromium(CHROMIUM, Path(profile), log_path)
        try:
            try:
                browser.open_page()
            except CDPError as exc:
                log = log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
                pytest.fail(f"Chromium did not start: {exc}\n{log}", pytrace=False)
            yield browser
        finally:
            browser.close()


def require_sandbox() -> None:
    """Skip (locally) or fail (in CI) when no grading sandbox can start on this machine, saying why."""
    from rbtutor.grading.sandbox import SandboxError, check_sandbox

    try:
        check_sandbox()
    except SandboxError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must be able to start the grading sandbox: {exc}", pytrace=False)
        pytest.skip(f"no grading sandbox can start here: {exc}")
