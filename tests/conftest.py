"""Shared fixtures: the offline book build and a headless Chromium driven over CDP; how tests are
shared out between pytest-xdist's workers.

Workers (``make test`` runs ``pytest -n``): a test file goes whole to one worker, so its module
fixtures are made once; but the tests marked ``@pytest.mark.xdist_group("machine")`` (a whole file
by its ``pytestmark``, or one test) use state of the whole machine (Unix accounts and groups, the
course hub and its ports, hub/hubctl.py's folders) and all go to one worker, to run one after
another (:class:`XdistScheduling`). The machine's tests are scheduled first, the PDF's next, and
the files that read the built book last; the book is built once a run, in the background from the start
(:func:`pytest_collection_modifyitems`).
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = ROOT / "_build" / "html"
ARTIFACTS = ROOT / "test-artifacts"
VENV_BIN = Path(sys.executable).parent

# The same command as JB_BUILD in the Makefile; keep the two in step.
JB_BUILD_ARGS = ["build", ".", "--all", "-W", "--keep-going", "--path-output", "."]

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from chromium_cdp import CHROMIUM, CDPError, chromium_available  # noqa: E402
from chromium_cdp import Chromium as _Chromium  # noqa: E402


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


BUILD_LOCK = HTML_DIR.parent / ".build.lock"  # held by whoever builds the book for the tests
BUILD_STAMP = HTML_DIR.parent / ".build-outcome"  # the run that built it, then "ok" or why not


def _is_machine_mark(node) -> bool:
    """Whether an AST node is ``pytest.mark.xdist_group("machine")``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "xdist_group" and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant) and node.args[0].value == "machine")


def machine_tests(source: str) -> set[str]:
    """The names of a test file's tests that use the machine's state: every name (``{"*"}``) when
    its ``pytestmark`` is the machine's group, else its test functions marked with it. Read from
    the source, because xdist's scheduler sees node ids only (its own loadgroup cannot group on
    pytest 9: it renames items through an attribute pytest 9 no longer reads);
    :func:`pytest_collection_modifyitems` checks the reading against the markers pytest finds."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            if any(_is_machine_mark(mark) for mark in marks):
                return {"*"}
        elif isinstance(node, ast.FunctionDef) and any(_is_machine_mark(d) for d in node.decorator_list):
            names.add(node.name)
    return names


#: file name -> the names of its tests that use the machine's state ({"*"}: all of them)
MACHINE_TESTS = {path.name: names for path in (ROOT / "tests").glob("test_*.py")
                 if (names := machine_tests(path.read_text(encoding="utf-8")))}


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: "machine" for the tests that use the machine's state,
    else its file."""
    path, _, rest = nodeid.partition("::")
    names = MACHINE_TESTS.get(Path(path).name, ())
    return "machine" if "*" in names or rest.split("[", 1)[0] in names else path


PDF_TESTS = "test_pdf.py"  # the file that prints the book: handed out early, and it needs the book built
HAS_MACHINE_TESTS = pytest.StashKey[bool]()  # whether this run's selection has any of the machine's tests
NICED = pytest.StashKey[bool]()  # whether this worker has lowered its priority (pytest_runtest_setup)


class XdistScheduling:
    """The scheduler for pytest-xdist's workers; registered only when xdist is (``-p no:xdist`` works)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        """Whole files to workers, the machine's tests all to one, in the order of collection."""
        from xdist.scheduler import LoadScopeScheduling  # deferred: only under pytest-xdist (-n)

        class ByFile(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return scope_of(nodeid)

        config.option.loadscopereorder = False  # keep the order pytest_collection_modifyitems gives
        return ByFile(config, log)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistScheduling(), "rbtutor-xdist-scheduling")


@pytest.hookimpl(trylast=True)  # after -k/-m have deselected
def pytest_collection_modifyitems(config, items):
    """Of the tests selected: the machine's first (the longest run, on one worker), then the PDF's
    (which waits for the book and then prints it, ci49: 9.8 of the last 10 minutes when it came in
    the middle), the files that read the built book last; and the book's build started in the
    background now, so that the workers run the other tests while it is made."""
    misread = [item.nodeid for item in items if (scope_of(item.nodeid) == "machine") != any(
        mark.args == ("machine",) for mark in item.iter_markers("xdist_group"))]
    if misread:
        raise pytest.UsageError(f"tests/conftest.py:machine_tests misreads the machine's mark of {misread}")
    book_files = {item.path for item in items if "built_book" in getattr(item, "fixturenames", ())}

    def rank(item) -> int:
        if scope_of(item.nodeid) == "machine":
            return 0
        if item.path.name == PDF_TESTS:  # the next longest chain: the book, its single page, three prints
            return 1
        return 3 if item.path in book_files else 2

    items.sort(key=rank)
    config.stash[HAS_MACHINE_TESTS] = any(rank(item) == 0 for item in items)
    wants_book = book_files or any(item.path.name == PDF_TESTS for item in items)  # its singlehtml waits for it
    if wants_book and not os.environ.get(BOOK_HTML_ENV) and not config.option.collectonly:
        start_book_build(this_run())


