"""LTI 1.3 launches from a real platform (lti1p3platform under uvicorn, tests/lti_platform) checked by
rbtutor.lms.launch: a good launch is admitted with its account name, role and assignment; each way
a launch can be wrong is refused with its own one-line reason and leaves no LMS user, no used nonce
and no account behind."""

from __future__ import annotations

import json
import secrets
import shutil

import pytest
from lti_platform import INSTRUCTOR, STUDENT1, STUDENT2, TEACHING_ASSISTANT
from lti_platform import platform_fixture as platform_fixture  # the fixtures
from lti_platform import platform_server_fixture as platform_server_fixture
from postgres import postgres_server as postgres_server
from sqlalchemy import inspect, text
from test_config import rbtutor_config, scratch_course

from rbtutor.course.settings import load_settings
from rbtutor.lms import launch as lti
from rbtutor.lms.accounts import AccountRefused
from rbtutor.lms.store import connect

REDIRECT = "http://127.0.0.1:9/hub/lti13/oauth_callback"  # the tool's; the test posts the form itself


@pytest.fixture
def platform(lti_platform):
    """The platform with the tool registered and one link to problem03 with a line item."""
    lti_platform.register_tool(oidc_login_url="http://127.0.0.1:9/hub/lti13/oauth_login", redirect_uris=[REDIRECT],
                               target_link_uri="http://127.0.0.1:9/hub/", jwks={"keys": []})
    lti_platform.add_resource_link("rl-p3", "Problem 3", custom={"assignment": "problem03"},
                                   line_item={"label": "Problem 3", "scoreMaximum": 10})
    return lti_platform


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory):
    """A new gradebook with the LMS tables (made once: nbgrader's start-up takes seconds)."""
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    connect(f"sqlite:///{path}").engine.dispose()
    return path


@pytest.fixture
def store(tmp_path, empty_gradebook):
    shutil.copy(empty_gradebook, tmp_path / "gradebook.db")
    return connect(f"sqlite:///{tmp_path / 'gradebook.db'}")


def rules_of(platform, account_claim: str = "login") -> lti.LaunchRules:
    return lti.LaunchRules(issuer=platform.issuer, client_ids=(platform.client_id,),
                           deployment_ids=(platform.deployment_id,), jwks_url=platform.jwks_url,
                           account_claim=account_claim)


class Tool:
    """The tool's side of a launch in the test: what it issued (state, nonce) and what it keeps."""

    def __init__(self, platform, store, account_claim: str = "login"):
        self.platform, self.store = platform, store
        self.rules = rules_of(platform, account_claim)
        self.keys = lti.jwks_client(platform.jwks_url)
        self.accounts_made: list[str] = []

    def form(self, sub: str, link: str | None = "rl-p3", tweak: str = "", nonce: str | None = None, **kw) -> dict:
        """The platform's auto-submitted form, plus the state and nonce this tool issued for it."""
        state, nonce = secrets.token_urlsafe(12), nonce or secrets.token_urlsafe(12)
        form = self.platform.id_token(sub, link, redirect_uri=REDIRECT, nonce=nonce, state=state, tweak=tweak, **kw)
        return {**form, "issued_state": state, "issued_nonce": nonce}

    def claim(self, account: str, new: bool) -> None:
        self.accounts_made.append(account)

    def launch(self, form: dict, *, state: str | None = None) -> lti.Launch:
        checked = lti.read_launch(form["id_token"], self.rules, state=form["state"] if state is None else state,
                                  expected_state=form["issued_state"], expected_nonce=form["issued_nonce"],
                                  keys=self.keys, store=self.store)
        lti.admit(checked, self.store, self.claim)
        return checked

    def refused(self, form: dict, reason: str, **kw) -> None:
        """The launch is refused for ``reason``, and nothing is recorded or made."""
        with pytest.raises(lti.LaunchRefused, match=reason) as refusal:
            self.launch(form, **kw)
        assert "\n" not in str(refusal.value)
        assert self.store.users() == [] or kw.get("keep_users"), "a refused launch recorded a user"
        assert not self.store.is_used("nonce", form["issued_nonce"]) or form.get("nonce_was_used"), \
            "a refused launch used its nonce"


@pytest.fixture
def tool(platform, store):
    return Tool(platform, store)


def test_a_student_launch_is_admitted_with_account_role_and_assignment(tool, store):
    """The student's login id names the account; Learner is a student; the link's custom parameter names
    the assignment; the LMS user is recorded with the platform's issuer and sub."""
    checked = tool.launch(tool.form(STUDENT1))
    assert (checked.account, checked.role, checked.assignment) == ("skovalevskaya", "student", "problem03")
    [user] = store.users()
    assert (user.issuer, user.sub, user.account, user.name, user.email, user.status) == (
        tool.platform.issuer, STUDENT1, "skovalevskaya", "Sofia Kovalevskaya", "sofia.kovalevskaya@uni.example",
        "active")
    assert tool.accounts_made == ["skovalevskaya"]
    assert store.is_used("nonce", checked.nonce)


