"""The course on a JupyterHub, end to end in headless Chromium (``make hub``, hub/hubctl.py).

Two students on their own Unix accounts log in, fetch problem03 from the Assignments panel,
answer (student1 right, student2 with a sign error in K), validate and submit in JupyterLab;
the instructor collects and grades with ``python -m rbtutor.course``, grades a written part
in the Formgrader, re-grades, returns the feedback, exports the grades for Canvas and opens the
class report (``report/index.html``) from their own server in the browser; the students fetch
and open the feedback. The course's due dates give student1 an extension: their fetched
notebook, the Formgrader's copy and grades.csv show their own due date, student2's the class's.

What the students see, as they see it: the Assignment List gives each one's own due date and the
time left; Validate of a partly answered notebook says in one line how many parts need work and
which, then one block per part with a wrong form, named by its part and question, the unanswered
parts in one line; a fully answered one says so in one line. Submit asks first, with the due date,
the time left (or, with the due date moved into the past for a moment, how late and what that
costs) and the last Validate; Cancel puts nothing into the exchange.

On the way, as a hostile student would: a Validate of a notebook with ``check()`` cells
leaves the check count alone, and student1's own terminal (JupyterLab's, and commands run
as student1 in their server's environment) can neither read nor compute a key, the course
data's salt or student2's numbers: no rbtutor, the course data and the instructor's rbtutor
unreadable, no file student1 can read holding the salt, one of student2's own key values or
two of student2's data lines, and the personalising service answers only for the token's owner.

The book's notebooks on the hub (``test_the_book_runs_on_the_hub``): the book's launch link opens
a page in the book's kernel for the instructor, whose copy runs; a student gets no book kernel, no
copy and no importable rbtutor until the operator's ``--student-book``, and then their own copy
runs while the course data stays refused.

A wait that times out says what it waited for, where the page was, and the hub log's tail.

Needs root (the hub creates accounts and starts servers as other users) and /usr/bin/chromium:
skipped locally without them or without ``RBTUTOR_HUB_TEST=1`` (the test resets the hub's
course state: do not run it on a hub in use); in CI (``CI=true``) it runs and a missing piece
fails it. Screenshots of each step go to test-artifacts/hub/.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import CHROMIUM, chromium_available
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "hub"
sys.path.insert(0, str(ROOT / "hub"))
import hubctl  # noqa: E402

# Real accounts, the hub's folders and processes: one worker runs these, one after another.
pytestmark = pytest.mark.xdist_group("machine")

ASSIGNMENT = "problem03"
# The hub's paths and ports are the machine's: whoever runs a course hub here (this test, another
# checkout's test run, `flock /tmp/rbtutor-hub.lock rbtutor hub up` by hand) holds this lock.
HUB_LOCK = Path("/tmp/rbtutor-hub.lock")
COURSE = Path("/home/instructor/course")
# due in the future, so nothing is late; student1 has three days more
DUE_DATES = f"{ASSIGNMENT}:\n  due: 2030-03-01T12:00:00+00:00\n  extensions:\n    student1: 3d\n"
OWN_DUE = {"student1": "04 March 2030, 12:00", "student2": "01 March 2030, 12:00"}
#: the same moments as the Assignment List and the Submit dialog give them (in UTC)
OWN_DUE_SHOWN = {"student1": "Monday 04 March 2030, 12:00 UTC", "student2": "Friday 01 March 2030, 12:00 UTC"}


def hub_unavailable(gradebook: str) -> str | None:
    """Why a test of the course hub cannot run here (None when it can); test_lti_hub.py asks too."""
    if os.geteuid() != 0:
        return "the hub test needs root (it creates Unix accounts and starts servers as them)"
    if not chromium_available():
        return f"{CHROMIUM} not found or not executable (apt-get install -y --no-install-recommends chromium)"
    if not os.environ.get("CI") and os.environ.get("RBTUTOR_HUB_TEST") != "1":
        return "set RBTUTOR_HUB_TEST=1 to run it here: it resets the course state of the hub on this machine"
    if gradebook == "postgres":
        from pgserver import PostgresError, bin_dir

        try:
            bin_dir()
        except PostgresError as exc:
            return f"make hub GRADEBOOK=postgres needs PostgreSQL: {exc}"
    return None


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hub(request):
    """The hub as `make hub` (SQLite gradebook) and `make hub GRADEBOOK=postgres` set it up."""
    global SHOTS
    reason = hub_unavailable(request.param)
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the hub test: {reason}", pytrace=False)
        pytest.skip(reason)
    with open(HUB_LOCK, "a") as lock:  # one course hub a machine: wait for any other user of it
        fcntl.flock(lock, fcntl.LOCK_EX)
        hubctl.stop()
        hubctl.up(start_hub=False, gradebook=request.param)
        reset_course_state()
        hubctl.start()
        SHOTS = ROOT / "test-artifacts" / ("hub" if request.param == "sqlite" else f"hub-{request.param}")
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield json.loads(hubctl.PASSWORDS.read_text())
        hubctl.stop()
    if request.param == "postgres":
        hubctl.stop_postgres()


def hub_log_tail(lines: int = 60) -> str:
    """The last ``lines`` lines of the hub's log (spawner, single-user servers and services write there)."""
    try:
        text = hubctl.LOG.read_text(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        return f"(no hub log: {exc})"
    return f"--- last {len(text)} lines of {hubctl.LOG}:\n" + "\n".join(text)


def page_state(page) -> str:
    """Where a page is and the start of its text, for a failure message."""
    try:
        text = page.inner_text("body", timeout=2_000)
    except PlaywrightTimeoutError as exc:
        text = f"(no text: {exc})"
    return f"page {page.url}:\n{text[:1500]}"


def reset_course_state() -> None:
    """A fresh run: empty exchange, no fetched copies, no gradebook or working folders."""
    import shutil

    shutil.rmtree(hubctl.EXCHANGE / hubctl.COURSE_ID, ignore_errors=True)
    for student in hubctl.STUDENTS:
        shutil.rmtree(hubctl.home(student) / ASSIGNMENT, ignore_errors=True)
        # nbgrader's record of the student's submissions, which the Assignment List shows (one per earlier run)
        shutil.rmtree(hubctl.home(student) / ".local" / "share" / "jupyter" / "nbgrader_cache", ignore_errors=True)
    for name in ("release", "submitted", "autograded", "feedback", "integrity", ".grading", "checks", "report"):
        shutil.rmtree(COURSE / name, ignore_errors=True)
    # the assignment's source as in the checkout (the course folder is copied only once, so an
    # older copy would lack the helper cell's check()), owned by the instructor
    source = COURSE / "exercises" / ASSIGNMENT
    shutil.copytree(ROOT / "exercises" / ASSIGNMENT, source, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    owner = hubctl.home("instructor").stat()
    for path in [source, *source.rglob("*")]:
        os.lchown(path, owner.st_uid, owner.st_gid)
    for name in ("gradebook.db", "gradebook.db.bak", "grades.csv", "integrity_report.md", "integrity_report.json",
                 "roster.csv", "grades-canvas.csv"):
        (COURSE / name).unlink(missing_ok=True)
    # the instructor writes the due dates in the course folder; make hub (here: its step) keeps them
    # where the fetch service reads them and links them back
    due_dates = COURSE / "exercises" / "due_dates.yaml"
    due_dates.unlink(missing_ok=True)
    due_dates.write_text(DUE_DATES)
    os.lchown(due_dates, owner.st_uid, owner.st_gid)
    hubctl.ensure_due_dates(due_dates, (owner.st_uid, owner.st_gid))
    assert due_dates.is_symlink()
    assert hubctl.DUE_DATES.read_text() == DUE_DATES
    if hubctl.gradebook_url():  # the PostgreSQL gradebook: an empty database
        from pgserver import PostgresServer

        password = (hubctl.STATE / "postgres_password").read_text().strip()
        server = PostgresServer(hubctl.PG_FOLDER, hubctl.PG_PORT, password=password)
        server.psql(f'DROP DATABASE IF EXISTS "{hubctl.COURSE_ID}" WITH (FORCE)')
        server.create_database(hubctl.COURSE_ID)


def as_instructor(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command in the course folder as the instructor, as in a terminal of the hub."""
    result = subprocess.run(hubctl.instructor_argv(*command), cwd=COURSE, capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
                             f"{result.stderr[-3000:]}")
    return result


STUDENT_ANSWERS = {  # written as a student would (a verbatim copy of the key is refused at collect)
    "p3_b_K_answer": "u_0, r_0 = nu_turn[0], nu_turn[5]\nK = -m * r_G[2] * u_0 * r_0",
    "p3_c_phi_answer": "phi = -K / (m * g * GM)\nphi_deg = phi * 180 / np.pi",
    "p3_d_answer": "K_raised = -m * z_G_raised * u_0 * r_0\nphi_raised_deg = -K_raised / (m * g * GM) * 180 / np.pi",
    "p3_a_derivation": "Only the r^2 I_yz term and the -m z_G u r term survive; I_yz = 0 by symmetry.",
    "p3_c_direction": "phi is negative, so the port side goes down: the ship leans into the turn.",
    "p3_d_reversal": "With G above the waterline z_G changes sign, and so does the heel.",
    "p3_e_assumption": "The side force was taken at O; it really acts lower down, near mid-draft.",
}


#: student1's first try: (a) written, K a vector by mistake, phi given; the rest left as released
PARTLY_ANSWERED = {
    "p3_a_derivation": STUDENT_ANSWERS["p3_a_derivation"],
    "p3_b_K_answer": "K = np.array([1.0, 2.0, 3.0])  # a vector by mistake",
    "p3_c_phi_answer": "phi = -0.02\nphi_deg = phi * 180 / np.pi",
}
#: the graded cells of PARTLY_ANSWERED whose form is right (the test cells of phi, the written (a))
PARTLY_RIGHT = {"p3_a_derivation", "p3_c_phi_rad", "p3_c_phi_deg"}


def parts_of(notebook: dict) -> dict[str, list[str]]:
    """``{"(b)": [grade ids]}``: the graded cells of a notebook under each part's heading (``## (b) ...``)."""
    parts, part = {}, None
    for cell in notebook["cells"]:
        text = "".join(cell["source"])
        heading = re.match(r"#+\s*(\([a-z]\))", text) if cell["cell_type"] == "markdown" else None
        if heading:
            part = heading.group(1)
        info = cell.get("metadata", {}).get("nbgrader", {})
        if info.get("grade"):
            parts.setdefault(part, []).append(info["grade_id"])
    return parts


def with_answers(notebook: dict, answers: dict[str, str]) -> dict:
    """``notebook`` with the answer cells ``answers`` names filled in."""
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") in answers:
            cell["source"] = answers[cell["metadata"]["nbgrader"]["grade_id"]]
    return notebook


def answered(notebook: dict, sign_error: bool) -> dict:
    """The released notebook answered (student2: K with the wrong sign)."""
    answers = dict(STUDENT_ANSWERS)
    if sign_error:
        answers["p3_b_K_answer"] = answers["p3_b_K_answer"].replace("K = -m", "K = m")
    for cell in notebook["cells"]:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    return notebook


class Session:
    """One user's browser session on the hub."""

    def __init__(self, browser, user: str, password: str, first_start: bool = True):
        """Log in; with ``first_start`` the user's server was not running, and its start page is checked."""
        self.user = user
        self.start_shot = False
        self.base = f"{hubctl.URL}/user/{user}"
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.context.add_init_script(_SPAWN_PROGRESS_JS)
        self.page = self.context.new_page()
        self.page.set_default_timeout(60_000)
        page = self.page
        page.goto(f"{hubctl.URL}/hub/login")
        page.fill("#username_input", user)
        page.fill("#password_input", password)
        page.click("#login_submit")
        self.wait_for_server()
        self.waited("JupyterLab's main area", lambda: page.wait_for_selector("#jp-main-dock-panel"))
        self.waited("the Nbgrader menu", lambda: page.wait_for_selector(".lm-MenuBar-itemLabel:text-is('Nbgrader')"))
        if first_start:
            start_progress_shown(self)
        page.evaluate(_WAITS_JS)

    def wait_for_server(self, timeout: float = 240.0, after_stop: bool = False) -> None:
        """Wait until the browser is in JupyterLab, failing at once when the hub reports a failed spawn.

        The hub gives a spawn ``Spawner.start_timeout`` (180 s), so the wait is longer than that:
        a slow spawn ends in the hub's own verdict, which the failure then shows. The spawn-pending
        page learns that the server is ready from an event stream; if it is still there after 30 s,
        it is loaded again (as a user would), which sends a ready server's user on to it.
        ``after_stop``: the spawn was asked for right after a Stop; if the hub was still ending the
        stop, it answered "already active" and the page then says the server is not running, so the
        start is asked for again (as a user would press Launch Server).
        """
        started = time.monotonic()
        reloaded = started
        while f"/user/{self.user}/lab" not in self.page.url:
            try:
                text = self.page.evaluate("() => document.body ? document.body.innerText : ''")
            except PlaywrightError:  # the page navigated while we read it
                text = ""
            waited = time.monotonic() - started
            if "s so far" in text and self.user in ("student1", "instructor") and not self.start_shot:
                self.shot(f"00-{self.user}-server-starting")  # the start page with the course's progress
                self.start_shot = True
            if "Spawn failed" in text or "failed to start" in text.lower() or waited > timeout:
                raise AssertionError(f"{self.user}'s server did not come up (waited {waited:.0f} s)\n"
                                     f"{page_state(self.page)}\n{hub_log_tail()}")
            if after_stop and "/hub/spawn-pending/" in self.page.url and "Server not running" in text:
                print(f"{self.user}: the hub ended the stop after the start was asked for; asking again", flush=True)
                self.page.goto(f"{hubctl.URL}/hub/spawn/{self.user}")
                continue
            if "/hub/spawn-pending/" in self.page.url and time.monotonic() - reloaded > 30:
                print(f"{self.user}: still on {self.page.url} after {waited:.0f} s; loading it again", flush=True)
                self.page.goto(self.page.url)
                reloaded = time.monotonic()
            try:
                self.page.wait_for_url(f"**/user/{self.user}/lab**", timeout=2_000)
            except PlaywrightTimeoutError:
                continue

    def waited(self, what: str, wait):
        """``wait()``, or an AssertionError saying what did not come, where the page was and the hub log's tail."""
        try:
            return wait()
        except PlaywrightTimeoutError as exc:
            raise AssertionError(f"{self.user}: no {what}: {exc}\n{page_state(self.page)}\n{hub_log_tail()}") \
                from None

    def shot(self, name: str, page=None, full_page: bool = False) -> None:
        (page or self.page).screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)

    def api(self, method: str, path: str, data=None):
        """A call to this user's Jupyter server with the browser's cookies and XSRF token."""
        # the hub and this user's server each set an _xsrf cookie: the one whose path is the server's
        cookies = [c for c in self.context.cookies(self.base + "/") if c["name"] == "_xsrf"]
        xsrf = max(cookies, key=lambda c: len(c["path"]))["value"] if cookies else ""
        response = self.page.request.fetch(f"{self.base}/{path}", method=method, headers={"X-XSRFToken": xsrf},
                                           data=json.dumps(data) if data is not None else None)
        return response

    def open_assignment_list(self):
        self.page.click("text=Nbgrader")
        self.page.click(".lm-Menu-itemLabel:text-is('Assignment List')")
        self.page.wait_for_selector("#released_assignments_list")

    def close(self):
        self.context.close()


#: kept in the tab's sessionStorage (which outlives the move to JupyterLab): each step of the start page's
#: progress bar as [percent, message]
_SPAWN_PROGRESS_JS = """(() => {
  if (!location.pathname.includes("/hub/spawn-pending/")) return;
  const keep = () => {
    const bar = document.getElementById("progress-bar"), message = document.getElementById("progress-message");
    if (!bar || !message || !message.textContent) return;
    const seen = JSON.parse(sessionStorage.getItem("rbtutor-spawn-progress") || "[]");
    const step = [bar.getAttribute("aria-valuenow"), message.textContent];
    const last = seen[seen.length - 1];
    if (last && last[0] === step[0] && last[1] === step[1]) return;
    seen.push(step);
    sessionStorage.setItem("rbtutor-spawn-progress", JSON.stringify(seen));
  };
  document.addEventListener("DOMContentLoaded", () => new MutationObserver(keep).observe(document.body,
    {subtree: true, childList: true, attributes: true, characterData: true}));
})()"""

#: every text a wait line of the Assignment List showed, as "action: text", however briefly it was there
_WAITS_JS = """() => {
  if (window.rbtutorWaitsSeen) return;
  window.rbtutorWaitsSeen = [];
  const keep = () => document.querySelectorAll(".rbtutor-busy").forEach((line) => {
    const text = line.dataset.action + ": " + line.innerText.trim();
    if (!window.rbtutorWaitsSeen.includes(text)) window.rbtutorWaitsSeen.push(text);
  });
  new MutationObserver(keep).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def start_progress_shown(s: Session) -> None:
    """The hub's start page showed the course spawner's steps: what is prepared, that JupyterLab runs as the
    user, and a count of the seconds against the usual time, with the bar between those steps."""
    steps = json.loads(s.page.evaluate("() => sessionStorage.getItem('rbtutor-spawn-progress') || '[]'"))
    said = "\n".join(f"{percent}%: {message}" for percent, message in steps)
    assert any(m.startswith(f"Preparing {s.user}'s JupyterLab") for _, m in steps), said
    assert any(m.startswith(f"JupyterLab started as {s.user} (process ") for _, m in steps), said
    counting = [int(p) for p, m in steps if re.search(r"loading: \d+ s so far, usually about \d+ s", m)]
    assert counting, f"no count of the seconds on {s.user}'s start page:\n{said}"
    assert all(20 <= p <= 90 for p in counting), said
    assert counting == sorted(counting), f"the bar went back while counting:\n{said}"


def wait_shown(s: Session, action: str, name: str, moved: bool = False) -> list[str]:
    """The wait line of ``action`` was shown for ``name`` while nbgrader worked (with ``moved``: its count
    went on), and is gone now; returns what it said. Clears the record for the next action."""
    s.waited(f"the end of the {action} wait line",
             lambda: s.page.wait_for_function("() => !document.querySelector('.rbtutor-busy')", timeout=120_000))
    seen = s.page.evaluate("() => window.rbtutorWaitsSeen.splice(0)")
    texts = [text for text in seen if text.startswith(f"{action}: ")]
    assert any(name in text and re.search(r"\d+ s so far", text) for text in texts), (action, name, seen)
    if moved:
        assert len({re.search(r"(\d+) s so far", t).group(1) for t in texts}) > 1, f"the count stood still: {texts}"
    return texts


def test_the_start_page_counts_against_the_usual_time():
    """The course spawner's count while JupyterLab loads: the bar moves with the seconds up to the usual
    time and never past its share, and a start slower than usual says so with the hub's limit."""
    import course_spawner as spawner

    assert spawner.usual_seconds([]) == spawner.FIRST_GUESS
    assert spawner.usual_seconds([30.0, 10.0, 12.0]) == 12.0
    events = [spawner.loading_event(t, 12.0, 180) for t in (0, 3, 6, 12, 13, 100)]
    bars = [e["progress"] for e in events]
    assert bars == sorted(bars), bars
    assert bars[0] == spawner.LAUNCHED, bars
    assert bars[-1] == spawner.LOADED, bars
    assert events[1]["message"] == "JupyterLab is loading: 3 s so far, usually about 12 s"
    assert events[4]["message"].startswith("JupyterLab is still loading: 13 s so far (usually about 12 s;")
    assert events[4]["message"].endswith("up to 3 min)")


def test_the_course_s_own_environment_works_beside_the_hub(hub, tmp_path):
    """On the machine the hub was set up on, nbgrader from the course's own .venv (this interpreter)
    still runs: the hub's configuration, which names the hub-only rbtutor_fetch, is not machine-wide."""
    import shutil

    assert not (hubctl.LEGACY_NBGRADER_CONFIG.is_file()
                and "rbtutor_fetch" in hubctl.LEGACY_NBGRADER_CONFIG.read_text())
    course = tmp_path / "course"
    shutil.copytree(ROOT / "exercises" / ASSIGNMENT, course / "exercises" / ASSIGNMENT)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_NO_CONFIG"}
    out = subprocess.run([sys.executable, "-m", "rbtutor", "assign", "--root", str(course)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-1500:] + out.stderr[-1500:]
    assert (course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()


def launch_chromium(playwright):
    """The system's Chromium, headless, as the hub tests drive it (test_lti_hub.py too)."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM),
        args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync"])


def test_assignment_loop_on_the_hub(hub):
    from playwright.sync_api import sync_playwright

    as_instructor("python", "-m", "rbtutor.course", "generate")  # as the README says
    released = as_instructor("python", "-m", "rbtutor.course", "release", ASSIGNMENT, "--force").stdout
    # what it starts says so before nbgrader's copy, and the end says how long it took
    starting = rf"releasing {ASSIGNMENT}: \d+ files? of release/{ASSIGNMENT} into the exchange\.\.\.\n"
    assert re.match(starting, released), released
    assert re.search(rf"^released {ASSIGNMENT} in \d+\.\d s: students can fetch it now$", released, re.M), released

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            run_loop(browser, hub)
        except PlaywrightTimeoutError as exc:  # any other wait of the loop: say where, and what the hub logged
            raise AssertionError(f"{exc}\n{hub_log_tail()}") from None
        finally:
            browser.close()


def run_loop(browser, passwords):
    students = {"student1": False, "student2": True}  # name: sign error
    sessions, data_cells = {}, {}
    # --- students: log in, see only the student tools, fetch, answer, validate, submit
    for student, sign_error in students.items():
        s = sessions[student] = Session(browser, student, passwords[student])
        s.shot(f"01-{student}-logged-in")
        disabled = s.page.evaluate("() => JSON.parse(document.getElementById('jupyter-config-data').textContent)"
                                   ".disabledExtensions")
        assert "@jupyterlab/apputils-extension:announcements" in disabled, f"the news question is on: {disabled}"
        specs = s.api("GET", "api/kernelspecs").json()["kernelspecs"]
        assert set(specs) == {"python3"}, f"{student} sees kernels {sorted(specs)}"
        assert s.api("GET", "formgrader/").status == 404, "the Formgrader must not be served to students"
        s.page.click("text=Nbgrader")
        menu = s.page.locator(".lm-Menu-content").inner_text()
        s.shot(f"02-{student}-nbgrader-menu")
        assert "Assignment List" in menu
        assert "Formgrader" not in menu, menu
        assert "Course List" not in menu, menu
        s.page.keyboard.press("Escape")
        s.page.click("text=View")
        s.page.click(".lm-Menu-itemLabel:text-is('Property Inspector')")  # where Create Assignment would be
        s.page.wait_for_timeout(500)
        assert s.page.locator("text=Create Assignment").count() == 0, "students must not see Create Assignment"

        s.open_assignment_list()
        released = s.page.locator("#released_assignments_list")
        released.locator(f"text={ASSIGNMENT}").first.wait_for()
        due_in_list(s, released, student)
        s.shot(f"03-{student}-assignments")  # with the due date, once the fetch service has answered
        released.locator("button:text-is('Fetch')").click()
        s.page.locator("#fetched_assignments_list").locator(f"text={ASSIGNMENT}").first.wait_for()
        wait_shown(s, "fetch", f"Fetching {ASSIGNMENT} with your own numbers")
        s.shot(f"04-{student}-fetched")
        own_copy = s.api("GET", f"api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb").json()["content"]
        data_cells[student] = data_cell(own_copy)
        opening = "".join(own_copy["cells"][0]["source"])
        assert "**Due:** " in opening, opening  # each student's own due date, from the fetch service
        assert OWN_DUE[student] in opening, opening
        assert ("your extended due date" in opening) == (student == "student1"), opening
        fetched = s.page.locator("#fetched_assignments_list")
        fetched.locator(f"text={ASSIGNMENT}").first.click()  # unfold the notebooks
        dialog = s.page.locator(".jp-Dialog")
        if not sign_error:  # validating before answering: one summary line, the unanswered parts in one line
            fetched.locator("button:text-is('Validate')").first.click()
            busy = fetched.locator(".rbtutor-busy")
            s.waited("the Validate wait line", partial(busy.wait_for))
            s.shot(f"05c-{student}-validating")
            dialog.wait_for(timeout=180_000)
            wait_shown(s, "validate", f"Validating {ASSIGNMENT}.ipynb", moved=True)
            parts = parts_of(own_copy)
            summary = validate_summary(s, dialog)
            s.shot(f"05a-{student}-validated-unanswered")
            assert summary == f"{len(parts)} of {len(parts)} parts need work: {', '.join(parts)}", summary
            message = dialog.locator("#validation-message")
            assert message.locator(".rbtutor-part").count() == 0, message.inner_text()  # no block: nothing answered
            unanswered = message.locator(".rbtutor-unanswered").inner_text()
            assert unanswered.startswith("Not answered yet: (a) written answer; (b) K;"), unanswered
            assert "This cell needs fixing" not in message.inner_text(), message.inner_text()
            assert "Traceback" not in message.inner_text(), message.inner_text()
            close_dialog(dialog)
            partly_answered(s, fetched, dialog, parts)

        path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
        got = s.api("GET", f"api/contents/{path}")
        assert got.status == 200, got.text()
        notebook = answered(got.json()["content"], sign_error)
        if sign_error:  # a cell that asks the check service: Validate must not spend a check
            notebook["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                      "source": "check('p3.b.K', K)"})
        put = s.api("PUT", f"api/contents/{path}", {"type": "notebook", "format": "json", "content": notebook})
        assert put.status in (200, 201), put.text()

        checks_before = attempts_logged()
        fetched.locator("button:text-is('Validate')").first.click()
        dialog.wait_for(timeout=180_000)
        wait_shown(s, "validate", f"Validating {ASSIGNMENT}.ipynb")
        message = dialog.locator("#validation-message")
        text = validate_summary(s, dialog)
        s.shot(f"05-{student}-validated")
        assert attempts_logged() == checks_before, \
            f"Validate of {student}'s notebook spent checks: {checks_before} attempts logged before, " \
            f"{attempts_logged()} after"
        # a sign error passes the form checks: the dialog must not call the notebook right; all in one line
        assert message.locator("p").count() == 1, message.inner_html()
        assert message.inner_text() == text, message.inner_text()
        assert text.startswith(f"Form checks passed: all {len(parts_of(notebook))} parts answered"), text
        assert "graded after you submit" in text, text
        assert "passes all the tests" not in text, text
        close_dialog(dialog)
        submit_confirmed(s, fetched, student, len(parts_of(notebook)))
        s.page.locator("#submitted_assignments_list").locator(f"text={ASSIGNMENT}").first.wait_for()
        # the list is redrawn once the submission is in: its button reads Submit again, not "submitting..."
        s.waited("the Submit button back after submitting",
                 partial(fetched.locator("button:text-is('Submit')").first.wait_for, timeout=120_000))
        s.shot(f"06-{student}-submitted")

    # --- each student fetched their own numbers, neither the released (instructor's) ones
    released = json.loads((COURSE / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    data_cells["reference"] = data_cell(released)
    assert len(set(data_cells.values())) == 3, data_cells

    # --- student3 computes with student1's numbers (a cell after their own data cell sets them)
    copier = sessions["student3"] = Session(browser, "student3", passwords["student3"])
    copier.open_assignment_list()
    copier.page.locator("#released_assignments_list").locator("button:text-is('Fetch')").click()
    copier.page.locator("#fetched_assignments_list").locator(f"text={ASSIGNMENT}").first.wait_for()
    path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    notebook = answered(copier.api("GET", f"api/contents/{path}").json()["content"], False)
    at = next(k for k, c in enumerate(notebook["cells"]) if _is_data(c)) + 1
    borrowed = "\n".join(data_cells["student1"].splitlines()[2:])  # below the cell's two header lines
    notebook["cells"].insert(at, {"cell_type": "code", "metadata": {}, "source": borrowed, "outputs": [],
                                  "execution_count": None})
    put = copier.api("PUT", f"api/contents/{path}", {"type": "notebook", "format": "json", "content": notebook})
    assert put.status in (200, 201), put.text()
    copier.page.locator("#fetched_assignments_list").locator("button:text-is('Submit')").first.click()
    copier.page.locator("#rbtutor-submit-confirm button:has-text('Submit')").click()  # it asks first
    copier.page.locator("#submitted_assignments_list").locator(f"text={ASSIGNMENT}").first.wait_for()
    copier.shot("06a-student3-submitted-with-student1-numbers")

    # --- student2 checks the wrong K in a kernel of their server: the diagnosis, no value
    checks_before = attempts_logged()
    checked = check_in_kernel(sessions["student2"])
    assert attempts_logged() == checks_before + 1, "a check from a kernel is one attempt in the log"
    sessions["student2"].shot("06b-student2-checked")
    assert "p3.b.K: not right yet: the sign is wrong" in checked, checked
    # it says that it asks before the answer comes
    assert 0 <= checked.find("p3.b.K: checking with the course hub") < checked.find("p3.b.K: not right yet"), checked
    for pattern in key_values("student2"):
        assert not re.search(pattern, checked), f"a key value ({pattern}) is in the check's reply"

    # --- students are kept apart by the file system
    denied = subprocess.run(["runuser", "-u", "student1", "--", "cat",
                             str(hubctl.home("student2") / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")],
                            capture_output=True, text=True)
    assert denied.returncode != 0
    assert "Permission denied" in denied.stderr
    inbound = hubctl.EXCHANGE / hubctl.COURSE_ID / "inbound"
    listing = subprocess.run(["runuser", "-u", "student1", "--", "ls", str(inbound)], capture_output=True, text=True)
    assert listing.returncode != 0, f"student1 can list the inbound folder: {listing.stdout}"

    # --- instructor: collect, grade
    collected = as_instructor("python", "-m", "rbtutor.course", "collect", ASSIGNMENT)
    assert "collected problem03 from 3 student(s)" in collected.stdout, collected.stdout
    grading_said(as_instructor("python", "-m", "rbtutor.course", "grade").stdout, 3)
    if hubctl.gradebook_url():  # graded into PostgreSQL, nothing into a SQLite file
        assert not (COURSE / "gradebook.db").exists()
    scores = read_grades()
    own_due_dates_after_grading()
    assert scores["student1"] == ("6", "13"), scores  # each judged against their own key
    assert scores["student2"] == ("2", "13"), scores
    assert scores["student3"] == ("0", "13"), scores  # right for student1's ship, wrong for their own
    report = json.loads((COURSE / "integrity_report.json").read_text())
    named = {e["kind"] for r in report if r["student"] == "student3" for e in r["events"]}
    assert "fits_other_student" in named, report
    assert not [r for r in report if r["student"] in ("student1", "student2") and r["events"]], report

    # --- instructor: a written part in the Formgrader
    teacher = sessions["instructor"] = Session(browser, "instructor", passwords["instructor"])
    teacher.page.click("text=Nbgrader")
    menu = teacher.page.locator(".lm-Menu-content").inner_text()
    assert "Formgrader" in menu, menu
    teacher.page.keyboard.press("Escape")
    released_in_formgrader(teacher)
    # the check statistics: the instructor sees student2's attempt, a student is refused
    teacher.page.goto(f"{hubctl.URL}/services/rbtutor-check/stats")
    teacher.page.wait_for_selector("table")
    stats = teacher.page.locator("table").inner_text()
    teacher.shot("06c-instructor-check-stats")
    assert "p3.b.K" in stats, stats
    assert "sign: 1" in stats, stats
    refused = sessions["student1"].page.request.get(f"{hubctl.URL}/services/rbtutor-check/stats")
    assert refused.status == 403, refused.status
    page = teacher.page
    page.goto(f"{teacher.base}/formgrader/gradebook/{ASSIGNMENT}/{ASSIGNMENT}")
    link = page.locator("a:text-is('student1')").first
    link.wait_for(state="attached")
    teacher.shot("07-instructor-formgrader-submissions")
    elsewhere = []  # the Formgrader page asks nothing of another host (it used to load MathJax from a CDN)
    page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith(hubctl.URL) else None)
    page.goto(hubctl.URL + link.get_attribute("href"))
    page.wait_for_selector("input.score")
    # MathJax from the instructor's own server, started, and formgrade.js told so (it sets MathJax.loaded)
    teacher.waited("MathJax started on the Formgrader page",
                   lambda: page.wait_for_function("() => window.MathJax && MathJax.loaded === true"))
    assert page.evaluate("() => MathJax.version").startswith("3."), page.evaluate("() => MathJax.version")
    assert not elsewhere, f"the Formgrader page asked other hosts: {elsewhere}"
    submission_opens_on_the_work(teacher)
    # the model answer and rubric in view, below the written answer being graded
    notes = page.locator("div.rbtutor-grader-note")
    due_note = notes.nth(0).inner_text()  # atop the notebook: student1's own due date, with the extension
    assert "due for this student 2030-03-04 12:00 UTC, an extension of 3 days on the class's" in due_note, due_note
    note = notes.nth(1)
    assert "For the grader, p3_a_derivation" in note.inner_text()
    assert "Rubric" in note.inner_text()
    # the inputs are in the page before the Formgrader's script has fetched the grades and bound
    # its save handlers to them: a score typed earlier would never be saved
    page.wait_for_function("() => window.formgrader && formgrader.grades && formgrader.grades.loaded")
    score = page.locator("input.score#p3_a_derivation")
    with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT") as saved:
        score.fill("2")
        score.press("Tab")  # the Formgrader saves on change
    assert saved.value.ok, saved.value.text()
    assert saved.value.json()["manual_score"] == 2, saved.value.text()
    teacher.shot("08-instructor-hand-grade")

    # --- instructor: re-grade keeps the hand grade; feedback back to the students
    as_instructor("python", "-m", "rbtutor.course", "grade")
    assert read_grades()["student1"] == ("8", "13"), "the hand grade must survive a re-grade"
    returned = as_instructor("python", "-m", "rbtutor.course", "return-feedback")
    assert "feedback returned to 3 students" in returned.stdout, returned.stdout

    # --- instructor: the grades for the LMS, and the class report in the instructor's browser
    export_for_canvas()
    class_report_in_browser(teacher)

    # --- students: fetch the feedback and read it
    key = key_values("student2")
    for student, sign_error in students.items():
        s = sessions[student]
        s.page.reload()
        s.page.wait_for_selector(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
        s.page.evaluate(_WAITS_JS)
        s.open_assignment_list()
        submitted = s.page.locator("#submitted_assignments_list")
        submitted.locator("button:text-is('Fetch Feedback')").first.click()
        s.page.locator("#submitted_assignments_list").locator("text=view feedback").first.wait_for()
        wait_shown(s, "feedback", f"Fetching the feedback on {ASSIGNMENT}")
        s.shot(f"09-{student}-feedback-fetched")
        listing = s.api("GET", f"api/contents/{ASSIGNMENT}/feedback").json()["content"]
        stamp = listing[0]["path"]
        html_path = f"{stamp}/{ASSIGNMENT}.html"
        html = s.api("GET", f"files/{html_path}").text()
        s.page.goto(f"{s.base}/lab/tree/{html_path}")
        # JupyterLab's own HTML viewer (a sandboxed frame, no scripts): the formulas are MathML
        s.page.frame_locator(".jp-HTMLViewer iframe").locator("math").first.wait_for()
        s.shot(f"10-{student}-feedback-open")
        assert "<math" in html, "feedback formulas must be MathML, no MathJax"
        assert "mathjax" not in html.lower(), "feedback formulas must be MathML, no MathJax"
        if sign_error:
            for pattern in key:
                assert not re.search(pattern, html), f"a key value ({pattern}) is in student2's feedback"

    # --- student1, hostile, with their own terminal and server: no key, no salt, no classmate's numbers
    secrets_out_of_reach(sessions["student1"], data_cells)
    for s in sessions.values():
        s.close()


def grading_said(out: str, count: int) -> None:
    """``rbtutor grade`` says what it starts before the first notebook is done, one line per submission
    with the count and the time left, and what it writes at the end."""
    lines = out.splitlines()
    start = next((k for k, line in enumerate(lines) if line.startswith("grading ")), None)
    assert start is not None, out
    assert re.fullmatch(rf"grading {count} submissions with \d+ workers?: one line each as it is done, with the "
                        "time left at the pace so far", lines[start]), out
    assert "working out the keys of" in out, out  # the hub's course gives each student their own numbers
    done = [line for line in lines[start:] if re.match(rf"\[\d+/{count}\] ", line)]
    assert [line.split(" ")[0] for line in done] == [f"[{k}/{count}]" for k in range(1, count + 1)], out
    assert all(re.search(r"about [^)]+ left\)$", line) for line in done[:-1]), out
    writing = lines.index("writing grades.csv, the integrity report and the class report...")
    assert writing > lines.index(done[-1]), out


def released_in_formgrader(teacher: Session) -> None:
    """The Formgrader's list of assignments shows problem03 as released (rbtutor release put it there)."""
    page = teacher.page
    page.goto(f"{teacher.base}/formgrader/")
    row = page.locator("tbody tr").filter(has_text=ASSIGNMENT).first
    teacher.waited("problem03 in the Formgrader's assignments", partial(row.wait_for))
    teacher.shot("06e-instructor-released")
    cells = row.locator("td").all_inner_texts()
    assert [cell.strip() for cell in cells[:3]] == [ASSIGNMENT, "2030-03-01 12:00:00 UTC", "released"], cells


def submission_opens_on_the_work(teacher: Session) -> None:
    """A submission in the Formgrader opens on the student's work: the locked helper cell is one line."""
    page = teacher.page
    page.evaluate("() => window.scrollTo(0, 0)")
    helper = page.locator("text=/The course's locked helper cell \\(\\d+ lines/").first
    teacher.waited("the one line of the helper cell", partial(helper.wait_for))
    teacher.shot("07a-instructor-submission")
    box = helper.bounding_box()
    assert box is not None, "the helper cell's line is not laid out"
    assert box["height"] < 40, box  # one line
    assert box["y"] < 900, box  # on the first screen


def close_dialog(dialog) -> None:
    dialog.locator("button").last.click()
    dialog.wait_for(state="detached")


def due_in_list(s: Session, released, student: str) -> None:
    """The Assignment List gives the student's own due date (with the extension) and the time left."""
    cell = released.locator(".list_item .rbtutor-due").first
    s.waited("the due date in the Assignment List", lambda: cell.wait_for())
    s.waited("the due date read from the fetch service", lambda: s.page.wait_for_function(
        "() => /^Due |not available/.test(document.querySelector('#released_assignments_list .rbtutor-due')"
        ".innerText)"))
    text = cell.inner_text()
    if student == "student1":
        s.shot("03a-student1-due-dates")
    assert text.startswith(f"Due {OWN_DUE_SHOWN[student]}"), text
    assert ("(your extension)" in text) == (student == "student1"), text
    # the time left as the page says it, against the due-dates file (the hub's clock is this machine's)
    import datetime as dt

    from rbtutor.course.late import own_due_date

    due, _ = own_due_date(hubctl.DUE_DATES, ASSIGNMENT, student)
    left = re.search(r"; (\d+) days (\d+) h left$", text)
    assert left, text
    shown = dt.timedelta(days=int(left.group(1)), hours=int(left.group(2)))
    actual = due - dt.datetime.now(dt.UTC)
    assert dt.timedelta(0) <= actual - shown < dt.timedelta(hours=1, minutes=5), (text, actual)


def validate_summary(s: Session, dialog) -> str:
    """The summary line of the Validate dialog, once the extension has rewritten it."""
    summary = dialog.locator("#validation-message p.rbtutor-summary")
    s.waited("the Validate summary", lambda: summary.wait_for())
    return summary.inner_text()


def partly_answered(s: Session, fetched, dialog, parts: dict[str, list[str]]) -> None:
    """Validate of a partly answered notebook: the summary names the parts that need work, one block for
    the part whose answer has the wrong form (its reason wrapped, not cut off), the unanswered in one line."""
    path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
    notebook = with_answers(s.api("GET", f"api/contents/{path}").json()["content"], PARTLY_ANSWERED)
    put = s.api("PUT", f"api/contents/{path}", {"type": "notebook", "format": "json", "content": notebook})
    assert put.status in (200, 201), put.text()
    checks_before = attempts_logged()
    fetched.locator("button:text-is('Validate')").first.click()
    dialog.wait_for(timeout=180_000)
    wait_shown(s, "validate", f"Validating {ASSIGNMENT}.ipynb")
    summary = validate_summary(s, dialog)
    s.shot("05b-student1-validate-summary")
    assert attempts_logged() == checks_before, "Validate spent checks"
    needing = [part for part, ids in parts.items() if not set(ids) <= PARTLY_RIGHT]
    assert summary == f"{len(needing)} of {len(parts)} parts need work: {', '.join(needing)}", summary
    message = dialog.locator("#validation-message")
    blocks = message.locator(".rbtutor-part")
    assert blocks.locator("h3").all_inner_texts() == ["(b) The roll moment"], message.inner_text()
    assert "assign it to K" in blocks.locator(".rbtutor-question").inner_text()  # the question, from the notebook
    reason = blocks.locator(".rbtutor-reason")
    assert reason.inner_text().startswith("K: should have shape (), got (3,)"), reason.inner_text()
    wrapped = reason.evaluate("e => [getComputedStyle(e).whiteSpace, e.scrollWidth <= e.clientWidth]")
    assert wrapped == ["pre-wrap", True], wrapped
    unanswered = message.locator(".rbtutor-unanswered").inner_text()
    assert "(d) K_raised, phi_raised_deg, written answer; (e) written answer." in unanswered, unanswered
    assert message.inner_text().count("Run the answer cell") == 0, message.inner_text()  # no hint repeated
    close_dialog(dialog)


def inbound_entries(student: str) -> list[str]:
    inbound = hubctl.EXCHANGE / hubctl.COURSE_ID / "inbound"
    return sorted(p.name for p in inbound.iterdir() if p.name.startswith(f"{student}+{ASSIGNMENT}+")) \
        if inbound.is_dir() else []


def submit_confirmed(s: Session, fetched, student: str, parts: int) -> None:
    """Submit asks first: the own due date, the time left (student2: also how a late one is charged,
    with the due date moved into the past for a moment), the last Validate. Cancel sends nothing."""
    import datetime as dt

    from rbtutor.course.fetch_service import course_late_share

    confirm = s.page.locator("#rbtutor-submit-confirm")
    before = inbound_entries(student)
    fetched.locator("button:text-is('Submit')").first.click()
    confirm.wait_for()
    s.waited("the due date in the Submit dialog", lambda: s.page.wait_for_function(
        "() => /^Your due date/.test(document.querySelector('#rbtutor-submit-confirm .rbtutor-due-line').innerText)"))
    s.waited("the last Validate in the Submit dialog", lambda: s.page.wait_for_function(
        "() => /^Last Validate/.test(document.querySelector('#rbtutor-submit-confirm .rbtutor-validate-line')"
        ".innerText)"))
    due_line = confirm.locator(".rbtutor-due-line").inner_text()
    if student == "student1":
        s.shot("06d-student1-submit-confirm")
        assert due_line == (f"Your due date: {OWN_DUE_SHOWN['student1']}, your extension "
                            f"(the class's: {OWN_DUE_SHOWN['student2']})."), due_line
    else:
        assert due_line == f"Your due date: {OWN_DUE_SHOWN['student2']}.", due_line
    assert confirm.locator(".rbtutor-time-left").inner_text().startswith("Time left: "), confirm.inner_text()
    validated = confirm.locator(".rbtutor-validate-line").inner_text()
    assert re.fullmatch(rf"Last Validate: {ASSIGNMENT}\.ipynb, validated at \d\d:\d\d: form checks passed, "
                        rf"all {parts} parts answered\.", validated), validated
    confirm.locator("button:has-text('Cancel')").click()
    confirm.wait_for(state="detached")
    if student == "student2":  # the due date moved 26 hours into the past: the dialog says what that costs
        saved = hubctl.DUE_DATES.read_text()
        past = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=26)).replace(microsecond=0)
        hubctl.DUE_DATES.write_text(f"{ASSIGNMENT}: {past.isoformat()}\n")
        try:
            fetched.locator("button:text-is('Submit')").first.click()
            late = confirm.locator(".rbtutor-time-left.rbtutor-late")
            s.waited("the late warning of the Submit dialog", lambda: late.wait_for())
            share = course_late_share(COURSE)[0]
            expected = (f"that is 2 started days, so {min(100.0, 2 * share):.0f} % of each notebook's score is "
                        f"taken off (the course's late policy: {share:g} % for every day")
            assert late.inner_text().startswith("Submitting now is late by 1 day 2 h"), late.inner_text()
            assert expected in late.inner_text(), late.inner_text()
            confirm.locator("button:has-text('Cancel')").click()
            confirm.wait_for(state="detached")
        finally:
            hubctl.DUE_DATES.write_text(saved)
    s.page.wait_for_timeout(2_000)  # a submission sent anyway would be in the inbound by now
    assert inbound_entries(student) == before, "Cancel in the Submit dialog submitted the assignment"
    fetched.locator("button:text-is('Submit')").first.click()
    confirm.wait_for()
    confirm.locator("button:has-text('Submit')").click()
    started = time.monotonic()  # confirmed: now it is in the exchange (so the folder looked at above is the one)
    while len(inbound_entries(student)) == len(before) and time.monotonic() - started < 120:
        time.sleep(0.5)
    assert len(inbound_entries(student)) == len(before) + 1, (before, inbound_entries(student))
    wait_shown(s, "submit", f"Submitting {ASSIGNMENT}")


_EXECUTE_JS = """async ([base, kernel, code]) => await new Promise((resolve, reject) => {
  const ws = new WebSocket(base.replace(/^http/, "ws") + "/api/kernels/" + kernel + "/channels");
  const id = "h11-" + Math.random().toString(16).slice(2);
  let out = "";
  ws.onopen = () => ws.send(JSON.stringify({channel: "shell", parent_header: {}, metadata: {},
    header: {msg_id: id, session: id, username: "", msg_type: "execute_request", version: "5.3",
             date: new Date().toISOString()},
    content: {code: code, silent: false, store_history: false, user_expressions: {}, allow_stdin: false,
              stop_on_error: true}}));
  ws.onmessage = (event) => {
    const m = JSON.parse(event.data);
    if (!m.parent_header || m.parent_header.msg_id !== id) return;
    if (m.msg_type === "stream") out += m.content.text;
    if (m.msg_type === "error") out += m.content.ename + ": " + m.content.evalue;
    if (m.msg_type === "status" && m.content.execution_state === "idle") { ws.close(); resolve(out); }
  };
  ws.onerror = () => reject(new Error("websocket error: " + out));
  setTimeout(() => reject(new Error("no reply within 120 s: " + out)), 120000);
})"""


def check_in_kernel(session: Session) -> str:
    """Run the fetched notebook's data and helper cells and check(K with the wrong sign) in a
    kernel of the student's own server (started through its REST API, code sent over its websocket from
    the browser page), as a cell of the notebook would; return what the kernel printed."""
    notebook = session.api("GET", f"api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb").json()["content"]
    locked = {c["metadata"]["nbgrader"]["grade_id"]: c["source"] for c in notebook["cells"]
              if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") in ("course_helpers", "problem_data")}
    assert set(locked) == {"course_helpers", "problem_data"}, sorted(locked)
    code = "\n".join([locked["course_helpers"], locked["problem_data"],
                      "check('p3.b.K', m * r_G[2] * nu_turn[0] * nu_turn[5])"])
    kernel = session.api("POST", "api/kernels", {"name": "python3"})
    assert kernel.status in (200, 201), kernel.text()
    kernel_id = kernel.json()["id"]
    try:
        return session.page.evaluate(_EXECUTE_JS, [session.base, kernel_id, code])
    finally:
        session.api("DELETE", f"api/kernels/{kernel_id}")


def attempts_logged() -> int:
    """How many check attempts the check service has logged (its attempt log in the course folder)."""
    from rbtutor.course.checks import LOG_FILE

    log = COURSE / LOG_FILE
    return len(log.read_text().splitlines()) if log.exists() else 0


_TERMINAL_JS = r"""async ([base, name, command, marker]) => await new Promise((resolve, reject) => {
  const ws = new WebSocket(base.replace(/^http/, "ws") + "/terminals/websocket/" + name);
  const done = new RegExp(marker + "-(\\d+)-end");
  let out = "";
  ws.onopen = () => ws.send(JSON.stringify(["stdin", command + "; echo " + marker + "-$?-end\r"]));
  ws.onmessage = (event) => {
    const m = JSON.parse(event.data);
    if (m[0] !== "stdout") return;
    out += m[1];
    if (done.test(out)) { ws.close(); resolve(out); }
  };
  ws.onerror = () => reject(new Error("terminal websocket error: " + out));
  setTimeout(() => reject(new Error("no end marker within 90 s: " + out)), 90000);
})"""


def in_terminal(session: Session, name: str, command: str) -> tuple[int, str]:
    """Type ``command`` into the user's JupyterLab terminal ``name``; return its exit status and the output."""
    marker = f"rbtutor{time.monotonic_ns()}"
    out = session.page.evaluate(_TERMINAL_JS, [session.base, name, command, marker])
    status = int(re.search(marker + r"-(\d+)-end", out).group(1))
    return status, out


def server_environment(user: str) -> dict[str, str]:
    """The environment of ``user``'s single-user server process (what their terminals and kernels inherit)."""
    import pwd

    uid = pwd.getpwnam(user).pw_uid
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or proc.stat().st_uid != uid:
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if any(arg.endswith(b"/jupyterhub-singleuser") for arg in argv):
                raw = (proc / "environ").read_bytes().decode()
                env = dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)
                if "JUPYTERHUB_SERVICE_NAME" not in env:  # not the shared Formgrader, run as the course's account
                    return env
        except OSError:  # the process ended while we looked
            continue
    raise AssertionError(f"no jupyterhub-singleuser process of {user} is running")


def as_student(user: str, command: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run ``command`` as ``user`` in a login shell with their server's environment, as their terminal does."""
    env = server_environment(user)
    return subprocess.run(["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                           "bash", "-lc", command], input=stdin, capture_output=True, text=True, timeout=600,
                          cwd="/")


_ASK_FETCH_SERVICE = """
import json, os, urllib.error, urllib.request
url = os.environ["RBTUTOR_FETCH_URL"] + "api/personalise"
def ask(body, token=True):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "token " + os.environ["JUPYTERHUB_API_TOKEN"]
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
def due_dates(query):
    request = urllib.request.Request(os.environ["RBTUTOR_FETCH_URL"] + "api/due-dates" + query,
                                     headers={"Authorization": "token " + os.environ["JUPYTERHUB_API_TOKEN"]})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, json.loads(response.read())
released = {"assignment": "problem03", "notebook": "problem03.ipynb"}
print(json.dumps({"own": ask(released), "named": ask({**released, "student": "student2"}),
                  "due_dates": due_dates("?student=student2&user=student2"),
                  "anonymous": ask(released, token=False),
                  "escape": ask({"assignment": "..", "notebook": "outbound/problem03/problem03.ipynb"})}))
"""


def secrets_out_of_reach(session: Session, data_cells: dict[str, str]) -> None:
    """student1 (``session``) can neither read nor compute a key, the salt or student2's numbers on the hub."""
    import yaml

    # JupyterLab's own terminal: python is the server environment's, and it has no rbtutor
    made = session.api("POST", "api/terminals")
    assert made.status == 200, made.text()
    name = made.json()["name"]
    try:
        status, out = in_terminal(session, name, "command -v python")
        assert status == 0, out
        assert f"{hubctl.STUDENT_VENV}/bin/python" in out, out
        attack = "--student student2 --data /srv/rbtutor/problem_data.yaml"
        for command, reason in [
            (f"python -m rbtutor key {attack}", "No module named rbtutor"),
            (f"{hubctl.KERNEL_VENV}/bin/python -m rbtutor key {attack}", "No module named rbtutor"),
            # the course environment runs, but its rbtutor cannot be read (a folder without entries)
            (f"{hubctl.VENV}/bin/python -m rbtutor key {attack}", "No module named rbtutor|Permission denied"),
            (f"cat {hubctl.COURSE_DATA}", "Permission denied"),
        ]:
            status, out = in_terminal(session, name, command)
            assert status != 0, f"{command}: exit {status}, expected {reason!r}:\n{out[-1500:]}"
            assert re.search(reason, out), f"{command}: exit {status}, expected {reason!r}:\n{out[-1500:]}"
    finally:
        session.api("DELETE", f"api/terminals/{name}")

    # the personalising service answers for the token's owner only
    asked = as_student("student1", "python -", stdin=_ASK_FETCH_SERVICE)
    assert asked.returncode == 0, asked.stderr
    replies = json.loads(asked.stdout)
    assert replies["own"][0] == 200, replies
    assert data_cell(replies["own"][1]["notebook"]) == data_cells["student1"], replies
    assert replies["named"][0] == 400, replies["named"]
    assert "unknown: ['student']" in replies["named"][1]["error"], replies["named"]
    assert replies["anonymous"][0] == 401, replies["anonymous"]
    assert replies["escape"][0] == 400, replies["escape"]
    status, due = replies["due_dates"]  # the token's owner's due dates, whatever the request names
    assert status == 200, replies["due_dates"]
    assert due["student"] == "student1", due
    assert due["assignments"][ASSIGNMENT] == {"due": "2030-03-04T12:00:00+00:00",
                                              "class_due": "2030-03-01T12:00:00+00:00", "extended": True}, due

    # no file student1 can read holds the salt, student2's own data lines or student2's key values
    salt = str(yaml.safe_load(hubctl.COURSE_DATA.read_text())["variants"]["salt"])
    others = set(data_cells["student1"].splitlines()) | set(data_cells["reference"].splitlines())
    theirs = [line for line in data_cells["student2"].splitlines() if line.strip() and line not in others
              and not line.lstrip().startswith("#")]
    assert theirs, data_cells["student2"]
    def floats_of_key(student: str) -> set[str]:
        key = json.loads(subprocess.run([sys.executable, "-m", "rbtutor", "key", "--problem", "3", "--format", "json",
                                         "--data", str(hubctl.COURSE_DATA), "--student", student],
                                        capture_output=True, text=True, check=True, cwd=ROOT).stdout)
        return {repr(entry["value"]) for entry in key.values() if isinstance(entry["value"], float)}

    # student2's key values that are not also student1's or the reference ship's (which others may print)
    their_key = floats_of_key("student2") - floats_of_key("student1") - floats_of_key("reference")
    assert their_key, "student2's key has no value of its own"
    # a file every user can read, so that a search that finds nothing is seen to have searched
    import secrets as random_tokens
    import tempfile

    control = f"rbtutor-control-{random_tokens.token_hex(8)}"
    with tempfile.NamedTemporaryFile("w", prefix="rbtutor-hub-control-", suffix=".txt", dir="/tmp") as handle:
        handle.write(control + "\n")
        handle.flush()
        os.chmod(handle.name, 0o644)
        started = time.monotonic()
        found = as_student("student1", "grep -rlsIF -f - /srv /opt /etc /home /var /tmp /run /root /usr/local",
                           stdin="\n".join([control, salt, *theirs, *their_key]) + "\n")
        hits = found.stdout.split()
        assert handle.name in hits, f"the search did not run (grep exit {found.returncode}): {found.stderr[-500:]}"
        reasons = {path: leaked(path, salt, theirs, their_key) for path in hits if path != handle.name}
        leaks = [f"{path}: {why}" for path, why in reasons.items() if why]
    assert not leaks, "student1 can read files holding the salt, student2's key or numbers:\n" + "\n".join(leaks)
    print(f"searched what student1 can read in {time.monotonic() - started:.0f} s; {len(hits) - 1} file(s) share "
          f"single rounded numbers with student2's data, none more", flush=True)


def leaked(path: str, salt: str, lines: list[str], key: set[str]) -> str | None:
    """Why the file ``path`` gives student2's secrets away, or None.

    The salt or one of student2's own key values (17 significant digits) is a leak by itself.
    A rounded data value (``I_xz_G = 24000000.0``) may also be another course's, so a file gives
    student2's numbers away when it holds two or more of their data lines.
    """
    text = Path(path).read_text(errors="replace")
    if salt in text:
        return "the salt"
    if any(value in text for value in key):
        return "a key value of student2"
    shared = [line for line in lines if line in text]
    return f"student2's data lines {shared}" if len(shared) >= 2 else None


ROSTER = COURSE / "roster.csv"
CANVAS_FILE = COURSE / "grades-canvas.csv"


def export_for_canvas() -> None:
    """``python -m rbtutor.course export --to canvas`` as the instructor: each student's cell is the
    final score of grades.csv, or empty while written parts are still to grade."""
    students = sorted(read_grades())
    ROSTER.write_text("student_id,name,email,lms_id,sis_user_id,sis_login_id,section\n"
                      + "".join(f"{s},{s.title()} Hub,{s}@uni.test,{k},S{k},{s},A\n"
                                for k, s in enumerate(students, 1)))
    owner = hubctl.home("instructor").stat()
    os.chown(ROSTER, owner.st_uid, owner.st_gid)
    exported = as_instructor("python", "-m", "rbtutor.course", "export", "--to", "canvas", "--roster",
                             str(ROSTER), "--out", str(CANVAS_FILE))
    assert f"wrote {CANVAS_FILE} for canvas: {len(students)} students" in exported.stdout, exported.stdout
    assert CANVAS_FILE.stat().st_uid == owner.st_uid, "the file is the instructor's"
    with CANVAS_FILE.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert ASSIGNMENT in rows[0]
    assert rows[1][0] == "Points Possible"
    cells = {row[3]: row[rows[0].index(ASSIGNMENT)] for row in rows[2:]}
    with (COURSE / "grades.csv").open() as handle:
        expected = {r["student"]: "" if r["written_parts"] != "done" else f"{float(r['final_score']):g}"
                    for r in csv.DictReader(handle) if r["assignment"] == ASSIGNMENT}
    assert cells == expected, (cells, expected)


def class_report_in_browser(teacher) -> None:
    """The class report ``grade`` wrote, opened from the instructor's server: the assignment, its
    figures with their alt text, and nothing in the console."""
    report = COURSE / "report" / "index.html"
    assert report.is_file(), "make grade did not write the class report"
    page = teacher.context.new_page()
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    elsewhere = []
    page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith((hubctl.URL, "data:")) else None)
    url = f"{teacher.base}/files/{COURSE.relative_to(hubctl.home('instructor'))}/report/index.html"
    response = page.goto(url)
    assert response is not None, f"{url}: {response and response.status}"
    assert response.ok, f"{url}: {response and response.status}"
    page.wait_for_selector(f"h2:text-is('{ASSIGNMENT}')")
    images = page.evaluate("() => [...document.images].map(i => ({alt: i.alt, width: i.naturalWidth}))")
    teacher.shot("11-instructor-class-report", page=page, full_page=True)
    teacher.shot("11a-instructor-class-report-top", page=page)  # what the report opens on
    assert len(images) == 2, images
    assert all(i["width"] > 100 for i in images), images
    alts = [i["alt"] for i in images]
    graded = len(read_grades())
    assert alts[0].startswith(f"Histogram of final scores for {ASSIGNMENT}: {graded} students graded"), alts
    assert alts[1].startswith(f"Bar chart of the pass rate of each part of {ASSIGNMENT}"), alts
    assert "fits_other_student" in page.inner_text("body"), "the integrity flag of student3 is not in the report"
    assert not problems, problems
    assert not elsewhere, f"the class report asked other hosts: {elsewhere}"
    page.close()


def own_due_dates_after_grading() -> None:
    """grades.csv and the notebook the Formgrader shows (its grader's note) give each student's own due date."""
    with (COURSE / "grades.csv").open() as handle:
        due = {row["student"]: row["due"] for row in csv.DictReader(handle) if row["assignment"] == ASSIGNMENT}
    assert due["student1"] == "2030-03-04 12:00:00 UTC", due
    assert due["student2"] == "2030-03-01 12:00:00 UTC", due
    for student, when in (("student1", "2030-03-04 12:00 UTC"), ("student2", "2030-03-01 12:00 UTC")):
        notebook = json.loads((COURSE / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
        note = "".join(notebook["cells"][0]["source"])
        assert f"due for this student {when}" in note, note
        assert ("an extension of 3 days" in note) == (student == "student1"), note
        assert "on time" in note, note


def read_grades() -> dict[str, tuple[str, str]]:
    with (COURSE / "grades.csv").open() as handle:
        return {row["student"]: (row["score"], row["max_score"]) for row in csv.DictReader(handle)
                if row["assignment"] == ASSIGNMENT}


def _is_data(cell: dict) -> bool:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "problem_data"


def data_cell(notebook: dict) -> str:
    """The source of a notebook's locked data cell."""
    sources = [c["source"] for c in notebook["cells"] if _is_data(c)]
    assert len(sources) == 1, f"{len(sources)} data cells"
    return "".join(sources[0])


def key_values(student: str) -> list[str]:
    """Regular expressions for ``student``'s key values of the parts student2 got wrong (their own variant
    of the hub's course data), as a page could print them.

    A positive value must not be preceded by a minus sign: student2's own (negated) answer may be shown.
    """
    out = subprocess.run([sys.executable, "-m", "rbtutor", "key", "--problem", "3", "--format", "json",
                          "--data", str(hubctl.COURSE_DATA), "--student", student],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    key = json.loads(out)
    patterns = set()
    for name in ("p3.b.K", "p3.c.phi_rad", "p3.c.phi_deg"):
        value = key[name]["value"]
        for text in {f"{value:.3g}", f"{value:.4g}", f"{value:.5g}", f"{value:.6g}", f"{value:.6e}", repr(value),
                     f"{value:.0f}" if abs(value) > 1000 else repr(value)}:
            patterns.add(("" if value < 0 else r"(?<![-\d.])") + re.escape(text) + r"(?!\d)")
    return sorted(patterns)


# --- the book's notebooks on the hub (hub up --student-book; book/manual/operator/hub.md)
#: pages run in the test: one of the Euler-parameter chapter, and the two course pages that read the
#: grader's verdicts (the notes) and the book's own sources (the plan's reading times)
BOOK_PAGES = ("book/euler/index", "book/course/notes", "book/course/plan")


def built_book_sources(target: Path) -> Path:
    """``target`` laid out as the built book's ``_sources`` for :data:`BOOK_PAGES`: every page's MyST
    text and those pages as notebooks (myst-nb's own reader, as the book's build makes them)."""
    import nbformat
    from myst_nb.core.read import read_myst_markdown_notebook

    for page in (ROOT / "book").rglob("*.md"):
        copy = target / page.relative_to(ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    for page in BOOK_PAGES:
        notebook = read_myst_markdown_notebook((ROOT / f"{page}.md").read_text(encoding="utf-8"))
        nbformat.write(notebook, target / f"{page}.ipynb")
    return target


def restart_server(s: Session, while_stopped=None) -> None:
    """Stop the user's server from the hub's home page and start it again, as a user would; while it
    is stopped, ``while_stopped(user)`` runs (default: remove their copy of the book)."""
    # The home page binds its buttons once RequireJS has loaded its modules, after the page's load
    # event: a click before that does nothing (ci49, 2026-12-07: no stop request reached the hub, and
    # the test waited 60 s for a Start button). So wait for the network to go quiet, and see the stop
    # request go out with the click.
    s.page.goto(f"{hubctl.URL}/hub/home", wait_until="networkidle")
    if s.page.locator("#stop").is_visible():
        stop = f"/hub/api/users/{s.user}/server"  # (the hub's script adds its _xsrf token as a query)
        with s.page.expect_request(lambda r: r.method == "DELETE" and urlsplit(r.url).path == stop, timeout=30_000):
            s.page.click("#stop")
        # the home page renames its server button once the hub has stopped the server
        s.waited("Start My Server after Stop", lambda: s.page.wait_for_selector("#start:has-text('Start My Server')"))
    deadline = time.monotonic() + 60
    while server_running(s.user):  # the hub answers before the server has ended
        assert time.monotonic() < deadline, f"{s.user}'s server still runs 60 s after Stop\n{hub_log_tail()}"
        s.page.wait_for_timeout(200)
    (while_stopped or forget_book_copy)(s.user)
    s.page.goto(f"{hubctl.URL}/hub/spawn/{s.user}")
    s.wait_for_server(after_stop=True)


def server_running(user: str) -> bool:
    try:
        server_environment(user)
    except AssertionError:
        return False
    return True


def forget_book_copy(user: str) -> None:
    copy = hubctl.home(user) / hubctl.BOOK_FOLDER
    if copy.is_symlink() or copy.is_file():
        copy.unlink()
    elif copy.exists():
        shutil.rmtree(copy)


def kernel_names(s: Session) -> set[str]:
    return set(s.api("GET", "api/kernelspecs").json()["kernelspecs"])


def run_book_page(user: str, page: str) -> subprocess.CompletedProcess:
    """Run every cell of ``page`` in the user's copy of the book, in the kernel its notebook names, with
    their server's environment (nbconvert stops at the first error)."""
    return as_student(user, f"jupyter nbconvert --to notebook --execute --stdout "
                            f"~/{hubctl.BOOK_FOLDER}/{page}.ipynb > /dev/null")


def test_the_book_runs_on_the_hub(hub, tmp_path):
    """The launch button's path on the hub: the course's account gets the book's notebooks and its
    kernel at its server's start and runs the page the button opened; students get neither, and cannot import the
    book kernel's rbtutor, until the operator lets them (hub up --student-book); then each student
    runs the pages in a copy of their own, which a name they already use is never traded for, and the
    course data stays out of their book kernel's reach."""
    import pwd

    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from launch_hub import HUB_FOLDER, launch_url

    assert HUB_FOLDER == hubctl.BOOK_FOLDER  # where the book's buttons lead is where the hub copies it
    assert hubctl.place_book(built_book_sources(tmp_path / "_sources")) == len(BOOK_PAGES)
    hubctl.share_book(False)
    # (an unreadable package folder still imports as an empty namespace package: ask for the key's module)
    import_rbtutor = f"cd / && {hubctl.READER_VENV}/bin/python -c 'import rbtutor.problems as p; print(p.__file__)'"
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            # the servers may still run from the loop (no start page to check): restart_server starts them anew
            teacher = Session(browser, "instructor", hub["instructor"], first_start=False)
            restart_server(teacher)
            copy = hubctl.home("instructor") / hubctl.BOOK_FOLDER
            assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*.ipynb")) == \
                sorted(f"{page}.ipynb" for page in BOOK_PAGES)
            assert hubctl.BOOK_KERNEL in kernel_names(teacher)
            teacher.page.goto(launch_url(hubctl.URL, BOOK_PAGES[0]))  # the book's launch button
            teacher.waited("the page's notebook in the book's kernel", lambda: teacher.page.wait_for_selector(
                ".jp-NotebookPanel-toolbar >> text=Python 3 (rbtutor book)"))
            teacher.shot("book-on-hub-instructor")
            # the page the button opened runs from the instructor's copy (all three run in the student's
            # copy below, in the same kernel)
            ran = run_book_page("instructor", BOOK_PAGES[0])
            assert ran.returncode == 0, f"{BOOK_PAGES[0]}:\n{ran.stderr[-3000:]}"

            # students, before the operator lets them: no kernel, no copy, no rbtutor
            pupil = Session(browser, "student1", hub["student1"], first_start=False)
            restart_server(pupil)
            assert hubctl.BOOK_KERNEL not in kernel_names(pupil)
            assert not os.path.lexists(hubctl.home("student1") / hubctl.BOOK_FOLDER)
            refused = as_student("student1", import_rbtutor)
            assert refused.returncode != 0, refused
            assert "No module named 'rbtutor.problems'" in refused.stderr, refused

            # hub up --student-book: at the next start, their own copy and the kernel, and every page runs
            hubctl.share_book(True)
            restart_server(pupil)
            assert hubctl.BOOK_KERNEL in kernel_names(pupil)
            own = hubctl.home("student1") / hubctl.BOOK_FOLDER / f"{BOOK_PAGES[0]}.ipynb"
            assert own.stat().st_uid == pwd.getpwnam("student1").pw_uid, own
            for page in BOOK_PAGES:
                ran = run_book_page("student1", page)
                assert ran.returncode == 0, f"{page}:\n{ran.stderr[-3000:]}"
            reached = as_student("student1", import_rbtutor + f" && cat {hubctl.COURSE_DATA}")
            assert "/reader/" in reached.stdout, reached
            assert "Permission denied" in reached.stderr, reached

            # a name the student already uses is left as it is: their link to a folder of root's stays a
            # link, and nothing is copied through it
            def plant_link(user: str) -> None:
                forget_book_copy(user)
                subprocess.run(["runuser", "-u", user, "--", "ln", "-s", "/etc/rbtutor",
                                str(hubctl.home(user) / hubctl.BOOK_FOLDER)], check=True)

            other = Session(browser, "student2", hub["student2"], first_start=False)
            restart_server(other, while_stopped=plant_link)
            link = hubctl.home("student2") / hubctl.BOOK_FOLDER
            assert link.is_symlink(), link
            assert os.readlink(link) == "/etc/rbtutor", link
            assert not (Path("/etc/rbtutor") / "book").exists()
            assert hubctl.BOOK_KERNEL in kernel_names(other)
            forget_book_copy("student2")
        except PlaywrightTimeoutError as exc:
            raise AssertionError(f"{exc}\n{hub_log_tail()}") from None
        finally:
            hubctl.share_book(False)
            browser.close()


# A student's process opening connections to one of the hub's ports: "hold" keeps those it got
# (until its stdin ends), "churn" closes each at once; it prints what it got.
_CONNECT = """
import socket, sys, time
port, count, how = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held, accepted, refused, started = [], 0, 0, time.monotonic()
for _ in range(count):
    connection = socket.socket()
    try:
        connection.connect(("127.0.0.1", port))
        accepted += 1
        held.append(connection) if how == "hold" else connection.close()
    except ConnectionRefusedError:
        refused += 1
        connection.close()
print(accepted, refused, round(time.monotonic() - started, 3), flush=True)
sys.stdin.read()
"""


def connecting(user: str, port: int, count: int, how: str) -> subprocess.Popen:
    """``_CONNECT`` run as ``user``, with the students' Python; its first line says (accepted, refused, s)."""
    return subprocess.Popen(["runuser", "-u", user, "--", str(hubctl.STUDENT_VENV / "bin" / "python"), "-c",
                             _CONNECT, str(port), str(count), how], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd="/")


def got(process: subprocess.Popen) -> tuple[int, int, float]:
    accepted, refused, seconds = process.stdout.readline().split()
    return int(accepted), int(refused), float(seconds)


@pytest.fixture
def two_accounts():
    """Two Unix accounts of people the hub does not know, removed afterwards: the limits are the
    kernel's, by account, and what these open stays out of the class's own accounts' counts."""
    names = ["rbnet1", "rbnet2"]
    for name in names:
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)
    yield names
    for name in names:
        subprocess.run(["userdel", "--remove", name], capture_output=True)


def test_one_account_s_connections_to_the_hub_are_limited(hub, two_accounts):
    """With the hub started, the kernel refuses a student account's connections to the hub's ports
    over hub/netlimits.py's bounds, at once and before any server sees them: of 100 held open, the
    first OPEN_AT_ONCE are accepted. Another account, and the instructor, connect meanwhile as
    usual. Opened and closed one after the other, an account gets at most BURST at once and
    PER_SECOND a second after that. Lifted, they are gone; ``hubctl.py limits`` puts them back."""
    import netlimits

    assert netlimits.in_force(), "hubctl.start() put the limits in force"
    port = int(hubctl.URL.rsplit(":", 1)[1])
    first, second = two_accounts
    holder = connecting(first, port, 100, "hold")
    try:
        accepted, refused, _ = got(holder)
        assert (accepted, refused) == (netlimits.OPEN_AT_ONCE, 100 - netlimits.OPEN_AT_ONCE)
        for user, count in ((second, 10), (hubctl.INSTRUCTORS[0], 100)):
            other = connecting(user, port, count, "hold")
            assert got(other)[:2] == (count, 0), user
            other.communicate("")
    finally:
        holder.communicate("")
    churn = connecting(second, port, 400, "churn")
    accepted, refused, seconds = got(churn)
    churn.communicate("")
    assert refused > 0, (accepted, seconds)
    assert accepted <= netlimits.BURST + netlimits.PER_SECOND * (seconds + 1), (accepted, seconds)

    netlimits.remove()
    assert not netlimits.in_force()
    lifted = connecting(first, port, 100, "hold")
    assert got(lifted)[:2] == (100, 0)
    lifted.communicate("")
    assert hubctl.main(["limits"]) == 0  # what the systemd unit runs before each start
    assert netlimits.in_force()
