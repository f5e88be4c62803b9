"""Grades back to the LMS (rbtutor.lms.outbox, ``rbtutor feedback``, ``rbtutor lms status|sync``) against a real
LTI platform (lti1p3platform under uvicorn, tests/lti_platform), with SQLite and PostgreSQL gradebooks.

Each test builds a course whose ``course.toml`` names the platform, whose tool keys the platform
knows, whose roster came from the platform's NRPS (``rbtutor lms roster``) and whose service URLs
came from a verified launch; the gradebook is built with nbgrader's API (no notebook is run). What
the platform received is read from its own score store.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import shutil
import time
import uuid
from pathlib import Path

import pytest
from lti_platform import INSTRUCTOR, LEARNER, platform_fixture, platform_server_fixture  # noqa: F401 - the fixtures
from postgres import postgres_server  # noqa: F401 - the fixture

from rbtutor.lms import launch as lti

ROOT = Path(__file__).resolve().parents[1]
REDIRECT = "http://127.0.0.1:9/hub/lti13/oauth_callback"  # the tool's; the test posts the form itself
AUTO, WRITTEN = 6.0, 4.0  # points of problem01's autograded and written parts
SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"


def lms_toml(platform) -> str:
    return "\n".join(["[lms]", f'issuer = "{platform.issuer}"', f'client_id = "{platform.client_id}"',
                      f'deployment_ids = ["{platform.deployment_id}"]', f'auth_url = "{platform.auth_url}"',
                      f'token_url = "{platform.token_url}"', f'jwks_url = "{platform.jwks_url}"',
                      'account_claim = "login"']) + "\n"


def run_lms(course: Path, *args: str) -> tuple[int, str, str]:
    """``rbtutor lms ARGS`` in ``course``: the exit status, standard output and standard error."""
    from rbtutor.course.lms_cli import main

    out, err = io.StringIO(), io.StringIO()
    status = main(["--root", str(course), *args], out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def release(course: Path) -> tuple[int, str, str]:
    """What ``rbtutor feedback`` does after returning the feedback: the grades to the LMS."""
    from rbtutor.course.layout import CourseLayout
    from rbtutor.course.release import release_grades

    out, err = io.StringIO(), io.StringIO()
    return release_grades(CourseLayout(course), out=out, err=err), out.getvalue(), err.getvalue()


def new_course(course: Path) -> None:
    """A course folder whose gradebook holds problem01 as `rbtutor assign` leaves it (no student yet)."""
    from rbtutor.course import api

    course.mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    with api(course).gradebook as gradebook:
        gradebook.add_assignment("problem01")
        gradebook.add_notebook("problem01", "problem01")
        gradebook.add_grade_cell("p1_auto", "problem01", "problem01", max_score=AUTO, cell_type="code")
        gradebook.add_grade_cell("p1_written", "problem01", "problem01", max_score=WRITTEN, cell_type="markdown")


class LmsCourse:
    """A course connected to the platform: keys registered, services known, roster read, class graded."""

    def __init__(self, platform, folder: Path, gradebook_url: str | None, students: int, template: Path | None = None):
        from rbtutor.course import api
        from rbtutor.lms.keys import ToolKeys

        self.platform, self.course = platform, folder / "course"
        if template is None or gradebook_url:
            new_course(self.course)
        else:  # a copy of a course made before: nbgrader makes a new gradebook in 5 to 20 s (alembic)
            shutil.copytree(template, self.course)
        (self.course / "course.toml").write_text(lms_toml(platform))
        self.keys = ToolKeys(self.course / "secrets" / "lti").ensure()
        platform.register_tool(oidc_login_url="http://127.0.0.1:9/hub/lti13/oauth_login", redirect_uris=[REDIRECT],
                               target_link_uri="http://127.0.0.1:9/hub/", jwks=self.keys.jwks())
        for number in range(3, students + 1):  # the platform starts with two students
            platform.add_member(f"stu-{number:04d}", f"Student Number{number}", f"s{number}@uni.example",
                                f"s{number:02d}", [LEARNER])
        platform.add_resource_link("rl-p1", "Problem 1", custom={"assignment": "problem01"})
        self.url = gradebook_url
        self.grader = api(self.course)
        self.launch(INSTRUCTOR)
        status, out, err = run_lms(self.course, "roster")
        assert status == 0, out + err

    def launch(self, sub: str) -> lti.Launch:
        """A launch of ``sub`` checked by the tool, its service URLs kept (as the hub's log-in does)."""
        from rbtutor.lms.outbox import remember_services
        from rbtutor.lms.store import connect

        state, nonce = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
        form = self.platform.id_token(sub, "rl-p1", redirect_uri=REDIRECT, nonce=nonce, state=state)
        rules = lti.LaunchRules(issuer=self.platform.issuer, client_ids=(self.platform.client_id,),
                                deployment_ids=(self.platform.deployment_id,), jwks_url=self.platform.jwks_url)
        checked = lti.read_launch(form["id_token"], rules, state=form["state"], expected_state=state,
                                  expected_nonce=nonce, keys=lti.jwks_client(self.platform.jwks_url))
        assert remember_services(connect(self.gradebook_url).engine, checked.claims)
        return checked

    @property
    def gradebook_url(self) -> str:
        return self.url or f"sqlite:///{self.course / 'gradebook.db'}"

    def grade(self, scores: dict[str, tuple[float, float | None]], late: dict[str, float] | None = None) -> None:
        """Set each student's (autograded, written) score of problem01; None: the written part still to grade."""
        from nbgrader.api import MissingEntry

        with self.grader.gradebook as gradebook:
            for student, (auto, written) in scores.items():
                try:
                    submission = gradebook.find_submission("problem01", student)
                except MissingEntry:  # the first grading
                    submission = gradebook.add_submission("problem01", student)
                auto_grade = gradebook.find_grade("p1_auto", "problem01", "problem01", student)
                auto_grade.auto_score, auto_grade.needs_manual_grade = auto, False
                hand = gradebook.find_grade("p1_written", "problem01", "problem01", student)
                hand.manual_score, hand.needs_manual_grade = written, written is None
                submission.notebooks[0].late_submission_penalty = (late or {}).get(student, 0.0)
            gradebook.db.commit()

    def accounts(self) -> dict[str, str]:
        """{account: LMS user id} of the roster's learners."""
        from rbtutor.lms.store import connect

        return {u.account: u.sub for u in connect(self.gradebook_url).users() if LEARNER in u.roles}

    def received(self) -> tuple[dict, list]:
        """The platform's latest score of each user on problem01's line item, and every score posted."""
        store = self.platform.store()
        items = [number for number, item in store["line_items"].items() if item.get("resourceId") == "problem01"]
        assert len(items) == 1, store["line_items"]
        return store["scores"].get(items[0], {}), [p for p in store["score_posts"] if p["line_item"] == items[0]]


@pytest.fixture(autouse=True)
def course_keys(tmp_path, monkeypatch):
    """The tool keys are the test course's own, whatever a course hub set up on this machine holds."""
    monkeypatch.setenv("RBTUTOR_LMS_KEYS", str(tmp_path / "course" / "secrets" / "lti"))


@pytest.fixture(params=["sqlite", "postgresql"])
def gradebook_url(request, monkeypatch):
    """None for the course's SQLite file, or a fresh database on the test's PostgreSQL server."""
    if request.param == "sqlite":
        monkeypatch.delenv("RBTUTOR_GRADEBOOK", raising=False)
        return None
    server = request.getfixturevalue("postgres_server")
    url = server.create_database(f"lti_{uuid.uuid4().hex[:12]}")
    monkeypatch.setenv("RBTUTOR_GRADEBOOK", url)
    return url


@pytest.fixture(scope="module")
def template_course(tmp_path_factory):
    """A course with an SQLite gradebook, made once for the module's tests to copy."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("RBTUTOR_GRADEBOOK", raising=False)
        course = tmp_path_factory.mktemp("template") / "course"
        new_course(course)
    return course


@pytest.fixture
def small_class(lti_platform, tmp_path, monkeypatch, template_course):
    """Three students on SQLite, all graded: the faults' tests."""
    monkeypatch.delenv("RBTUTOR_GRADEBOOK", raising=False)
    course = LmsCourse(lti_platform, tmp_path, None, 3, template_course)
    course.grade({account: (5.0, 3.0) for account in course.accounts()})
    return course


def test_a_class_of_30_gets_pending_then_fully_graded_scores(lti_platform, tmp_path, gradebook_url, template_course):
    course = LmsCourse(lti_platform, tmp_path, gradebook_url, 30, template_course)
    accounts = course.accounts()
    assert len(accounts) == 30
    autos = {account: float(n % 7) for n, account in enumerate(sorted(accounts))}
    late = {sorted(accounts)[0]: 1.5}
    course.grade({a: (autos[a], None) for a in accounts}, late)

    started = time.perf_counter()
    status, out, err = release(course.course)
    seconds = time.perf_counter() - started
    assert status == 0, out + err
    print(f"\nrelease to scores in the platform, a class of 30 ({'PostgreSQL' if gradebook_url else 'SQLite'}): "
          f"{seconds:.2f} s")
    latest, posts = course.received()
    assert set(latest) == set(accounts.values())
    for account, sub in accounts.items():
        score = latest[sub]
        assert score["scoreGiven"] == pytest.approx(max(0.0, autos[account] - late.get(account, 0.0)))
        assert score["scoreMaximum"] == AUTO + WRITTEN
        assert (score["activityProgress"], score["gradingProgress"]) == ("Submitted", "PendingManual")
    first = {post["userId"]: post["timestamp"] for post in posts}

    course.grade({a: (autos[a], 2.0) for a in accounts}, late)  # the written parts graded
    status, out, err = release(course.course)
    assert status == 0, out + err
    latest, posts = course.received()
    for account, sub in accounts.items():
        assert latest[sub]["scoreGiven"] == pytest.approx(autos[account] + 2.0 - late.get(account, 0.0))
        assert (latest[sub]["activityProgress"], latest[sub]["gradingProgress"]) == ("Completed", "FullyGraded")
        assert latest[sub]["timestamp"] > first[sub]
    assert len(posts) == 60

    status, out, err = release(course.course)  # released again, nothing changed: nothing posted
    assert status == 0, out + err
    assert "0 new, 0 changed, 30 as before" in out
    assert len(course.received()[1]) == 60
    status, out, _ = run_lms(course.course, "status")
    assert status == 0
    assert [line.split() for line in out.splitlines()[:3]] == [
        ["assignment", "sent", "pending", "sending", "failed"], ["problem01", "30", "0", "0", "0"],
        ["all", "30", "0", "0", "0"]]


def test_an_outage_leaves_grades_pending_and_sync_sends_them_once(lti_platform, tmp_path, gradebook_url,
                                                                  template_course):
    course = LmsCourse(lti_platform, tmp_path, gradebook_url, 3, template_course)
    accounts = course.accounts()
    course.grade({a: (4.0, 4.0) for a in accounts})
    lti_platform.fault("503", count=1000, path="/ags/")
    status, out, err = release(course.course)
    assert status == 1
    assert "the platform did not answer" in err
    assert "`rbtutor lms sync` sends them later" in err
    status, out, _ = run_lms(course.course, "status")
    assert out.splitlines()[1].split() == ["problem01", "0", "3", "0", "0"]
    assert "answered 503" in out
    assert lti_platform.store()["score_posts"] == []

    status, out, err = run_lms(course.course, "sync")  # still down: nothing sent, nothing lost
    assert status == 1
    assert run_lms(course.course, "status")[1].splitlines()[1].split() == ["problem01", "0", "3", "0", "0"]
    lti_platform.clear_faults()
    status, out, err = run_lms(course.course, "sync")
    assert status == 0, out + err
    assert out.count(" sent ") == 3
    latest, posts = course.received()
    assert len(posts) == 3
    assert {s["scoreGiven"] for s in latest.values()} == {8.0}
    status, out, err = run_lms(course.course, "sync")  # nothing pending: nothing posted again
    assert status == 0
    assert len(course.received()[1]) == 3


def test_a_regrade_is_posted_with_a_newer_timestamp(small_class):
    status, out, err = release(small_class.course)
    assert status == 0, out + err
    accounts = small_class.accounts()
    student = sorted(accounts)[0]
    before, _ = small_class.received()
    small_class.grade({student: (6.0, 4.0)})
    from rbtutor.course.cli import main  # the feedback verb itself, which releases the grades too

    with contextlib.redirect_stdout(io.StringIO()) as said:
        status = main(["--root", str(small_class.course), "feedback"])
    assert status == 0, said.getvalue()
    assert "0 new, 1 changed, 2 as before" in said.getvalue()
    after, posts = small_class.received()
    assert len(posts) == 4
    assert after[accounts[student]]["scoreGiven"] == 10.0
    assert after[accounts[student]]["timestamp"] > before[accounts[student]]["timestamp"]


def test_the_hubs_sender_posts_what_was_queued(small_class):
    """``rbtutor lms sync --every SECONDS``, as the account holding the keys runs it: a round sends what is
    pending, a round with nothing pending says nothing."""
    from rbtutor.course.layout import CourseLayout
    from rbtutor.course.lms_cli import connection, keep_sending, lms_scores
    from rbtutor.lms.outbox import queue_grades

    layout = CourseLayout(small_class.course)
    link = connection(layout)
    queue_grades(link.store.engine, lms_scores(layout, link.store, link.issuer))
    out, err = io.StringIO(), io.StringIO()
    assert keep_sending(layout, 0.01, out, err, rounds=2) == 0
    assert out.getvalue().count(" sent ") == 3, out.getvalue() + err.getvalue()
    assert len(small_class.received()[1]) == 3
    status, _, err = run_lms(small_class.course, "sync", "--every", "0")
    assert status == 2
    assert "expected --every to be a positive number of seconds" in err


def test_429_with_retry_after_is_waited_for(small_class):
    small_class.platform.fault("429", count=1, path="/ags/")
    status, out, err = release(small_class.course)
    assert status == 0, out + err
    assert "answered 429; trying again in 1.0 s" in err  # the platform's Retry-After: 1
    assert len(small_class.received()[1]) == 3


@pytest.mark.parametrize(("fault", "said"), [
    ("malformed", "not JSON"), ("huge", "more than the 2097152 bytes accepted"),
    ("redirect", "redirected a GET from"),
])
def test_a_bad_line_items_reply_fails_the_rows_and_posts_nothing(small_class, fault, said):
    small_class.platform.fault(fault, count=3, path="/ags/")
    status, out, err = release(small_class.course)
    assert status == 1
    assert said in err
    store = small_class.platform.store()
    assert store["score_posts"] == []
    assert store["line_items"] == {}  # nothing created either
    assert run_lms(small_class.course, "status")[1].splitlines()[1].split() == ["problem01", "0", "0", "0", "3"]
    small_class.platform.clear_faults()
    status, out, err = run_lms(small_class.course, "sync")  # the failed are tried again
    assert status == 0, out + err
    assert len(small_class.received()[1]) == 3


def test_the_lms_user_id_comes_from_the_lms_records_never_the_gradebook(small_class):
    """A student row whose lms_user_id names another user (written by hand, or by a notebook with the
    grader's rights) changes nothing: the score goes to the user the launch and the roster recorded."""
    accounts = small_class.accounts()
    first, second = sorted(accounts)[:2]
    with small_class.grader.gradebook as gradebook:
        gradebook.find_student(first).lms_user_id = accounts[second]
        gradebook.db.commit()
    small_class.grade({first: (1.0, 0.0), second: (6.0, 4.0)})
    status, out, err = release(small_class.course)
    assert status == 0, out + err
    latest, _ = small_class.received()
    assert latest[accounts[first]]["scoreGiven"] == 1.0
    assert latest[accounts[second]]["scoreGiven"] == 10.0


def test_a_student_the_lms_does_not_know_is_failed_not_posted(small_class):
    with small_class.grader.gradebook as gradebook:
        gradebook.add_student("walkin")  # a hub account made by hand: no LMS user
        gradebook.db.commit()
    small_class.grade({"walkin": (6.0, 4.0)})
    status, out, err = release(small_class.course)
    assert status == 1
    assert "no LMS user id for walkin" in err
    assert len(small_class.received()[1]) == 3
    status, out, _ = run_lms(small_class.course, "status")
    assert out.splitlines()[1].split() == ["problem01", "3", "0", "0", "1"]
    assert "walkin: no LMS user id" in out


def test_the_line_item_is_the_deep_linked_one_and_its_maximum_follows_the_points(small_class):
    """A line item the platform made (from deep linking) with resourceId problem01 is used, not a new one;
    its scoreMaximum is put right when it differs from the assignment's points."""
    small_class.platform.add_resource_link("rl-dl", "Problem 1 (placed)", custom={"assignment": "problem01"},
                                           line_item={"label": "Problem 1", "scoreMaximum": 7,
                                                      "resourceId": "problem01"})
    small_class.platform.add_resource_link("rl-other", "Problem 2", custom={"assignment": "problem02"},
                                           line_item={"label": "Problem 2", "scoreMaximum": 5,
                                                      "resourceId": "problem02"})
    status, out, err = release(small_class.course)
    assert status == 0, out + err
    items = small_class.platform.store()["line_items"]
    assert len(items) == 2
    assert items["1"]["scoreMaximum"] == AUTO + WRITTEN
    assert items["2"]["scoreMaximum"] == 5  # another assignment's item: untouched, no score in it
    store = small_class.platform.store()
    assert set(store["scores"]) == {"1"}


def test_two_senders_at_once_post_each_grade_once(small_class):
    """``rbtutor lms sync`` run twice at the same moment (two terminals): rows are claimed before they are sent."""
    from concurrent.futures import ThreadPoolExecutor

    from rbtutor.course.layout import CourseLayout
    from rbtutor.course.lms_cli import connection, lms_scores
    from rbtutor.lms.outbox import queue_grades

    link = connection(CourseLayout(small_class.course))
    queue_grades(link.store.engine, lms_scores(CourseLayout(small_class.course), link.store, link.issuer))
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: run_lms(small_class.course, "sync"), range(2)))
    assert [status for status, _, _ in results] == [0, 0]
    assert len(small_class.received()[1]) == 3


