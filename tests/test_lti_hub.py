"""Log-in from the LMS on the course hub, end to end in headless Chromium (``[lms]`` in course.toml).

The LMS is a real LTI 1.3 platform (tests/lti_platform: lti1p3platform under uvicorn), with the hub
registered as its tool (the URLs the operator's guide lists). A student clicks the assignment's
link on their course page in the LMS and arrives in JupyterLab with their own copy of the
assignment open, logged in on a Unix account made for them from their LMS login id, in the
students' group; the instructor's click lands in the Formgrader's page of that assignment; a
launch whose id_token has expired is refused with its reason and makes no account. The tool's
public keys are served at /hub/lti13/jwks. After the test the hub goes back to PAM log-in.

Needs root, /usr/bin/chromium and ``RBTUTOR_HUB_TEST=1`` (or CI), as tests/test_hub.py, whose
helpers it uses; run it under the hub lock: ``flock /tmp/rbtutor-hub.lock``. Screenshots go to
test-artifacts/lti-hub/.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import sqlite3
import subprocess

import httpx
import pytest
from conftest import CHROMIUM, ROOT, chromium_available
from lti_platform import INSTRUCTOR, STUDENT1, STUDENT2
from lti_platform import platform_fixture as platform_fixture  # the fixtures
from lti_platform import platform_server_fixture as platform_server_fixture
from test_hub import ASSIGNMENT, COURSE, HUB_LOCK, as_instructor, hub_log_tail, hubctl, page_state, reset_course_state

pytestmark = pytest.mark.xdist_group("machine")

SHOTS = ROOT / "test-artifacts" / "lti-hub"
LMS_ACCOUNTS = {STUDENT1: "skovalevskaya", STUDENT2: "jlagrange", INSTRUCTOR: "leuler"}
TOOL = {"oidc_login_url": f"{hubctl.URL}/hub/lti13/oauth_login",
        "redirect_uris": [f"{hubctl.URL}/hub/lti13/oauth_callback"],
        "target_link_uri": f"{hubctl.URL}/hub/", "jwks_url": f"{hubctl.URL}/hub/lti13/jwks"}


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the LTI hub test needs root (it creates Unix accounts and starts servers as them)"
    if not chromium_available():
        return f"{CHROMIUM} not found or not executable (apt-get install -y --no-install-recommends chromium)"
    if not os.environ.get("CI") and os.environ.get("RBTUTOR_HUB_TEST") != "1":
        return "set RBTUTOR_HUB_TEST=1 to run it here: it resets the course state of the hub on this machine"
    return None


def remove_lms_accounts() -> None:
    for account in LMS_ACCOUNTS.values():
        if hubctl.user_exists(account):
            subprocess.run(["userdel", "--remove", account], check=True, capture_output=True)


def forget_hub_users(names) -> None:
    """Drop the LMS users from the stopped hub's database (their groups and tokens go with them)."""
    with contextlib.closing(sqlite3.connect(hubctl.STATE / "jupyterhub.sqlite")) as db:
        db.execute("PRAGMA foreign_keys = ON")
        db.executemany("DELETE FROM users WHERE name = ?", [(name,) for name in names])
        db.commit()


def lms_section(platform) -> str:
    return ("\n[lms]\n"
            f'issuer = "{platform.issuer}"\nclient_id = "{platform.client_id}"\n'
            f'deployment_ids = ["{platform.deployment_id}"]\nauth_url = "{platform.auth_url}"\n'
            f'token_url = "{platform.token_url}"\njwks_url = "{platform.jwks_url}"\naccount_claim = "login"\n')


@pytest.fixture(scope="module")
def lti_hub(lti_platform_server):
    """The hub with log-in from the test platform; afterwards PAM again and no LMS account left."""
    reason = unavailable()
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
    hubctl.up(start_hub=False)
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
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        hubctl.start()
        yield platform
    finally:
        hubctl.stop()
        if before is None:
            settings.unlink(missing_ok=True)
        else:
            settings.write_text(before)
        remove_lms_accounts()
        forget_hub_users(LMS_ACCOUNTS.values())
        shutil.rmtree(hubctl.LTI_KEYS, ignore_errors=True)
        lock.close()


@pytest.fixture(scope="module")
def browser(lti_hub):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"])
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
    finally:
        context.close()
    entry = pwd.getpwnam(account)
    fetched = hubctl.home(account) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert fetched.is_file(), f"no fetched copy at {fetched}\n{hub_log_tail()}"
    assert fetched.stat().st_uid == entry.pw_uid
    released = (COURSE / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    assert fetched.read_text() != released, "the student got the released (reference) numbers, not their own"


def test_an_instructor_launch_lands_in_the_formgrader(lti_hub, browser):
    account = LMS_ACCOUNTS[INSTRUCTOR]
    context, page = click_launch(browser, lti_hub, INSTRUCTOR, "Problem 3")
    try:
        waited(page, "the Formgrader's page of the assignment",
               lambda: page.wait_for_url(f"**/user/{account}/formgrader/manage_submissions/{ASSIGNMENT}**"))
        waited(page, "the Formgrader's menu", lambda: page.wait_for_selector("text=Manage Assignments"))
        page.screenshot(path=str(SHOTS / "03-instructor-lands-in-the-formgrader.png"))
    finally:
        context.close()
    assert hubctl.user_exists(account)
