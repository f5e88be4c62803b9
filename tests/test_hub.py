"""The course on a JupyterHub, end to end in headless Chromium (``make hub``, hub/hubctl.py).

Two students on their own Unix accounts log in, fetch problem03 from the Assignments panel,
answer (student1 right, student2 with a sign error in K), validate and submit in JupyterLab;
the instructor collects and grades with ``python -m rbtutor.course``, grades a written part
in the Formgrader, re-grades, and returns the feedback; the students fetch and open it.

Needs root (the hub creates accounts and starts servers as other users) and /usr/bin/chromium:
skipped locally without them or without ``RBTUTOR_HUB_TEST=1`` (the test resets the hub's
course state: do not run it on a hub in use); in CI (``CI=true``) it runs and a missing piece
fails it. Screenshots of each step go to test-artifacts/hub/.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHROMIUM, chromium_available

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "hub"
sys.path.insert(0, str(ROOT / "hub"))
import hubctl  # noqa: E402

ASSIGNMENT = "problem03"
COURSE = Path("/home/instructor/course")


def _unavailable(gradebook: str) -> str | None:
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
    reason = _unavailable(request.param)
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the hub test: {reason}", pytrace=False)
        pytest.skip(reason)
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


def reset_course_state() -> None:
    """A fresh run: empty exchange, no fetched copies, no gradebook or working folders."""
    import shutil

    shutil.rmtree(hubctl.EXCHANGE / hubctl.COURSE_ID, ignore_errors=True)
    for student in hubctl.STUDENTS:
        shutil.rmtree(hubctl.home(student) / ASSIGNMENT, ignore_errors=True)
    for name in ("release", "submitted", "autograded", "feedback", "integrity", ".grading", "checks"):
        shutil.rmtree(COURSE / name, ignore_errors=True)
    # the assignment's source as in the checkout (the course folder is copied only once, so an
    # older copy would lack the helper cell's check()), owned by the instructor
    source = COURSE / "exercises" / ASSIGNMENT
    shutil.copytree(ROOT / "exercises" / ASSIGNMENT, source, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    owner = hubctl.home("instructor").stat()
    for path in [source, *source.rglob("*")]:
        os.lchown(path, owner.st_uid, owner.st_gid)
    for name in ("gradebook.db", "gradebook.db.bak", "grades.csv", "integrity_report.md", "integrity_report.json"):
        (COURSE / name).unlink(missing_ok=True)
    if hubctl.gradebook_url():  # the PostgreSQL gradebook: an empty database
        from pgserver import PostgresServer

        password = (hubctl.STATE / "postgres_password").read_text().strip()
        server = PostgresServer(hubctl.PG_FOLDER, hubctl.PG_PORT, password=password)
        server.psql(f'DROP DATABASE IF EXISTS "{hubctl.COURSE_ID}" WITH (FORCE)')
        server.create_database(hubctl.COURSE_ID)


def as_instructor(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command in the course folder as the instructor, as in a terminal of the hub."""
    env = {"PATH": f"{hubctl.VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(hubctl.home("instructor")),
           "RBTUTOR_EXCHANGE": str(hubctl.EXCHANGE), "LANG": "C.UTF-8"}
    if hubctl.gradebook_url():  # as the instructor's ~/.profile sets it on a PostgreSQL hub
        env["RBTUTOR_GRADEBOOK"] = hubctl.gradebook_url()
    result = subprocess.run(["runuser", "-u", "instructor", "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                             *command], cwd=COURSE, capture_output=True, text=True, timeout=600)
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

    def __init__(self, browser, user: str, password: str):
        self.user = user
        self.base = f"{hubctl.URL}/user/{user}"
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(60_000)
        page = self.page
        page.goto(f"{hubctl.URL}/hub/login")
        page.fill("#username_input", user)
        page.fill("#password_input", password)
        page.click("#login_submit")
        page.wait_for_url(f"**/user/{user}/lab**", timeout=120_000)
        page.wait_for_selector("#jp-main-dock-panel")
        page.wait_for_selector(".lm-MenuBar-itemLabel:text-is('Nbgrader')")

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(SHOTS / f"{name}.png"))

    def api(self, method: str, path: str, data=None):
        """A call to this user's Jupyter server with the browser's cookies and XSRF token."""
        xsrf = next((c["value"] for c in self.context.cookies() if c["name"] == "_xsrf"), "")
        response = self.page.request.fetch(f"{self.base}/{path}", method=method, headers={"X-XSRFToken": xsrf},
                                           data=json.dumps(data) if data is not None else None)
        return response

    def open_assignment_list(self):
        self.page.click("text=Nbgrader")
        self.page.click(".lm-Menu-itemLabel:text-is('Assignment List')")
        self.page.wait_for_selector("#released_assignments_list")

    def close(self):
        self.context.close()


def test_assignment_loop_on_the_hub(hub):
    from playwright.sync_api import sync_playwright

    as_instructor("python", "-m", "rbtutor.course", "generate")  # as the README says
    as_instructor("nbgrader", "release_assignment", ASSIGNMENT, "--force")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"])
        try:
            run_loop(browser, hub)
        finally:
            browser.close()


def run_loop(browser, passwords):
    students = {"student1": False, "student2": True}  # name: sign error
    sessions, data_cells = {}, {}
    # --- students: log in, see only the student tools, fetch, answer, validate, submit
    for student, sign_error in students.items():
        s = sessions[student] = Session(browser, student, passwords[student])
        s.shot(f"01-{student}-logged-in")
        specs = s.api("GET", "api/kernelspecs").json()["kernelspecs"]
        assert set(specs) == {"python3"}, f"{student} sees kernels {sorted(specs)}"
        assert s.api("GET", "formgrader/").status == 404, "the Formgrader must not be served to students"
        s.page.click("text=Nbgrader")
        menu = s.page.locator(".lm-Menu-content").inner_text()
        s.shot(f"02-{student}-nbgrader-menu")
        assert "Assignment List" in menu
        assert "Formgrader" not in menu and "Course List" not in menu, menu
        s.page.keyboard.press("Escape")
        s.page.click("text=View")
        s.page.click(".lm-Menu-itemLabel:text-is('Property Inspector')")  # where Create Assignment would be
        s.page.wait_for_timeout(500)
        assert s.page.locator("text=Create Assignment").count() == 0, "students must not see Create Assignment"

        s.open_assignment_list()
        released = s.page.locator("#released_assignments_list")
        released.locator(f"text={ASSIGNMENT}").first.wait_for()
        s.shot(f"03-{student}-assignments")
        released.locator("button:text-is('Fetch')").click()
        s.page.locator("#fetched_assignments_list").locator(f"text={ASSIGNMENT}").first.wait_for()
        s.shot(f"04-{student}-fetched")
        data_cells[student] = data_cell(s.api("GET", f"api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb").json()["content"])
        fetched = s.page.locator("#fetched_assignments_list")
        fetched.locator(f"text={ASSIGNMENT}").first.click()  # unfold the notebooks
        dialog = s.page.locator(".jp-Dialog")
        if not sign_error:  # validating before answering: the problem comes first, the cell folded away
            fetched.locator("button:text-is('Validate')").first.click()
            dialog.wait_for(timeout=180_000)
            s.shot(f"05a-{student}-validated-unanswered")
            message = dialog.locator("#validation-message")
            assert message.locator("p").first.inner_text() == "This cell needs fixing:", message.inner_html()
            assert message.locator("details").count() > 0, message.inner_html()
            shown = message.locator(":scope > pre").all_inner_texts()  # the reasons, outside the folds
            assert shown and not any("Traceback" in text for text in shown), message.inner_html()
            assert any("is not defined" in text for text in shown), shown
            dialog.locator("button").last.click()
            dialog.wait_for(state="detached")

        path = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
        got = s.api("GET", f"api/contents/{path}")
        assert got.status == 200, got.text()
        notebook = answered(got.json()["content"], sign_error)
        put = s.api("PUT", f"api/contents/{path}", {"type": "notebook", "format": "json", "content": notebook})
        assert put.status in (200, 201), put.text()

        fetched.locator("button:text-is('Validate')").first.click()
        dialog.wait_for(timeout=180_000)
        s.shot(f"05-{student}-validated")
        text = dialog.inner_text()
        # a sign error passes the form checks: the dialog must not call the notebook right
        assert "Form checks passed" in text and "graded after you submit" in text, text
        assert "passes all the tests" not in text, text
        dialog.locator("button").last.click()
        fetched.locator("button:text-is('Submit')").first.click()
        s.page.locator("#submitted_assignments_list").locator(f"text={ASSIGNMENT}").first.wait_for()
        s.shot(f"06-{student}-submitted")

    # --- each student fetched their own numbers, neither the released (instructor's) ones
    released = json.loads((COURSE / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    assert len({data_cells["student1"], data_cells["student2"], data_cell(released)}) == 3, data_cells

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
    copier.page.locator("#submitted_assignments_list").locator(f"text={ASSIGNMENT}").first.wait_for()
    copier.shot("06a-student3-submitted-with-student1-numbers")

    # --- student2 checks the wrong K in a kernel of their server: the diagnosis, no value
    checked = check_in_kernel(sessions["student2"])
    sessions["student2"].shot("06b-student2-checked")
    assert "p3.b.K: not right yet. The size is right but the sign is not" in checked, checked
    for pattern in key_values("student2"):
        assert not re.search(pattern, checked), f"a key value ({pattern}) is in the check's reply"

    # --- students are kept apart by the file system
    denied = subprocess.run(["runuser", "-u", "student1", "--", "cat",
                             str(hubctl.home("student2") / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")],
                            capture_output=True, text=True)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    inbound = hubctl.EXCHANGE / hubctl.COURSE_ID / "inbound"
    listing = subprocess.run(["runuser", "-u", "student1", "--", "ls", str(inbound)], capture_output=True, text=True)
    assert listing.returncode != 0, f"student1 can list the inbound folder: {listing.stdout}"

    # --- instructor: collect, grade
    collected = as_instructor("python", "-m", "rbtutor.course", "collect", ASSIGNMENT)
    assert "collected problem03 from 3 student(s)" in collected.stdout, collected.stdout
    as_instructor("python", "-m", "rbtutor.course", "grade")
    if hubctl.gradebook_url():  # graded into PostgreSQL, nothing into a SQLite file
        assert not (COURSE / "gradebook.db").exists()
    scores = read_grades()
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
    # the check statistics: the instructor sees student2's attempt, a student is refused
    teacher.page.goto(f"{hubctl.URL}/services/rbtutor-check/stats")
    teacher.page.wait_for_selector("table")
    stats = teacher.page.locator("table").inner_text()
    teacher.shot("06c-instructor-check-stats")
    assert "p3.b.K" in stats and "sign: 1" in stats, stats
    refused = sessions["student1"].page.request.get(f"{hubctl.URL}/services/rbtutor-check/stats")
    assert refused.status == 403, refused.status
    page = teacher.page
    page.goto(f"{teacher.base}/formgrader/gradebook/{ASSIGNMENT}/{ASSIGNMENT}")
    link = page.locator("a:text-is('student1')").first
    link.wait_for(state="attached")
    teacher.shot("07-instructor-formgrader-submissions")
    page.goto(hubctl.URL + link.get_attribute("href"))
    page.wait_for_selector("input.score")
    # the model answer and rubric in view, below the written answer being graded
    note = page.locator("div.rbtutor-grader-note").first
    assert "For the grader, p3_a_derivation" in note.inner_text() and "Rubric" in note.inner_text()
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

    # --- students: fetch the feedback and read it
    key = key_values("student2")
    for student, sign_error in students.items():
        s = sessions[student]
        s.page.reload()
        s.page.wait_for_selector(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
        s.open_assignment_list()
        submitted = s.page.locator("#submitted_assignments_list")
        submitted.locator("button:text-is('Fetch Feedback')").first.click()
        s.page.locator("#submitted_assignments_list").locator("text=view feedback").first.wait_for()
        s.shot(f"09-{student}-feedback-fetched")
        listing = s.api("GET", f"api/contents/{ASSIGNMENT}/feedback").json()["content"]
        stamp = listing[0]["path"]
        html_path = f"{stamp}/{ASSIGNMENT}.html"
        html = s.api("GET", f"files/{html_path}").text()
        s.page.goto(f"{s.base}/lab/tree/{html_path}")
        # JupyterLab's own HTML viewer (a sandboxed frame, no scripts): the formulas are MathML
        s.page.frame_locator(".jp-HTMLViewer iframe").locator("math").first.wait_for()
        s.shot(f"10-{student}-feedback-open")
        assert "<math" in html and "mathjax" not in html.lower(), "feedback formulas must be MathML, no MathJax"
        if sign_error:
            for pattern in key:
                assert not re.search(pattern, html), f"a key value ({pattern}) is in student2's feedback"
    for s in sessions.values():
        s.close()


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