def test_instructors_and_teaching_assistants_are_hub_instructors(tool, platform):
    platform.add_member("ta-9a0e", "Emmy Noether", "emmy.noether@uni.example", "enoether", roles=[TEACHING_ASSISTANT])
    assert tool.launch(tool.form(INSTRUCTOR)).role == "instructor"
    assert tool.launch(tool.form("ta-9a0e")).role == "instructor"
    assert tool.launch(tool.form(STUDENT2)).role == "student"


def test_the_second_launch_of_a_user_keeps_their_account_and_updates_last_seen(tool, store):
    tool.launch(tool.form(STUDENT1))
    first = store.user_by_account("skovalevskaya")
    tool.launch(tool.form(STUDENT1))
    again = store.user_by_account("skovalevskaya")
    assert (again.sub, again.first_seen) == (first.sub, first.first_seen)
    assert again.last_seen >= first.last_seen
    assert len(store.users()) == 1


@pytest.mark.parametrize(("claim", "account"), [("email", "joseph_lagrange"), ("sub", "stu-4f03")])
def test_the_account_claim_is_the_courses_choice(platform, store, claim, account):
    tool = Tool(platform, store, account_claim=claim)
    assert tool.launch(tool.form(STUDENT2)).account == account


def test_the_target_link_uri_names_the_assignment_when_no_custom_parameter_does(tool, platform):
    platform.add_resource_link("rl-p5", "Problem 5", target_link_uri="http://127.0.0.1:9/hub/?assignment=problem05")
    assert tool.launch(tool.form(STUDENT1, "rl-p5")).assignment == "problem05"


@pytest.mark.parametrize(("tweak", "reason"), [
    ("expired", "has expired"),
    ("not_yet_valid", "not valid yet"),
    ("unknown_key", "signed by a key the platform does not publish"),
    ("other_audience", "meant for another tool"),
    ("other_deployment", "has not registered"),
    ("no_roles", "no roles claim"),
    ("old_version", "is not 1.3.0"),
])
def test_a_broken_id_token_is_refused_and_leaves_nothing(tool, tweak, reason):
    tool.refused(tool.form(STUDENT1, tweak=tweak), reason)


def test_a_wrong_state_is_refused(tool):
    tool.refused(tool.form(STUDENT1), "state does not match", state="forged-state")


def test_an_id_token_for_another_nonce_is_refused(tool):
    form = tool.form(STUDENT1)
    form["issued_nonce"] = "the-nonce-this-browser-was-given"
    tool.refused(form, "nonce is not the one")


def test_a_replayed_launch_is_refused(tool, store):
    """The same id_token and state posted a second time: its nonce is used."""
    form = tool.form(STUDENT1)
    tool.launch(form)
    with pytest.raises(lti.LaunchRefused, match="replayed launch"):
        tool.launch(form)
    assert len(store.users()) == 1
    assert tool.accounts_made == ["skovalevskaya"]


def test_a_reused_nonce_in_a_new_id_token_is_refused(tool, store):
    """A second, freshly signed id_token that carries a nonce already used is refused too."""
    first = tool.form(STUDENT2)
    tool.launch(first)
    second = tool.form(STUDENT2, nonce=first["issued_nonce"])
    with pytest.raises(lti.LaunchRefused, match="replayed launch"):
        tool.launch(second)
    assert tool.accounts_made == ["jlagrange"]


def test_two_lms_users_who_map_to_one_account_are_refused_not_merged(tool, platform, store):
    """A second LMS user whose login id makes the same account name is refused; the first keeps it."""
    platform.add_member("stu-77aa", "Sofia K.", "sk@uni.example", "SKovalevskaya")
    tool.launch(tool.form(STUDENT1))
    form = tool.form("stu-77aa")
    with pytest.raises(lti.LaunchRefused, match="belongs to another LMS user"):
        tool.launch(form)
    assert [(u.sub, u.account) for u in store.users()] == [(STUDENT1, "skovalevskaya")]
    assert not store.is_used("nonce", form["issued_nonce"])
    assert tool.accounts_made == ["skovalevskaya"]


def test_a_login_id_that_is_a_reserved_student_id_is_refused(tool, platform):
    platform.add_member("stu-5150", "Ina Structor", "ina@uni.example", "Instructor")
    tool.refused(tool.form("stu-5150"), "reserved for the course itself")


