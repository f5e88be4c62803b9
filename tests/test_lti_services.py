"""The LMS's services from the tool's side, against a real LTI platform (lti1p3platform under uvicorn,
tests/lti_platform): the client's token and limits (rbtutor.lms.services), the roster from NRPS
(rbtutor.lms.roster, ``rbtutor lms roster``) and deep linking (rbtutor.lms.deep_link).

The course is the one tests/test_lti_outbox.py builds (keys registered with the platform, service
URLs from a verified launch, roster read); the roster's tests run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import secrets

import httpx
import pytest
from lti_platform import INSTRUCTOR, LEARNER, STUDENT1, STUDENT2, platform_fixture, platform_server_fixture  # noqa: F401
from postgres import postgres_server  # noqa: F401 - the fixture
from test_lti_outbox import (  # noqa: F401 - three of them are fixtures
    REDIRECT,
    LmsCourse,
    course_keys,
    gradebook_url,
    release,
    run_lms,
    template_course,
)

from rbtutor.lms import launch as lti
from rbtutor.lms.services import (
    SCOPE_MEMBERSHIPS,
    ServiceClient,
    ServiceError,
    ServiceLimits,
    origin,
)

MEMBERS = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"


def client_of(course: LmsCourse, **limits) -> ServiceClient:
    from rbtutor.course.layout import CourseLayout
    from rbtutor.course.lms_cli import connection

    link = connection(CourseLayout(course.course))
    return ServiceClient(link.platform, course.keys, ServiceLimits(**limits))


def requests_to(platform, prefix: str) -> int:
    return sum(1 for r in platform.store()["requests"] if r["path"].startswith(prefix))


def students(course: LmsCourse) -> dict:
    """{student id: (first name, last name, email, lms_user_id)} of nbgrader's students."""
    with course.grader.gradebook as gradebook:
        return {s.id: (s.first_name, s.last_name, s.email, s.lms_user_id) for s in gradebook.students}


def lms_users(course: LmsCourse) -> dict:
    from rbtutor.lms.store import connect

    return {u.account: (u.sub, u.status) for u in connect(course.gradebook_url).users()}


@pytest.fixture
def small_course(lti_platform, tmp_path, monkeypatch, template_course):  # noqa: F811
    monkeypatch.delenv("RBTUTOR_GRADEBOOK", raising=False)
    return LmsCourse(lti_platform, tmp_path, None, 2, template_course)


# --------------------------------------------------------------------------- the client


def test_a_token_is_asked_for_once_and_kept(small_course):
    platform = small_course.platform
    before = requests_to(platform, "/token")
    with client_of(small_course) as client:
        for _ in range(3):
            reply = client.get(platform.memberships_url, [SCOPE_MEMBERSHIPS], MEMBERS, "the memberships")
            assert len(reply.data["members"]) == 3
    assert requests_to(platform, "/token") == before + 1


def test_the_client_sends_nothing_to_another_origin(small_course):
    platform = small_course.platform
    with client_of(small_course) as client:
        with pytest.raises(ServiceError, match="not one of the platform's origins"):
            client.get("http://localhost:9/nrps/memberships", [SCOPE_MEMBERSHIPS], MEMBERS, "x")
        with pytest.raises(ServiceError, match="expected https for a platform that is not on this machine"):
            client.get("http://lms.example/nrps", [SCOPE_MEMBERSHIPS], MEMBERS, "x")
        platform.fault("redirect", path="/nrps/")
        with pytest.raises(ServiceError, match=r"redirected a GET from .* to http://lms-elsewhere\.invalid/"):
            client.get(platform.memberships_url, [SCOPE_MEMBERSHIPS], MEMBERS, "the memberships")
    assert origin("https://lms.example/a") == "https://lms.example:443"


def test_a_busy_or_down_platform_is_tried_again_within_bounds(small_course):
    platform = small_course.platform
    waits = []
    with client_of(small_course, first_backoff=0.05) as client:
        client.on_wait = lambda why, wait: waits.append((why, wait))
        platform.fault("503", count=2, path="/nrps/")
        assert client.get(platform.memberships_url, [SCOPE_MEMBERSHIPS], MEMBERS, "the memberships").status == 200
        assert [why for why, _ in waits] == ["the memberships: the platform answered 503"] * 2
        assert 0.025 <= waits[0][1] <= 0.05 <= waits[1][1] <= 0.1  # doubled each time, jittered down to half
        platform.fault("503", count=10, path="/nrps/")
        client.limits = ServiceLimits(attempts=3, first_backoff=0.05)
        with pytest.raises(ServiceError, match=r"answered 503 \(gave up after 3 tries\)") as refused:
            client.get(platform.memberships_url, [SCOPE_MEMBERSHIPS], MEMBERS, "the memberships")
        assert refused.value.transient
        platform.clear_faults()
        platform.fault("429", count=1, path="/nrps/")  # Retry-After: 1, more than the time left
        client.limits = ServiceLimits(total_seconds=0.5)
        with pytest.raises(ServiceError, match="answered 429"):
            client.get(platform.memberships_url, [SCOPE_MEMBERSHIPS], MEMBERS, "the memberships")


