"""The personalising Fetch service (rbtutor.course.fetch_service) and the students' Fetch (hub/rbtutor_fetch.py).

Without a hub: the request parser refuses every malformed body with a reason; released
notebooks are read only when every folder on the way and the file are the instructors' (no
link, no foreign owner, not writable by others); a student gets their own numbers, reserved
ids none; and the students' Fetch writes what the service returns, or leaves no copy behind
when it fails. ``tests/test_hub.py`` runs both on the hub, with real accounts and tokens.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import selectors
import shutil
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import nbformat
import pytest

from rbtutor.course.fetch_service import MAX_BODY, FetchCore, FetchRefused, parse_request, read_released
from rbtutor.course.render import data_source
from rbtutor.problems.variants import load_course_data, variant

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "exercises" / "problem03" / "problem03.ipynb"
sys.path.insert(0, str(ROOT / "hub"))


def body(**fields) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize(("raw", "status", "words"), [
    (b"{", 400, "does not parse"),
    (b"\xff\xfe", 400, "does not parse"),
    (b"[]", 400, "got a list"),
    (body(assignment="problem03"), 400, "missing: ['notebook']"),
    (body(assignment="problem03", notebook="problem03.ipynb", student="student2"), 400, "unknown: ['student']"),
    (body(assignment="../outbound", notebook="problem03.ipynb"), 400, "assignment name"),
    (body(assignment="", notebook="problem03.ipynb"), 400, "assignment name"),
    (body(assignment=["problem03"], notebook="problem03.ipynb"), 400, "assignment name"),
    (body(assignment="problem03", notebook="../problem04/problem04.ipynb"), 400, "notebook path"),
    (body(assignment="problem03", notebook="/etc/passwd.ipynb"), 400, "notebook path"),
    (body(assignment="problem03", notebook="a/./b.ipynb"), 400, "notebook path"),
    (body(assignment="problem03", notebook="problem03.py"), 400, "notebook path"),
    (body(assignment="problem03", notebook="a/b/c/d/e.ipynb"), 400, "notebook path"),
    (body(assignment="problem03", notebook=7), 400, "as text, got a int"),
    (b" " * (MAX_BODY + 1), 413, "larger than"),
])
def test_malformed_requests_are_refused_with_a_reason(raw, status, words):
    with pytest.raises(FetchRefused) as refused:
        parse_request(raw)
    assert refused.value.status == status, refused.value.message
    assert words in refused.value.message, refused.value.message


def test_a_wellformed_request():
    assert parse_request(body(assignment="problem03", notebook="sub/problem03.ipynb")) == \
        ("problem03", ["sub", "problem03.ipynb"])


@pytest.fixture
def exchange(tmp_path):
    """An exchange course folder with problem03 released by the current user (the releaser)."""
    outbound = tmp_path / "exchange" / "rbtutor" / "outbound"
    (outbound / "problem03").mkdir(parents=True)
    for folder in (tmp_path / "exchange" / "rbtutor", outbound, outbound / "problem03"):
        folder.chmod(0o755)
    shutil.copy(SOURCE, outbound / "problem03" / "problem03.ipynb")
    (outbound / "problem03" / "problem03.ipynb").chmod(0o644)
    return outbound


def refused(outbound, notebook="problem03.ipynb", assignment="problem03") -> FetchRefused:
    with pytest.raises(FetchRefused) as caught:
        read_released(outbound, assignment, notebook.split("/"), frozenset({os.getuid()}))
    return caught.value


def test_released_notebooks_are_read_only_when_they_are_the_instructors(exchange):
    mine = frozenset({os.getuid()})
    assert read_released(exchange, "problem03", ["problem03.ipynb"], mine) == SOURCE.read_bytes()
    assert refused(exchange, "other.ipynb").status == 404
    assert refused(exchange, assignment="problem04").status == 404
    # a link planted where a notebook or a folder is expected
    (exchange / "problem03" / "linked.ipynb").symlink_to(exchange / "problem03" / "problem03.ipynb")
    assert refused(exchange, "linked.ipynb").status == 409
    (exchange / "problem05").symlink_to(exchange / "problem03")
    assert refused(exchange, assignment="problem05").status == 409
    # a file others may change
    (exchange / "problem03" / "problem03.ipynb").chmod(0o666)
    assert "changed by others" in refused(exchange).message
    (exchange / "problem03" / "problem03.ipynb").chmod(0o644)
    exchange.chmod(0o777)
    assert "outbound folder may be changed by others" in refused(exchange).message
    exchange.chmod(0o755)
    # a folder in place of the notebook, a fifo
    (exchange / "problem03" / "dir.ipynb").mkdir()
    assert refused(exchange, "dir.ipynb").status == 409
    os.mkfifo(exchange / "problem03" / "pipe.ipynb")
    assert "not a regular file" in refused(exchange, "pipe.ipynb").message


def test_files_of_another_owner_are_not_taken(exchange):
    if os.geteuid() != 0:
        pytest.skip("giving a file another owner needs root")
    planted = exchange / "problem03" / "problem03.ipynb"
    os.chown(planted, 65534, 65534)
    assert "belongs to uid 65534, not to an instructor" in refused(exchange).message
    os.chown(planted, 0, 0)  # root's release is trusted
    assert read_released(exchange, "problem03", ["problem03.ipynb"], frozenset({os.getuid()}))


def core_for(exchange, tmp_path, per_student=True) -> FetchCore:
    data_file = tmp_path / "problem_data.yaml"
    data_file.write_text(f"variants: {{per_student: {str(per_student).lower()}, salt: test-fetch-course-salt}}\n")
    return FetchCore(exchange, data_file, frozenset({os.getuid()}))


def data_cell_of(nb: dict) -> str:
    cells = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "problem_data"]
    assert len(cells) == 1, f"{len(cells)} data cells"
    return "".join(cells[0]["source"])


def test_each_student_gets_their_own_numbers_and_reserved_ids_none(exchange, tmp_path):
    core = core_for(exchange, tmp_path)
    data = load_course_data(core.data_file)
    request = body(assignment="problem03", notebook="problem03.ipynb")
    cells = {s: data_cell_of(core.personalised(s, request)) for s in ("student1", "student2")}
    for student, text in cells.items():
        assert text == data_source(3, variant(data, student)), student
    assert cells["student1"] != cells["student2"]
    assert data_cell_of(json.loads(SOURCE.read_text())) not in cells.values()
    for reserved in ("reference", "instructor", "Reference", "", "a/b", "*"):
        with pytest.raises(FetchRefused) as caught:
            core.personalised(reserved, request)
        assert caught.value.status == 403, caught.value.message
        assert "expected a student id" in caught.value.message, caught.value.message


def test_without_variants_the_released_notebook_comes_back(exchange, tmp_path):
    core = core_for(exchange, tmp_path, per_student=False)
    nb = core.personalised("student1", body(assignment="problem03", notebook="problem03.ipynb"))
    assert data_cell_of(nb) == data_cell_of(json.loads(SOURCE.read_text()))


#: one entry whose anchors and aliases stand for tens of thousands of items (9 ** 5 in the last list)
ALIAS_BOMB = ("problem03: {due: 2030-03-01T12:00:00+01:00, extensions: [&a [x, x, x, x, x, x, x, x, x],\n"
              "  &b [*a, *a, *a, *a, *a, *a, *a, *a, *a], &c [*b, *b, *b, *b, *b, *b, *b, *b, *b],\n"
              "  &d [*c, *c, *c, *c, *c, *c, *c, *c, *c], [*d, *d, *d, *d, *d, *d, *d, *d, *d]]}\n")


@pytest.mark.parametrize("text", [
    ALIAS_BOMB,
    "problem03: {due: 9999-12-30T12:00:00+00:00, extensions: {student1: 99999999999d}}\n",
    "problem03: 0001-01-01T00:00:00+01:00\n",
])
def test_a_due_dates_file_is_read_within_bounds(exchange, tmp_path, caplog, text):
    """The service reads the instructor's due dates with the course's bounded loader: a file that
    expands or overflows leaves the date out, and the log says why in one short line."""
    from rbtutor.course.late import DUE_LINE

    due_dates = tmp_path / "due_dates.yaml"
    due_dates.write_text(text)
    core = core_for(exchange, tmp_path, per_student=False)
    core = FetchCore(core.outbound, core.data_file, core.releasers, due_dates)
    nb = core.personalised("student1", body(assignment="problem03", notebook="problem03.ipynb"))
    assert not any(DUE_LINE in "".join(c["source"]) for c in nb["cells"])
    (record,) = [r for r in caplog.records if "due dates left out" in r.getMessage()]
    assert len(record.getMessage()) < 400 + len(str(due_dates)), record.getMessage()[:2000]


def test_each_fetch_reads_the_due_dates_as_they_are_then(exchange, tmp_path):
    """No copy and no cache: an edit of the file reaches the next fetch of the same running service."""
    from rbtutor.course.late import DUE_LINE

    due_dates = tmp_path / "due_dates.yaml"
    core = core_for(exchange, tmp_path, per_student=False)
    core = FetchCore(core.outbound, core.data_file, core.releasers, due_dates)
    request = body(assignment="problem03", notebook="problem03.ipynb")
    seen = []
    for due in (None, "2030-03-01T12:00:00+01:00", "2030-03-08T12:00:00+01:00", None):
        if due is None:
            due_dates.unlink(missing_ok=True)
        else:
            due_dates.write_text(f"problem03:\n  due: {due}\n  extensions: {{20231234: 2d}}\n")
        for student in ("student1", "20231234"):
            lines = [x for c in core.personalised(student, request)["cells"] for x in "".join(c["source"]).split("\n")
                     if x.startswith(DUE_LINE)]
            seen.append((due, student, lines))
    for due, student, lines in seen:
        if due is None:
            assert lines == [], (student, lines)
            continue
        when = dt.datetime.fromisoformat(due) + (dt.timedelta(days=2) if student == "20231234" else dt.timedelta())
        assert len(lines) == 1, (due, student, lines)
        assert when.strftime("%d %B %Y, %H:%M") in lines[0], (due, student, lines)
        assert ("extended" in lines[0]) == (student == "20231234"), lines[0]


# --- the service as its own process, where the hub would start it
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_line(process: subprocess.Popen, seconds: float) -> str:
    """The first line ``process`` prints, waited for at most ``seconds`` (a dead process fails the test)."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=seconds):
            pytest.fail(f"the service printed nothing within {seconds} s")
    line = process.stdout.readline()
    if not line:
        pytest.fail(f"the service ended with status {process.wait(5)}: {process.stderr.read()[-2000:]}")
    return line