def test_remembered_services_never_follow_another_context(small_class):
    from rbtutor.lms.outbox import recall_services, remember_services
    from rbtutor.lms.store import connect

    engine = connect(small_class.gradebook_url).engine
    before = recall_services(engine, small_class.platform.issuer)
    claims = dict(small_class.launch(INSTRUCTOR).claims)
    claims["https://purl.imsglobal.org/spec/lti/claim/context"] = {"id": "another-course"}
    claims["https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"] = {
        "lineitems": small_class.platform.url + "/ags/another-course/lineitems"}
    assert not remember_services(engine, claims)
    assert recall_services(engine, small_class.platform.issuer) == before


def test_the_lms_verb_has_help_an_example_and_refuses_in_one_line(tmp_path):
    from rbtutor.cli import main

    with contextlib.redirect_stdout(io.StringIO()) as out, pytest.raises(SystemExit) as done:
        main(["lms", "--help"])
    assert done.value.code == 0
    assert out.getvalue().startswith("usage: rbtutor lms")
    assert "example: rbtutor lms status" in out.getvalue()
    for args, said in [(["lms", "push"], "invalid choice: 'push'"), (["lms", "sync", "--assignment"], "expected one")]:
        with contextlib.redirect_stderr(io.StringIO()) as err, pytest.raises(SystemExit) as exit_:
            main(args)
        assert exit_.value.code == 2
        assert err.getvalue().startswith("rbtutor lms")
        assert said in err.getvalue()
        assert len(err.getvalue().strip().splitlines()) == 1
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    status, out, err = run_lms(course, "status")
    assert status == 2
    assert err.startswith("rbtutor lms: ")
    assert "has no [lms] section" in err
    assert len(err.strip().splitlines()) == 1