# --------------------------------------------------------------------------- the roster


def test_the_roster_adds_marks_inactive_and_keeps_work(lti_platform, tmp_path, gradebook_url, template_course):  # noqa: F811
    course = LmsCourse(lti_platform, tmp_path, gradebook_url, 2, template_course)
    assert students(course) == {
        "skovalevskaya": ("Sofia", "Kovalevskaya", "sofia.kovalevskaya@uni.example", STUDENT1),
        "jlagrange": ("Joseph", "Lagrange", "joseph.lagrange@uni.example", STUDENT2)}
    assert lms_users(course)["leuler"] == (INSTRUCTOR, "active")  # the instructor: an LMS user, no student
    course.grade({"jlagrange": (5.0, 3.0)})

    lti_platform.add_member("stu-new1", "Emmy Noether", "emmy.noether@uni.example", "enoether", [LEARNER])
    lti_platform.add_member(STUDENT2, "Joseph Lagrange", "joseph.lagrange@uni.example", "jlagrange", [LEARNER],
                            status="Inactive")
    status, out, err = run_lms(course.course, "roster", "--write", str(tmp_path / "roster.csv"))
    assert status == 0, out + err
    assert "1 new" in out
    assert "1 marked inactive (jlagrange)" in out
    assert students(course)["enoether"] == ("Emmy", "Noether", "emmy.noether@uni.example", "stu-new1")
    assert lms_users(course)["jlagrange"] == (STUDENT2, "inactive")
    assert "jlagrange" in students(course)  # marked, not deleted: the student and the work stay
    with course.grader.gradebook as gradebook:
        assert gradebook.find_submission("problem01", "jlagrange").score == 8.0
    roster = (tmp_path / "roster.csv").read_text().splitlines()
    assert roster[0] == "student_id,name,email,canvas_user_id,blackboard_username,sis_user_id,sis_login_id," \
                        "section,lms_user_id"
    assert sorted(line.split(",")[0] for line in roster[1:]) == ["enoether", "skovalevskaya"]

    lti_platform.reset()  # the course as it started: the new member is no longer listed
    course.platform.register_tool(oidc_login_url="http://127.0.0.1:9/l", redirect_uris=[REDIRECT],
                                  target_link_uri="http://127.0.0.1:9/hub/", jwks=course.keys.jwks())
    status, out, err = run_lms(course.course, "roster")
    assert status == 0, out + err
    assert lms_users(course)["enoether"] == ("stu-new1", "inactive")
    assert lms_users(course)["jlagrange"] == (STUDENT2, "active")  # listed as Active again
    assert "enoether" in students(course)


def test_the_written_roster_serves_the_file_exports(small_course, tmp_path):
    from rbtutor.course.export import export_lms, load_roster

    small_course.grade({"skovalevskaya": (6.0, 4.0), "jlagrange": (5.0, None)})
    status, out, err = run_lms(small_course.course, "roster", "--write", str(tmp_path / "roster.csv"))
    assert status == 0, out + err
    roster = load_roster(tmp_path / "roster.csv")
    assert {(e.student_id, e.sis_user_id, e.lms_user_id) for e in roster.entries} == {
        ("skovalevskaya", "skovalevskaya", STUDENT1), ("jlagrange", "jlagrange", STUDENT2)}
    summary = export_lms(small_course.grader, "canvas", tmp_path / "roster.csv", tmp_path / "c.csv")
    assert summary.students == 2
    assert not summary.not_in_roster


def test_roster_pages_are_followed(small_course):
    from rbtutor.lms.roster import fetch_members

    platform = small_course.platform
    before = requests_to(platform, "/nrps/")
    with client_of(small_course) as client:
        members = fetch_members(client, platform.memberships_url + "?limit=1")
    assert [m.user_id for m in members] == [INSTRUCTOR, STUDENT1, STUDENT2]
    assert requests_to(platform, "/nrps/") - before == 3


@pytest.mark.parametrize(("fault", "said"), [
    ("malformed", "is not JSON"), ("huge", "more than the 2097152 bytes accepted"),
    ("redirect", "redirected a GET from"),
])
def test_a_bad_roster_reply_is_refused_and_changes_nothing(small_course, fault, said):
    small_course.platform.add_member("stu-new2", "Ada Lovelace", "ada@uni.example", "alovelace", [LEARNER])
    before = (students(small_course), lms_users(small_course))
    small_course.platform.fault(fault, path="/nrps/")
    status, _, err = run_lms(small_course.course, "roster")
    assert status == 1
    assert err.startswith("rbtutor lms: the course's memberships: ")
    assert said in err
    assert len(err.strip().splitlines()) == 1
    assert (students(small_course), lms_users(small_course)) == before