def test_a_refused_account_claim_rolls_the_whole_launch_back(tool, store):
    """When making the Unix account fails, neither the user nor the nonce is kept."""
    def no_account(account, new):
        raise AccountRefused(f"a local account {account!r} exists that the LMS did not make")

    form = tool.form(STUDENT1)
    checked = lti.read_launch(form["id_token"], tool.rules, state=form["state"], expected_state=form["issued_state"],
                              expected_nonce=form["issued_nonce"], keys=tool.keys, store=store)
    with pytest.raises(lti.LaunchRefused, match="local account 'skovalevskaya' exists"):
        lti.admit(checked, store, no_account)
    assert store.users() == []
    assert not store.is_used("nonce", form["issued_nonce"])


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_lms_records_live_in_the_gradebook_on_either_database(platform, tmp_path, request, backend):
    """On a new SQLite or PostgreSQL gradebook: nbgrader's tables (with its schema version) and the LMS
    tables side by side; a launch admitted, its replay and a colliding user refused, nothing half kept."""
    url = (request.getfixturevalue("postgres_server").create_database("lti_launch") if backend == "postgresql"
           else f"sqlite:///{tmp_path / 'gradebook.db'}")
    store = connect(url)
    tables = set(inspect(store.engine).get_table_names())
    assert {"student", "grade", "lms_users", "lms_used"} <= tables
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    platform.add_member("stu-77aa", "Sofia K.", "sk@uni.example", "SKovalevskaya")
    tool = Tool(platform, store)
    form = tool.form(STUDENT1)
    tool.launch(form)
    with pytest.raises(lti.LaunchRefused, match="replayed launch"):
        tool.launch(form)
    with pytest.raises(lti.LaunchRefused, match="belongs to another LMS user"):
        tool.launch(tool.form("stu-77aa"))
    assert [(u.sub, u.account, u.roles) for u in store.users()] == [
        (STUDENT1, "skovalevskaya", ("http://purl.imsglobal.org/vocab/lis/v2/membership#Learner",))]
    store.engine.dispose()


# --- the course's [lms] section (rbtutor.course.lms_settings, read by rbtutor.course.settings)
LMS_SECTION = """[late]
percent_per_day = 5.0

[lms]
issuer = "https://canvas.instructure.com"
client_id = "10000000000042"
deployment_ids = ["42:8865aa05"]
auth_url = "https://sso.canvaslms.com/api/lti/authorize_redirect"
token_url = "https://sso.canvaslms.com/login/oauth2/token"
jwks_url = "https://sso.canvaslms.com/api/lti/security/jwks"
account_claim = "email"
"""


def test_the_lms_section_is_read_beside_the_grading_options_and_shown_by_rbtutor_config(tmp_path):
    course = scratch_course(tmp_path / "course", LMS_SECTION)
    settings = load_settings(course)
    assert settings.values == {"late_percent_per_day": 5.0}
    assert (settings.lms.client_id, settings.lms.deployment_ids, settings.lms.account_claim) == (
        "10000000000042", ("42:8865aa05",), "email")
    shown = rbtutor_config(course)
    assert shown.returncode == 0, shown.stderr
    assert "LMS (course.toml [lms]): LTI 1.3 log-in" in shown.stdout
    assert "  jwks_url        https://sso.canvaslms.com/api/lti/security/jwks" in shown.stdout
    as_json = json.loads(rbtutor_config(course, "--json").stdout)
    assert as_json["lms"]["issuer"] == "https://canvas.instructure.com"


def test_a_course_without_lms_keeps_pam_and_says_so(tmp_path):
    course = scratch_course(tmp_path / "course", "[late]\npercent_per_day = 5.0\n")
    assert load_settings(course).lms is None
    assert "LMS (course.toml [lms]): none" in rbtutor_config(course).stdout


@pytest.mark.parametrize(("change", "message"), [
    (('account_claim = "email"', 'account_claim = "name"'),
     "course.toml:11: lms.account_claim: expected one of login, email, sub, got 'name'"),
    (('jwks_url = "https://sso', 'jwks_url = "http://sso'),
     "course.toml:10: lms.jwks_url: expected an https URL (http only on this machine), got "
     "'http://sso.canvaslms.com/api/lti/security/jwks'"),
    (('deployment_ids = ["42:8865aa05"]', "deployment_ids = []"),
     "course.toml:7: lms.deployment_ids: expected a list of deployment ids (text), got []"),
    (('client_id = "10000000000042"\n', ""),
     "course.toml:4: [lms] lacks client_id (the tool's client id in the LMS)"),
    (('account_claim = "email"', 'acount_claim = "email"'),
     "course.toml:11: lms.acount_claim: no such key in [lms]; expected one of issuer, client_id, deployment_ids, "
     "auth_url, token_url, jwks_url, account_claim"),
], ids=["claim", "http", "no-deployment", "missing", "unknown-key"])
def test_a_wrong_lms_value_is_one_line_naming_its_line_and_exit_2(tmp_path, change, message):
    course = scratch_course(tmp_path / "course", LMS_SECTION.replace(*change))
    done = rbtutor_config(course)
    assert done.returncode == 2, done.stdout[-2000:]
    assert done.stderr.splitlines() == [message]