def test_main_serves_at_the_address_the_hub_gives(exchange, tmp_path):
    """``python -m rbtutor.course.fetch_service`` listens where JUPYTERHUB_SERVICE_URL says, under its prefix."""
    data_file = core_for(exchange, tmp_path).data_file
    port = _free_port()
    env = {**os.environ, "RBTUTOR_OUTBOUND": str(exchange), "RBTUTOR_COURSE_DATA": str(data_file),
           "RBTUTOR_RELEASERS": "", "JUPYTERHUB_API_TOKEN": "the-services-token",
           "JUPYTERHUB_SERVICE_PREFIX": "/services/rbtutor-fetch/",
           "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}"}
    process = subprocess.Popen([sys.executable, "-m", "rbtutor.course.fetch_service"], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        banner = _first_line(process, 60)
        assert banner == f"rbtutor-fetch: serving /services/rbtutor-fetch/ on http://127.0.0.1:{port} " \
                         f"from {exchange}\n"
        url = f"http://127.0.0.1:{port}/services/rbtutor-fetch/api/personalise"
        request = urllib.request.Request(url, data=body(assignment="problem03", notebook="problem03.ipynb"),
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=30)
        assert caught.value.code == 401
        assert json.loads(caught.value.read()) == {"error": "a hub token is needed (Authorization: token ...)"}
    finally:
        process.terminate()
        process.wait(30)
        process.stdout.close()
        process.stderr.close()


# --- the students' Fetch (hub/rbtutor_fetch.py) against a stand-in service
class _Service(BaseHTTPRequestHandler):
    replies: ClassVar[dict] = {}
    seen: ClassVar[list] = []

    def do_POST(self):
        length = int(self.headers["Content-Length"])
        _Service.seen.append((self.path, self.headers["Authorization"], json.loads(self.rfile.read(length))))
        status, reply = _Service.replies["next"]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(reply).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def stand_in():
    server = HTTPServer(("127.0.0.1", 0), _Service)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Service.seen.clear()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/services/rbtutor-fetch/"
    server.shutdown()


def fetch_as_student(exchange, home, url, monkeypatch):
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from rbtutor_fetch import ServiceFetchAssignment
    from traitlets.config import Config

    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-servers-token")
    monkeypatch.chdir(home)
    config = Config()
    config.Exchange.root = str(exchange.parents[1])
    config.Exchange.path_includes_course = False
    config.CourseDirectory.course_id = "rbtutor"
    config.CourseDirectory.assignment_id = "problem03"
    config.ServiceFetchAssignment.service_url = url
    coursedir = CourseDirectory(config=config)
    fetch = ServiceFetchAssignment(coursedir=coursedir, authenticator=Authenticator(config=config), config=config)
    fetch.assignment_dir = str(home)
    fetch.start()


def test_the_students_fetch_writes_what_the_service_returns(exchange, tmp_path, stand_in, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    personal = json.loads(SOURCE.read_text())
    personal["cells"][0]["source"] = "# the student's own version"
    _Service.replies["next"] = (200, {"notebook": personal})
    fetch_as_student(exchange, home, stand_in[1], monkeypatch)
    path, token, request = _Service.seen[0]
    assert path == "/services/rbtutor-fetch/api/personalise"
    assert token == "token the-servers-token"
    assert request == {"assignment": "problem03", "notebook": "problem03.ipynb"}
    written = nbformat.read(home / "problem03" / "problem03.ipynb", as_version=4)
    assert written.cells[0].source == "# the student's own version"


@pytest.mark.parametrize("reply", [(403, {"error": "expected a student id, got 'reference'"}), (200, {"nb": 1})])
def test_a_failed_personal_fetch_leaves_no_copy(exchange, tmp_path, stand_in, monkeypatch, reply):
    from nbgrader.exchange.abc.exchange import ExchangeError

    home = tmp_path / "home"
    home.mkdir()
    _Service.replies["next"] = reply
    with pytest.raises(ExchangeError):
        fetch_as_student(exchange, home, stand_in[1], monkeypatch)
    assert not (home / "problem03").exists(), "the released numbers must not stay behind as the student's copy"


def test_the_service_closes_a_connection_that_sends_no_request(tmp_path):
    """The fetch service is served with the same bounds as the check service (rbtutor.course.hub_service):
    a connection that sends nothing is closed after IDLE_TIMEOUT s, not held for tornado's hour."""
    from rbtutor.course.hub_service import IDLE_TIMEOUT

    with socket.socket() as probe:  # a free port on the loopback
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "outbound").mkdir()
    (tmp_path / "data.yaml").write_text("variants: {per_student: false}\n")
    env = {**os.environ, "RBTUTOR_OUTBOUND": str(tmp_path / "outbound"),
           "RBTUTOR_COURSE_DATA": str(tmp_path / "data.yaml"), "JUPYTERHUB_API_TOKEN": "unused",
           "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{port}",
           "JUPYTERHUB_SERVICE_PREFIX": "/services/rbtutor-fetch/"}
    service = subprocess.Popen([sys.executable, "-m", "rbtutor.course.fetch_service"], env=env, cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner = service.stdout.readline()  # printed once the socket listens
        assert "rbtutor-fetch: serving" in banner, banner
        with socket.create_connection(("127.0.0.1", port)) as idle:
            idle.settimeout(IDLE_TIMEOUT + 20)  # a safety net: without the bound recv() times out here
            assert idle.recv(1) == b""  # closed by the server, with nothing sent either way
    finally:
        service.terminate()
        service.wait(timeout=30)


# --- feedback fetched into plain folder names (hub/rbtutor_fetch.py: PlainFetchFeedback, PlainList)
SUBMITTED_AT = "2026-12-06 03:44:27.123456 UTC"


def _feedback_exchange(tmp_path):
    """An exchange after nbgrader's submit and release_feedback: the student's cached submission
    (with its secret) and the feedback page under the hash nbgrader's own fetch looks for."""
    from nbgrader.utils import notebook_hash

    root, cache, home = tmp_path / "exchange", tmp_path / "cache", tmp_path / "home"
    submission = cache / "rbtutor" / f"student1+problem03+{SUBMITTED_AT}"
    submission.mkdir(parents=True)
    (submission / "problem03.ipynb").write_text("{}")
    (submission / "submission_secret.txt").write_text("a-secret")
    (submission / "timestamp.txt").write_text(SUBMITTED_AT)
    feedback = root / "rbtutor" / "feedback"
    feedback.mkdir(parents=True)
    page = feedback / f"{notebook_hash(secret='a-secret', notebook_id='problem03')}.html"
    page.write_text("<p>your feedback</p>")
    (home / "problem03").mkdir(parents=True)
    return root, cache, home, page


def _exchange_app(kind, root, cache, home, monkeypatch):
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    monkeypatch.chdir(home)
    config = Config()
    config.Exchange.root, config.Exchange.cache = str(root), str(cache)
    config.Exchange.path_includes_course = False
    config.CourseDirectory.course_id = "rbtutor"
    config.CourseDirectory.assignment_id = "problem03"
    config.CourseDirectory.student_id = "student1"
    app = kind(coursedir=CourseDirectory(config=config), authenticator=Authenticator(config=config), config=config)
    app.assignment_dir = str(home)
    return app


def test_plain_folder_names_have_no_spaces_or_colons():
    from rbtutor_fetch import plain_folder

    assert plain_folder(SUBMITTED_AT) == "2026-12-06_03-44-27"
    assert plain_folder("yesterday at 5: sharp") == "yesterday_at_5_sharp"
    assert plain_folder("../..") == "feedback"


def test_feedback_is_fetched_into_a_plain_folder_and_listed_as_fetched(tmp_path, monkeypatch):
    from rbtutor_fetch import PlainFetchFeedback, PlainList

    root, cache, home, page = _feedback_exchange(tmp_path)
    _exchange_app(PlainFetchFeedback, root, cache, home, monkeypatch).start()
    fetched = home / "problem03" / "feedback" / "2026-12-06_03-44-27" / "problem03.html"
    assert sorted(p.name for p in (home / "problem03" / "feedback").iterdir()) == ["2026-12-06_03-44-27"]
    assert fetched.read_text() == "<p>your feedback</p>"

    lister = _exchange_app(PlainList, root, cache, home, monkeypatch)
    lister.cached = True
    [info] = lister.start()[0]["submissions"]
    assert info["has_local_feedback"], info
    assert not info["feedback_updated"], info
    assert info["local_feedback_path"] == str(fetched.parent)
    assert info["notebooks"][0]["local_feedback_path"] == str(fetched)

    page.write_text("<p>your feedback, regraded</p>")  # the instructor returned new feedback
    [info] = lister.start()[0]["submissions"]
    assert info["has_local_feedback"], info
    assert info["feedback_updated"], info


def test_nbgrader_s_own_list_would_not_see_the_plain_folder(tmp_path, monkeypatch):
    """Why PlainList exists: nbgrader's lister looks under the timestamp with spaces and colons."""
    from nbgrader.exchange.default import ExchangeList
    from rbtutor_fetch import PlainFetchFeedback

    root, cache, home, _ = _feedback_exchange(tmp_path)
    _exchange_app(PlainFetchFeedback, root, cache, home, monkeypatch).start()
    lister = _exchange_app(ExchangeList, root, cache, home, monkeypatch)
    lister.cached = True
    [info] = lister.start()[0]["submissions"]
    assert not info["has_local_feedback"]


# --- GET api/due-dates: the authenticated student's own due dates and the late policy
DUE_FILE = ("problem03:\n  due: 2030-03-01T12:00:00+01:00\n  extensions:\n    student2: 3d\n"
            "problem04: 2030-03-08T12:00:00+01:00\n")


def due_core(exchange, tmp_path, text: str | None = DUE_FILE, share: float = 10.0) -> FetchCore:
    """A core whose due-dates file holds ``text`` (none when None); problem03 is released, problem04 not."""
    due_dates = tmp_path / "due_dates.yaml"
    if text is not None:
        due_dates.write_text(text)
    core = core_for(exchange, tmp_path, per_student=False)
    return FetchCore(core.outbound, core.data_file, core.releasers, due_dates, share)


def test_the_due_dates_are_the_student_s_own_and_of_released_assignments_only(exchange, tmp_path):
    core = due_core(exchange, tmp_path, share=25.0)
    now = dt.datetime(2030, 2, 1, tzinfo=dt.UTC)
    mine, theirs = core.due_dates_of("student1", now), core.due_dates_of("student2", now)
    assert (mine["student"], mine["now"], mine["due_dates"]) == ("student1", now.isoformat(), True), mine
    assert mine["assignments"] == {"problem03": {"due": "2030-03-01T12:00:00+01:00",
                                                 "class_due": "2030-03-01T12:00:00+01:00", "extended": False}}
    assert theirs["assignments"]["problem03"] == {"due": "2030-03-04T12:00:00+01:00",
                                                  "class_due": "2030-03-01T12:00:00+01:00", "extended": True}
    assert "student2" not in json.dumps(mine), "another student's extension is in student1's reply"
    assert mine["late"]["percent_per_day"] == 25.0
    assert mine["late"]["rule"].startswith("25 % of a notebook's score"), mine["late"]
    (exchange / "problem04").mkdir(mode=0o755)  # released now: listed from the next request on
    assert sorted(core.due_dates_of("student1")["assignments"]) == ["problem03", "problem04"]


def test_without_a_due_dates_file_nothing_is_due(exchange, tmp_path):
    reply = due_core(exchange, tmp_path, text=None).due_dates_of("student1")
    assert (reply["due_dates"], reply["assignments"]) == (False, {}), reply
    no_file = core_for(exchange, tmp_path)  # a service started without RBTUTOR_DUE_DATES
    assert no_file.due_dates_of("student1")["due_dates"] is False


def test_due_dates_that_do_not_parse_are_left_out_and_logged(exchange, tmp_path, caplog):
    reply = due_core(exchange, tmp_path, text=ALIAS_BOMB).due_dates_of("student1")
    assert (reply["due_dates"], reply["assignments"]) == (None, {}), reply
    assert any("due dates not shown to student1" in r.getMessage() for r in caplog.records)


def test_reserved_accounts_have_no_due_dates(exchange, tmp_path):
    core = due_core(exchange, tmp_path)
    for reserved in ("reference", "instructor", ""):
        with pytest.raises(FetchRefused) as caught:
            core.due_dates_of(reserved)
        assert caught.value.status == 403, caught.value.message


def test_the_hub_passes_the_course_s_late_share(tmp_path):
    from rbtutor.course.fetch_service import course_late_share, service_entry

    assert course_late_share(tmp_path) == (10.0, "the default")
    (tmp_path / "course.toml").write_text("[late]\npercent_per_day = 20.0\n")
    assert course_late_share(tmp_path) == (20.0, str(tmp_path / "course.toml"))
    (tmp_path / "course.toml").write_text("[late]\npercent_per_day = 'many'\n")
    share, why = course_late_share(tmp_path)
    assert share == 10.0, share
    assert why.startswith("the default: course.toml does not load"), why
    service, _ = service_entry("/x/outbound", "/x/data.yaml", "python", "fetch", [], late_percent_per_day=20.0)
    assert service["environment"]["RBTUTOR_LATE_PERCENT_PER_DAY"] == "20.0"


def test_the_endpoint_answers_for_the_token_s_owner_whatever_the_request_names(exchange, tmp_path, monkeypatch):
    """``GET api/due-dates`` through the service's own tornado application: the hub says whose the
    token is (here a stand-in for the hub's answer); a student's name in the query, a header or a
    cookie changes nothing, and a request without a user is sent to the hub's log-in."""
    import asyncio

    from jupyterhub.services.auth import HubOAuth
    from tornado.httpclient import AsyncHTTPClient, HTTPClientError
    from tornado.httpserver import HTTPServer
    from tornado.netutil import bind_sockets

    from rbtutor.course.fetch_service import make_app

    owners = {"token-of-student1": "student1", "token-of-student2": "student2"}

    def user_for_token(self, token, use_cache=True, session_id="", *, sync=True):
        async def ask():
            name = owners.get(token)
            return {"name": name, "kind": "user", "scopes": ["access:services"]} if name else None
        return ask()

    monkeypatch.setattr(HubOAuth, "user_for_token", user_for_token)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-services-token")
    core = due_core(exchange, tmp_path)

    async def run():
        server = HTTPServer(make_app(core, "/services/rbtutor-fetch/"))
        sockets = bind_sockets(0, "127.0.0.1")
        server.add_sockets(sockets)
        url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}/services/rbtutor-fetch/api/due-dates"
        client = AsyncHTTPClient()
        replies = {}
        try:
            for label, query, headers in [
                ("own", "", {"Authorization": "token token-of-student1"}),
                ("named", "?student=student2&user=student2",
                 {"Authorization": "token token-of-student1", "X-Student": "student2",
                  "Cookie": "student=student2"}),
                ("other", "", {"Authorization": "token token-of-student2"}),
            ]:
                response = await client.fetch(url + query, headers=headers)
                replies[label] = json.loads(response.body)
            try:
                await client.fetch(url + "?student=student1", follow_redirects=False)
                replies["anonymous"] = "answered"
            except HTTPClientError as exc:
                replies["anonymous"] = exc.code
        finally:
            server.stop()
        return replies

    replies = asyncio.run(run())
    assert replies["own"]["student"] == "student1", replies
    assert replies["named"] == {**replies["own"], "now": replies["named"]["now"]}, replies
    assert replies["own"]["assignments"]["problem03"]["extended"] is False, replies
    assert replies["other"]["assignments"]["problem03"]["extended"] is True, replies
    assert replies["anonymous"] == 302, replies  # to the hub's OAuth log-in, never another student's dates