def test_a_member_with_a_wrong_field_refuses_the_whole_reply():
    from rbtutor.lms.roster import parse_member

    good = {"user_id": "u1", "roles": [LEARNER], "name": "Ann Lee"}
    assert parse_member(good, "member 1").name == "Ann Lee"
    for broken, said in [({**good, "user_id": 7}, "user_id to be str"), ({**good, "roles": "Learner"}, "roles"),
                         ({**good, "status": "Gone"}, "status among"), ({**good, "email": "a\nb"}, "one line"),
                         ({**good, "user_id": "x" * 300}, "1 to 255 characters")]:
        with pytest.raises(ValueError, match=said):
            parse_member(broken, "member 1")


# --------------------------------------------------------------------------- deep linking


def deep_link_request(course: LmsCourse) -> dict:
    """An instructor's deep-linking launch from the platform, checked by the tool: its claims."""
    state, nonce = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
    platform = course.platform
    form = platform.id_token(INSTRUCTOR, redirect_uri=REDIRECT, nonce=nonce, state=state, deep_link=True)
    rules = lti.LaunchRules(issuer=platform.issuer, client_ids=(platform.client_id,),
                            deployment_ids=(platform.deployment_id,), jwks_url=platform.jwks_url)
    return lti.read_launch(form["id_token"], rules, state=form["state"], expected_state=state, expected_nonce=nonce,
                           keys=lti.jwks_client(platform.jwks_url)).claims


def release_problem01(course: LmsCourse) -> None:
    """problem01 in nbgrader's exchange, as `rbtutor release problem01` leaves it."""
    outbound = course.course / "exchange" / "rbtutor" / "outbound" / "problem01"
    outbound.mkdir(parents=True)
    (outbound / "problem01.ipynb").write_text("{}")


def test_a_deep_link_places_a_released_assignment_with_its_points(small_course):
    from rbtutor.course import api
    from rbtutor.lms import deep_link as dl

    request = dl.DeepLinkRequest.from_claims(deep_link_request(small_course))
    assert dl.released_assignments(api(small_course.course)) == []  # nothing released: nothing to place
    release_problem01(small_course)
    choices = dl.released_assignments(api(small_course.course))
    assert choices == [dl.Choice("problem01", "problem01", 10.0)]
    page = dl.picker_page(choices, "/hub/lti13/deep_link", "t1", "x1")
    assert 'name="assignment" value="problem01"' in page
    assert "10 points" in page
    token = dl.response_token(small_course.keys, request, [dl.pick(choices, "problem01")])
    answer = httpx.post(request.return_url, data={"JWT": token})  # what the return page's form posts
    assert answer.status_code == 200, answer.text
    placed = small_course.platform.store()["deep_links"][-1]
    assert len(placed) == 1
    assert placed[0]["lineItem"] == {"scoreMaximum": 10.0, "label": "problem01", "resourceId": "problem01",
                                     "tag": "rbtutor"}
    assert placed[0]["custom"] == {"assignment": "problem01"}
    assert f'action="{request.return_url}"' in dl.return_page(request.return_url, token)

    small_course.grade({"skovalevskaya": (6.0, 4.0)})  # the grades go to the item the platform made from it
    status, out, err = release(small_course.course)
    assert status == 0, out + err
    store = small_course.platform.store()
    assert len(store["line_items"]) == 1
    assert store["line_items"]["1"]["resourceLinkId"] == placed[0]["resource_link"]
    assert store["scores"]["1"][STUDENT1]["scoreGiven"] == 10.0


def test_deep_linking_refuses_what_it_cannot_answer(small_course):
    from rbtutor.lms import deep_link as dl

    claims = deep_link_request(small_course)
    learner = {**claims, dl.ROLES: [LEARNER]}
    with pytest.raises(dl.DeepLinkError, match="only an instructor"):
        dl.DeepLinkRequest.from_claims(learner)
    other = {**claims, dl.SETTINGS: {**claims[dl.SETTINGS], "accept_types": ["file"]}}
    with pytest.raises(dl.DeepLinkError, match="accepts file here, not ltiResourceLink"):
        dl.DeepLinkRequest.from_claims(other)
    request = dl.DeepLinkRequest.from_claims(claims)
    with pytest.raises(dl.DeepLinkError, match="'problem09' is not a released assignment"):
        dl.pick([dl.Choice("problem01", "problem01", 10.0)], "problem09")
    picks = dl.PendingPicks()
    ticket = picks.put(request, "leuler")
    with pytest.raises(dl.DeepLinkError, match="expired or was used"):
        picks.take(ticket, "skovalevskaya")  # another account's ticket
    assert picks.take(ticket, "leuler") == request
    with pytest.raises(dl.DeepLinkError, match="expired or was used"):
        picks.take(ticket, "leuler")  # once only