#: How much lower a CPU priority (``nice``) the workers take once they run tests other than the
#: machine's. The machine's tests run one after another on one worker and are the run's longest
#: chain (ci25, 2026-12-07: 25.3 of the 26 minutes); the others have minutes to spare, so when the
#: two cores are short, the machine's tests and what they start get the larger share.
OTHERS_NICE = 5


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """An xdist worker lowers its priority (:data:`OTHERS_NICE`) before its first test that is not the
    machine's, in a run that has the machine's tests: the scheduler gives those all to one worker
    first of all, so no worker that runs another test first runs any of them later, and the one that
    runs them is done with them when it lowers its own."""
    config = item.config
    if (os.environ.get("PYTEST_XDIST_WORKER") and config.stash.get(HAS_MACHINE_TESTS, False)
            and scope_of(item.nodeid) != "machine" and not config.stash.get(NICED, False)):
        os.nice(OTHERS_NICE)
        config.stash[NICED] = True


def this_run() -> str:
    """The name of this test run, the same in every xdist worker."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"


def start_book_build(run: str) -> None:
    """Build the book for ``run`` in a process of its own, unless it is being built or was built.

    The process inherits the lock (an flock on BUILD_LOCK) and holds it until it ends, so that
    :func:`built_book` waits for it; it writes its outcome to BUILD_STAMP."""
    HTML_DIR.parent.mkdir(exist_ok=True)
    with open(BUILD_LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another worker's build is under way
        if stamped(run) is not None:
            return
        code = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); import conftest; "
                f"conftest.build_and_stamp({run!r})")
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, pass_fds=(lock.fileno(),),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stamped(run: str) -> str | None:
    """The outcome of ``run``'s build ("ok" or why not), or None if it has not built the book."""
    if not BUILD_STAMP.is_file():
        return None
    name, _, outcome = BUILD_STAMP.read_text(encoding="utf-8").partition("\n")
    return outcome if name == run else None


def build_and_stamp(run: str) -> str:
    """Build the book; write and return the outcome under the run's name."""
    outcome = _build_book() or "ok"
    BUILD_STAMP.write_text(f"{run}\n{outcome}", encoding="utf-8")
    return outcome


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build the book exactly as `make book` does, without network; return _build/html.

    Built once a run: by the process :func:`pytest_collection_modifyitems` started, which
    this waits for (on the lock), or here if none was started."""
    if os.environ.get(BOOK_HTML_ENV):
        html = Path(os.environ[BOOK_HTML_ENV]).resolve()
        if not (html / "index.html").is_file():
            pytest.fail(f"{BOOK_HTML_ENV}={html} has no index.html", pytrace=False)
        return html
    run = this_run()
    HTML_DIR.parent.mkdir(exist_ok=True)
    with open(BUILD_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # waits while this run's build goes on
        outcome = stamped(run) or build_and_stamp(run)
    if outcome != "ok":
        pytest.fail(outcome, pytrace=False)
    return HTML_DIR


def _build_book() -> str | None:
    """Run jb as the Makefile does; None, or why the build failed with its flagged lines."""
    jb = VENV_BIN / "jb"
    if not jb.exists():
        return f"jupyter-book is not installed in the test environment ({jb} missing)"
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
    if proc.returncode == 0:
        return None
    lines = re.sub(r"\x1b\[[0-9;]*m", "", log).splitlines()
    flagged = [ln for ln in lines if any(w in ln for w in ("WARNING", "ERROR", "Error"))]
    return (f"book build failed (exit {proc.returncode}, offline={OFFLINE}); "
            f"full log in {ARTIFACTS / 'book-build.log'}\n\n"
            + "\n".join(flagged[:40]) + "\n\n--- end of log ---\n" + "\n".join(lines[-60:]))


class Chromium(_Chromium):
    """The shared CDP driver (book/_ext/chromium_cdp.py), offline when possible."""

    def __init__(self, executable: Path, profile: Path, log_path: Path):
        super().__init__(executable, profile, log_path, wrap=offline_argv)


@contextlib.contextmanager
def headless_chromium(log_name: str, *, block_web: bool = False):
    """A headless Chromium with one open tab, closed afterwards; skip (locally) or fail (in CI) without one.

    ``block_web`` also blocks every http(s) request, for pages that must load nothing.
    """
    if not chromium_available():
        reason = (
            f"{CHROMIUM} not found or not executable: install it with "
            "`apt-get install -y --no-install-recommends chromium` to run the browser tests"
        )
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    ARTIFACTS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rbtutor-chromium-") as profile:
        log_path = ARTIFACTS / log_name
        browser = Chromium(CHROMIUM, Path(profile), log_path)
        try:
            try:
                browser.open_page()
                if block_web:
                    browser.send("Network.setBlockedURLs", {"urls": ["http://*", "https://*"]})
            except CDPError as exc:
                log = log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
                pytest.fail(f"Chromium did not start: {exc}\n{log}", pytrace=False)
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="session")
def chromium(built_book: Path):
    """A headless Chromium (offline when possible) with one open tab, for the book's pages."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # one log a worker, not two browsers in one file
    with headless_chromium(f"chromium{'-' + worker if worker else ''}.log") as browser:
        yield browser


def require_sandbox() -> None:
    """Skip (locally) or fail (in CI) when no grading sandbox can start on this machine, saying why."""
    from rbtutor.grading.sandbox import SandboxError, check_sandbox

    try:
        check_sandbox()
    except SandboxError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must be able to start the grading sandbox: {exc}", pytrace=False)
        pytest.skip(f"no grading sandbox can start here: {exc}")
