"""Log-in from the LMS on the course hub, end to end in headless Chromium (``[lms]`` in course.toml).

The LMS is a real LTI 1.3 platform (tests/lti_platform: lti1p3platform under uvicorn), with the hub
registered as its tool (the URLs the operator's guide lists). A student clicks the assignment's
link on their course page in the LMS and arrives in JupyterLab with their own copy of the
assignment open, logged in on a Unix account made for them from their LMS login id, in the
students' group, and refused by the shared Formgrader; the instructor's click lands in the page
of that assignment in the course's shared Formgrader (the hub service run as the course's
account: the LMS made the instructor an account of their own, which holds no course), and their
own JupyterLab's course list leads there; a launch whose id_token has expired is refused with its
reason and makes no account. The tool's public keys are served at /hub/lti13/jwks. After the
test the hub goes back to PAM log-in.

Then the course's whole term through the LMS (issue 36, item 6): the instructor places problem03
from the LMS's "add an external tool" (deep linking: the hub's picker, then the platform keeps the
link with a line item worth the assignment's points); both students launch from that link, answer
and submit in JupyterLab; the instructor collects, grades and releases (``rbtutor grade``,
``return-feedback``, as the ``instructor`` account, which only queues the grades: the tool keys are
root's) and the hub's LMS sender posts them. The platform's own score store then holds each
student's score as grades.csv has it, out of the assignment's points, ``PendingManual``; after the
written parts are graded by the LMS's instructor in the shared Formgrader and the feedback released
again during an outage of the platform (503),
``rbtutor lms status`` shows the grades pending, and once the platform is back they arrive
``FullyGraded``. Last the roster: a new member and a removed one on the platform, ``rbtutor lms
roster`` (as root), and the gradebook's students and LMS users follow the platform's members, the
removed one marked inactive. Last, 28 more students join, are graded and released: the time from
release to the 30 scores in the platform is written, with the two students' of the term, to
test-artifacts/lti-hub*/release-to-platform.txt. The module runs once with a SQLite and once with a
PostgreSQL gradebook, as tests/test_hub.py.

Needs root, /usr/bin/chromium and ``RBTUTOR_HUB_TEST=1`` (or CI), as tests/test_hub.py, whose
helpers it uses; run it under the hub lock: ``flock /tmp/rbtutor-hub.lock``. Screenshots go to
test-artifacts/lti-hub/.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time

import httpx
import pytest
from conftest import ROOT
from lti_platform import INSTRUCTOR, STUDENT1, STUDENT2
from lti_platform import platform_fixture as platform_fixture  # the fixtures
from lti_platform import platform_server_fixture as platform_server_fixture
from test_hub import (
    ASSIGNMENT,
    COURSE,
    HUB_LOCK,
    answered,
    as_instructor,
    hub_log_tail,
    hub_unavailable,
    hubctl,
    launch_chromium,
    page_state,
    reset_course_state,
)

pytestmark = pytest.mark.xdist_group("machine")

SHOTS = ROOT / "test-artifacts" / "lti-hub"
LMS_ACCOUNTS = {STUDENT1: "skovalevskaya", STUDENT2: "jlagrange", INSTRUCTOR: "leuler"}
SHARED = f"{hubctl.URL}/services/{hubctl.COURSE_ID}"  # the course's shared Formgrader (a hub service)
FORMGRADER = f"/services/{hubctl.COURSE_ID}/formgrader"
TOOL = {"oidc_login_url": f"{hubctl.URL}/hub/lti13/oauth_login",
        "redirect_uris": [f"{hubctl.URL}/hub/lti13/oauth_callback"],
        "target_link_uri": f"{hubctl.URL}/hub/", "jwks_url": f"{hubctl.URL}/hub/lti13/jwks"}


def remove_lms_accounts() -> None:
    for account in LMS_ACCOUNTS.values():
        if hubctl.user_exists(account):
            subprocess.run(["userdel", "--remove", account], check=True, capture_output=True)


def lms_section(platform) -> str:
    return ("\n[lms]\n"
            f'issuer = "{platform.issuer}"\nclient_id = "{platform.client_id}"\n'
            f'deployment_ids = ["{platform.deployment_id}"]\nauth_url = "{platform.auth_url}"\n'
            f'token_url = "{platform.token_url}"\njwks_url = "{platform.jwks_url}"\naccount_claim = "login"\n')


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def lti_hub(request, lti_platform_server):
    """The hub with log-in from the test platform, its gradebook SQLite or PostgreSQL (as `make hub
    GRADEBOOK=postgres`); afterwards PAM again and no LMS account left."""
    global SHOTS
    reason = hub_unavailable(request.param)
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the LTI hub test: {reason}", pytrace=False)
        pytest.skip(reason)
    platform = lti_platform_server
    platform.reset()
    lock = open(HUB_LOCK, "a")  # noqa: SIM115 (held to the end of the module): one course hub a machine
    fcntl.flock(lock, fcntl.LOCK_EX)
    hubctl.stop()
    remove_lms_accounts()
    hubctl.up(start_hub=False, gradebook=request.param)
    reset_course_state()
    as_instructor("python", "-m", "rbtutor.course", "generate")
    as_instructor("python", "-m", "rbtutor.course", "release", ASSIGNMENT, "--force")
    settings = COURSE / "course.toml"
    before = settings.read_text() if settings.exists() else None
    settings.write_text((before or "") + lms_section(platform))
    owner = COURSE.stat()
    os.chown(settings, owner.st_uid, owner.st_gid)
    platform.register_tool(**TOOL)
    platform.add_resource_link("rl-p3", "Problem 3", custom={"assignment": ASSIGNMENT},
                               line_item={"label": "Problem 3", "scoreMaximum": 10})
    SHOTS = ROOT / "test-artifacts" / ("lti-hub" if request.param == "sqlite" else f"lti-hub-{request.param}")
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        hubctl.start()
        yield platform
    finally:
        hubctl.stop()
        if request.param == "postgres":
            hubctl.stop_postgres()
        if before is None:
            settings.unlink(missing_ok=True)
        else:
            settings.write_text(before)
        remove_lms_accounts()
        hubctl.forget_hub_users(LMS_ACCOUNTS.values())
        shutil.rmtree(hubctl.LTI_KEYS, ignore_errors=True)
        lock.close()


@pytest.fixture(scope="module")
def browser(lti_hub):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


def click_launch(browser, platform, sub: str, link_text: str, *, tweak: str = ""):
    """A fresh browser of one LMS user: their course page, then a click on ``link_text``."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(240_000)  # a first start of a server on a loaded machine
    page.goto(platform.course_page(sub))
    if tweak:  # the same launch, its id_token broken by the platform
        page.goto(platform.launch_url(sub, "rl-p3", tweak=tweak))
    else:
        page.click(f"text={link_text}")
    return context, page


def waited(page, what: str, wait):
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        return wait()
    except PlaywrightTimeoutError as exc:
        raise AssertionError(f"no {what}: {exc}\n{page_state(page)}\n{hub_log_tail()}") from None


def test_the_hub_publishes_the_tools_keys(lti_hub):
    keys = httpx.get(TOOL["jwks_url"], timeout=30).raise_for_status().json()["keys"]
    assert keys
    assert all(key["kty"] == "RSA" and key["kid"] and "d" not in key for key in keys)


def test_an_expired_launch_is_refused_with_its_reason_and_makes_no_account(lti_hub, browser):
    context, page = click_launch(browser, lti_hub, STUDENT2, "Problem 3", tweak="expired")
    try:
        waited(page, "the refusal", lambda: page.wait_for_selector("text=LTI log-in refused"))
        assert "the id_token has expired" in page.inner_text("body")
        assert page.url.startswith(f"{hubctl.URL}/hub/lti13/oauth_callback")
        page.screenshot(path=str(SHOTS / "01-expired-launch-refused.png"))
    finally:
        context.close()
    assert not hubctl.user_exists(LMS_ACCOUNTS[STUDENT2])


def test_a_student_launch_lands_in_their_own_copy_of_the_assignment(lti_hub, browser):
    account = LMS_ACCOUNTS[STUDENT1]
    context, page = click_launch(browser, lti_hub, STUDENT1, "Problem 3")
    try:
        waited(page, "JupyterLab with the assignment",
               lambda: page.wait_for_url(f"**/user/{account}/lab/tree/{ASSIGNMENT}/**"))
        tab = f".lm-TabBar-tab:has-text('{ASSIGNMENT}.ipynb')"
        waited(page, "the notebook's tab", lambda: page.wait_for_selector(tab))
        waited(page, "the notebook's cells", lambda: page.wait_for_selector(".jp-NotebookPanel .jp-Cell"))
        waited(page, "the notebook shown", lambda: page.wait_for_selector(".jp-NotebookPanel .jp-Spinner",
                                                                         state="detached"))
        page.screenshot(path=str(SHOTS / "02-student-lands-in-the-assignment.png"))
        # the course's shared Formgrader runs as the course account: a student's session is refused there
        for path in ("formgrader/", "formgrader/api/assignments", "lab", "api/contents/"):
            denied = page.request.get(f"{SHARED}/{path}")
            assert denied.status == 403, (path, denied.status, denied.url, denied.text()[:300])
    finally:
        context.close()
    entry = pwd.getpwnam(account)
    fetched = hubctl.home(account) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert fetched.is_file(), f"no fetched copy at {fetched}\n{hub_log_tail()}"
    assert fetched.stat().st_uid == entry.pw_uid
    released = (COURSE / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    assert fetched.read_text() != released, "the student got the released (reference) numbers, not their own"


def test_an_instructor_launch_lands_in_the_courses_shared_formgrader(lti_hub, browser):
    """The LMS's instructor has an account of their own, which holds no course: their launch lands in the
    course's shared Formgrader (the hub service run as the course's account), which lists the released
    assignment; their own JupyterLab has no Formgrader of its own, and its course list leads there."""
    account = LMS_ACCOUNTS[INSTRUCTOR]
    context, page = click_launch(browser, lti_hub, INSTRUCTOR, "Problem 3")
    try:
        waited(page, "the Formgrader's page of the assignment",
               lambda: page.wait_for_url(f"**{FORMGRADER}/manage_submissions/{ASSIGNMENT}**"))
        waited(page, "the Formgrader's menu", lambda: page.wait_for_selector("text=Manage Assignments"))
        waited(page, "the submissions loaded", lambda: page.wait_for_selector("text=Loading, please wait",
                                                                               state="detached"))
        page.screenshot(path=str(SHOTS / "03-instructor-lands-in-the-formgrader.png"))
        listed = server_call(context, page, SHARED, "GET", "formgrader/api/assignments").json()
        assert ASSIGNMENT in {row["name"] for row in listed}, listed
        page.goto(f"{hubctl.URL}/hub/user-redirect/lab")
        waited(page, "the instructor's own JupyterLab", lambda: page.wait_for_url(f"**/user/{account}/lab**"))
        own = f"{hubctl.URL}/user/{account}"
        assert server_call(context, page, own, "GET", "formgrader/").status == 404, "an own, empty Formgrader"
        courses = server_call(context, page, own, "GET", "formgraders").json()
        assert courses["success"], courses
        assert [(c["course_id"], c["url"]) for c in courses["value"]] == \
            [(hubctl.COURSE_ID, f"{hubctl.URL}/services/{hubctl.COURSE_ID}/lab?formgrader=true")], courses
    finally:
        context.close()
    assert hubctl.user_exists(account)


# ---------------------------------------------------------------------------- the term through the LMS

def assignment_points() -> float:
    """The points of the released assignment, summed from its graded cells' nbgrader metadata."""
    notebook = json.loads((COURSE / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    return sum(float(cell["metadata"]["nbgrader"].get("points", 0)) for cell in notebook["cells"]
               if cell.get("metadata", {}).get("nbgrader", {}).get("grade"))


def server_call(context, page, base: str, method: str, path: str, data=None):
    """A call to the Jupyter server at ``base`` (a user's, or the shared Formgrader's) with this browser's
    cookies and the server's XSRF token."""
    cookies = [c for c in context.cookies(base + "/") if c["name"] == "_xsrf"]
    xsrf = max(cookies, key=lambda c: len(c["path"]))["value"] if cookies else ""
    return page.request.fetch(f"{base}/{path}", method=method, headers={"X-XSRFToken": xsrf},
                              data=json.dumps(data) if data is not None else None)


def place_the_assignment(browser, platform, points: float) -> dict:
    """The instructor's "add an external tool": the hub's picker, a pick, the link the platform keeps."""
    context, page = click_launch(browser, platform, INSTRUCTOR, "Add an external tool")
    try:
        waited(page, "the hub's picker of released assignments",
               lambda: page.wait_for_selector("text=Place an assignment in the course"))
        assert page.url.startswith(f"{hubctl.URL}/hub/lti13/deep_link?ticket="), page.url
        listed = page.inner_text("body")
        assert f"{ASSIGNMENT} {points:g} points" in listed, listed
        page.screenshot(path=str(SHOTS / "04-instructor-picks-an-assignment.png"))
        page.click(f"button:text-is('{ASSIGNMENT}')")
        waited(page, "the platform's page after the pick", lambda: page.wait_for_selector("text=1 item(s) added"))
        assert page.url.startswith(platform.deep_link_return_url), page.url
    finally:
        context.close()
    [[item]] = platform.store()["deep_links"]
    assert (item["type"], item["custom"]) == ("ltiResourceLink", {"assignment": ASSIGNMENT}), item
    assert (item["lineItem"]["scoreMaximum"], item["lineItem"]["resourceId"]) == (points, ASSIGNMENT), item
    return item


def launch_and_submit(browser, platform, sub: str, sign_error: bool) -> None:
    """A student's click on the placed link, into their copy; answers written, then Submit in the Assignment List."""
    account = LMS_ACCOUNTS[sub]
    context, page = click_launch(browser, platform, sub, ASSIGNMENT)
    try:
        waited(page, "JupyterLab with the assignment",
               lambda: page.wait_for_url(f"**/user/{account}/lab/tree/{ASSIGNMENT}/**"))
        waited(page, "the notebook's cells", lambda: page.wait_for_selector(".jp-NotebookPanel .jp-Cell"))
        page.goto(f"{hubctl.URL}/user/{account}/api/status")  # out of JupyterLab while the file changes
        path = f"api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
        own = f"{hubctl.URL}/user/{account}"
        notebook = answered(server_call(context, page, own, "GET", path).json()["content"], sign_error)
        put = server_call(context, page, own, "PUT", path,
                          {"type": "notebook", "format": "json", "content": notebook})
        assert put.status in (200, 201), put.text()
        page.goto(f"{hubctl.URL}/user/{account}/lab")
        waited(page, "the Nbgrader menu", lambda: page.wait_for_selector(".lm-MenuBar-itemLabel:text-is('Nbgrader')"))
        page.click("text=Nbgrader")
        page.click(".lm-Menu-itemLabel:text-is('Assignment List')")
        fetched = page.locator("#fetched_assignments_list")
        waited(page, "the fetched assignment", lambda: fetched.locator(f"text={ASSIGNMENT}").first.wait_for())
        fetched.locator("button:text-is('Submit')").first.click()
        page.locator("#rbtutor-submit-confirm button:has-text('Submit')").click()
        waited(page, "the submission in the list", lambda: page.locator("#submitted_assignments_list")
               .locator(f"text={ASSIGNMENT}").first.wait_for(timeout=180_000))
        page.screenshot(path=str(SHOTS / f"05-{account}-submitted.png"))
    finally:
        context.close()


def final_scores() -> dict[str, float]:
    """grades.csv's final score of each student in the assignment (what the LMS is to get)."""
    with (COURSE / "grades.csv").open() as handle:
        return {row["student"]: float(row["final_score"]) for row in csv.DictReader(handle)
                if row["assignment"] == ASSIGNMENT}


def platform_scores(platform, line_item_id: str) -> dict[str, dict]:
    """The platform's latest score of each LMS user on the line item ``line_item_id`` (its URL)."""
    store = platform.store()
    number = next(key for key, item in store["line_items"].items() if item["id"] == line_item_id)
    return store["scores"].get(number, {})


def wait_for_scores(platform, line_item_id: str, wanted, what: str, timeout: float = 120.0) -> dict[str, dict]:
    """Poll the platform's store until ``wanted(scores)`` holds; the scores then."""
    deadline = time.monotonic() + timeout
    while True:
        scores = platform_scores(platform, line_item_id)
        if wanted(scores):
            return scores
        if time.monotonic() > deadline:
            status = as_instructor("python", "-m", "rbtutor", "lms", "status").stdout
            raise AssertionError(f"the platform did not get {what} within {timeout:.0f} s: {scores}\n{status}\n"
                                 f"{hub_log_tail()}")
        time.sleep(0.5)


def all_with(progress: str, subs):
    return lambda scores: all(scores.get(sub, {}).get("gradingProgress") == progress for sub in subs)


def grade_written_parts(browser, platform, share: float) -> float:
    """The LMS's instructor scores every part still to grade by hand ``share`` of its points, in the course's
    shared Formgrader (its API, as the Formgrader's page saves a score); the points given per student."""
    context, page = click_launch(browser, platform, INSTRUCTOR, "Problem 3")
    given = {}
    try:
        waited(page, "the shared Formgrader", lambda: page.wait_for_url(f"**{FORMGRADER}/manage_submissions/**"))
        notebooks = server_call(context, page, SHARED, "GET",
                                f"formgrader/api/submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}").json()
        for notebook in notebooks:
            grades = server_call(context, page, SHARED, "GET", f"formgrader/api/grades?submission_id={notebook['id']}")
            for grade in grades.json():
                if grade["needs_manual_grade"]:
                    saved = server_call(context, page, SHARED, "PUT", f"formgrader/api/grade/{grade['id']}",
                                        {"manual_score": share * grade["max_score"], "extra_credit": None})
                    assert saved.status == 200, saved.text()
                    assert not saved.json()["needs_manual_grade"], saved.text()
                    given[notebook["student"]] = given.get(notebook["student"], 0) + share * grade["max_score"]
    finally:
        context.close()
    assert set(given) == {LMS_ACCOUNTS[STUDENT1], LMS_ACCOUNTS[STUDENT2]}, given
    assert len(set(given.values())) == 1, given
    return next(iter(given.values()))


def as_root_lms(*args: str) -> subprocess.CompletedProcess:
    """``rbtutor lms ...`` as root, who may read the tool keys (``sudo rbtutor lms ...`` on the hub)."""
    env = {**os.environ, "RBTUTOR_LMS_KEYS": str(hubctl.LTI_KEYS)}
    env.pop("RBTUTOR_GRADEBOOK", None)
    if hubctl.gradebook_url():
        env["RBTUTOR_GRADEBOOK"] = hubctl.gradebook_url()
    return subprocess.run([sys.executable, "-m", "rbtutor", "lms", "--root", str(COURSE), *args], env=env,
                          capture_output=True, text=True, timeout=300)


def gradebook_url() -> str:
    return hubctl.gradebook_url() or f"sqlite:///{COURSE / 'gradebook.db'}"


def test_grades_roster_and_placing_through_the_lms(lti_hub, browser):
    platform, subs = lti_hub, (STUDENT1, STUDENT2)
    points = assignment_points()
    place_the_assignment(browser, platform, points)
    line_item = next(i["id"] for i in platform.store()["line_items"].values() if i.get("resourceId") == ASSIGNMENT)
    for sub, sign_error in ((STUDENT1, False), (STUDENT2, True)):
        launch_and_submit(browser, platform, sub, sign_error)

    # --- the instructor collects, grades and releases; the hub's LMS sender posts the grades
    collected = as_instructor("python", "-m", "rbtutor.course", "collect", ASSIGNMENT).stdout
    assert "collected problem03 from 2 student(s)" in collected, collected
    as_instructor("python", "-m", "rbtutor.course", "grade")
    expected = final_scores()
    released = as_instructor("python", "-m", "rbtutor.course", "return-feedback")
    started = time.monotonic()
    assert "the hub's LMS sender posts them" in released.stdout, released.stdout + released.stderr
    scores = wait_for_scores(platform, line_item, all_with("PendingManual", subs), "both scores, PendingManual")
    first_delay = time.monotonic() - started
    for sub in subs:
        assert scores[sub]["scoreGiven"] == pytest.approx(expected[LMS_ACCOUNTS[sub]]), (sub, scores, expected)
        assert (scores[sub]["scoreMaximum"], scores[sub]["activityProgress"]) == (points, "Submitted"), scores
    assert scores[STUDENT1]["scoreGiven"] > scores[STUDENT2]["scoreGiven"], scores  # the sign error cost points

    # --- the written parts graded, released again while the platform is down: pending, then sent
    given = grade_written_parts(browser, platform, 0.5)
    platform.fault("503", count=100_000, path="/ags/")
    as_instructor("python", "-m", "rbtutor.course", "return-feedback")
    deadline = time.monotonic() + 180
    while True:
        status = as_instructor("python", "-m", "rbtutor", "lms", "status").stdout
        row = re.search(rf"^{ASSIGNMENT}\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", status, re.M)
        if row and int(row.group(2)) == 2 and "503" in status:
            break
        assert time.monotonic() < deadline, f"no pending grades after the outage:\n{status}\n{hub_log_tail()}"
        time.sleep(1)
    (SHOTS / "lms-status-during-outage.txt").write_text(status)
    assert "rbtutor lms sync` sends what is pending" in status, status
    assert all(s["gradingProgress"] == "PendingManual" for s in platform_scores(platform, line_item).values())
    platform.clear_faults()
    synced = as_root_lms("sync")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    scores = wait_for_scores(platform, line_item, all_with("FullyGraded", subs), "both scores, FullyGraded")
    for sub in subs:
        assert scores[sub]["scoreGiven"] == pytest.approx(expected[LMS_ACCOUNTS[sub]] + given), (sub, scores)
        assert scores[sub]["activityProgress"] == "Completed", scores
    status = as_instructor("python", "-m", "rbtutor", "lms", "status").stdout
    assert re.search(rf"^{ASSIGNMENT}\s+2\s+0\s+0\s+0$", status, re.M), status

    # --- the roster: a new member and a removed one on the platform
    platform.add_member("stu-8e21", "Emmy Noether", "emmy.noether@uni.example", "enoether")
    platform.remove_member(STUDENT2)
    listed = as_root_lms("roster")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "1 marked inactive (jlagrange)" in listed.stdout, listed.stdout
    check_roster(platform)

    # --- a class of 30: the time from release to scores in the platform
    thirty = release_to_a_class_of_30(platform, line_item, points)
    (SHOTS / "release-to-platform.txt").write_text(
        f"release (return-feedback done) to both scores in the platform's store: {first_delay:.1f} s\n"
        f"release (the LMS step of `rbtutor feedback`) to 30 scores in the platform's store: {thirty:.1f} s\n"
        f"(the hub's LMS sender looks every {hubctl.LMS_SEND_EVERY} s)\n")


def release_to_a_class_of_30(platform, line_item: str, points: float) -> float:
    """28 more students on the platform, in the roster, graded (a share of the points each, written parts
    included); the release of their grades (the LMS step of ``rbtutor feedback``, as the instructor)
    timed until the platform holds all 30 scores, posted by the hub's sender. The seconds it took."""
    added = [f"stu-{n:04d}" for n in range(3, 31)]
    for n, sub in enumerate(added, start=3):
        platform.add_member(sub, f"Student Number{n}", f"s{n}@uni.example", f"s{n:02d}")
    listed = as_root_lms("roster")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    accounts = [f"s{n:02d}" for n in range(3, 31)]
    share = {account: (n % 5) / 4 for n, account in enumerate(accounts)}
    code = f"""
import json
from nbgrader.api import Gradebook
from rbtutor.course.layout import CourseLayout
share = json.loads({json.dumps(json.dumps(share))})
with Gradebook(CourseLayout('.').gradebook_url) as gradebook:
    for account, part in share.items():
        for notebook in gradebook.add_submission({ASSIGNMENT!r}, account).notebooks:
            for grade in notebook.grades:
                grade.manual_score, grade.needs_manual_grade = part * grade.max_score, False
    gradebook.db.commit()
"""
    as_instructor("python", "-c", code)
    release = "from rbtutor.course.layout import CourseLayout; from rbtutor.course.release import release_grades; " \
              "raise SystemExit(release_grades(CourseLayout('.')))"
    started = time.monotonic()
    released = as_instructor("python", "-c", release)
    assert "the hub's LMS sender posts them" in released.stdout, released.stdout + released.stderr
    everyone = [STUDENT1, STUDENT2, *added]
    scores = wait_for_scores(platform, line_item, lambda got: all(sub in got for sub in everyone), "30 scores")
    seconds = time.monotonic() - started
    for n, sub in enumerate(added, start=3):
        assert scores[sub]["scoreGiven"] == pytest.approx(share[f"s{n:02d}"] * points), (sub, scores[sub])
        assert scores[sub]["gradingProgress"] == "FullyGraded", scores[sub]
    return seconds


def check_roster(platform) -> None:
    """The gradebook's LMS users and students against the platform's members: each member known and active,
    the removed student inactive but still a student of the gradebook (their work is kept)."""
    from nbgrader.api import Gradebook  # deferred: 3.1 s to import (python -X importtime); only this check needs it

    from rbtutor.lms.store import connect  # deferred: beside the one above, for the same check

    members = {m["user_id"]: m for m in platform.members()}
    users = {user.sub: user for user in connect(gradebook_url()).users()}
    for sub, member in members.items():
        assert sub in users, (sub, sorted(users))
        assert (users[sub].email, users[sub].name) == (member["email"], member["name"]), (users[sub], member)
        assert users[sub].status == "active", users[sub]
    assert users[STUDENT2].status == "inactive", users[STUDENT2]
    with Gradebook(gradebook_url()) as gradebook:
        students = {student.id for student in gradebook.students}
    learners = {users[sub].account for sub, m in members.items() if any(r.endswith("#Learner") for r in m["roles"])}
    assert learners == {"skovalevskaya", "enoether"}, learners
    assert learners | {"jlagrange"} <= students, students
