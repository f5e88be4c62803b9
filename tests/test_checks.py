"""Instant answer checks (rbtutor.course.checks): the service as a real process behind a real JupyterHub.

A small JupyterHub (dummy log-in, no single-user servers) is started for this module with the
check service as a managed service, configured by the same ``service_entry`` as hub/jupyterhub_config.py,
and configurable-http-proxy from hub/node_modules. Tokens of two students and the instructor are
made through the hub's REST API, so every request below is authenticated by the hub itself.
The course folder switches per-student variants on; checks are switched off for problem10.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from rbtutor.course.checks import (
    SERVICE_NAME,
    AttemptLog,
    CheckCore,
    CheckRefused,
    printed_forms,
    read_settings,
    reveals,
    service_entry,
    statistics,
    statistics_csv,
)
from rbtutor.problems.variants import load_course_data, student_key

ROOT = Path(__file__).resolve().parents[1]
PROXY = ROOT / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
JUPYTERHUB = Path(sys.executable).parent / "jupyterhub"
ADMIN_TOKEN = "h11-test-admin-token-" + "0" * 20
COURSE_DATA = 'variants: {per_student: true, salt: "test-checks"}\n'
CHECKS_YAML = """\
default: {enabled: true, per_hour: 10}
stuck_after: 3
assignments:
  problem10: {enabled: false}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _course(root: Path) -> Path:
    (root / "exercises").mkdir(parents=True)
    (root / "exercises" / "problem_data.yaml").write_text(COURSE_DATA)
    (root / "exercises" / "checks.yaml").write_text(CHECKS_YAML)
    return root


def _call(url, method="GET", body: bytes | None = None, token: str | None = None, headers=None):
    """(status, text) of one HTTP request."""
    request = urllib.request.Request(url, data=body, method=method, headers={
        **({"Authorization": f"token {token}"} if token else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    missing = [reason for absent, reason in (
        (not PROXY.exists(), "configurable-http-proxy is not installed (`make test` runs npm ci in hub/; needs npm)"),
        (not JUPYTERHUB.exists(), "jupyterhub is not installed in this environment (extra 'hub')"))
        if absent]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the check service under a hub: {missing[0]}", pytrace=False)
        pytest.skip(missing[0])
    root = tmp_path_factory.mktemp("checkhub")
    course = _course(root / "course")
    port, hub_port, service_port, api_port = (_free_port() for _ in range(4))
    service, roles = service_entry(course, sys.executable, url=f"http://127.0.0.1:{service_port}")
    roles[1]["groups"] = ["formgrade-rbtutor", "nbgrader-rbtutor"]
    config = root / "jupyterhub_config.py"
    config.write_text(f"""
c = get_config()
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.command = [{str(PROXY)!r}]
c.ConfigurableHTTPProxy.pid_file = {str(root / 'proxy.pid')!r}
c.JupyterHub.db_url = "sqlite:///{root / 'hub.sqlite'}"
c.JupyterHub.cookie_secret_file = {str(root / 'cookie_secret')!r}
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {{"student1", "student2", "instructor", "reference"}}
c.JupyterHub.load_groups = {{"formgrade-rbtutor": {{"users": ["instructor"]}},
                             "nbgrader-rbtutor": {{"users": ["student1", "student2", "reference"]}}}}
c.JupyterHub.services = [{service!r}, {{"name": "tester", "api_token": {ADMIN_TOKEN!r}}}]
c.JupyterHub.load_roles = {roles!r} + [{{"name": "tester", "services": ["tester"],
                                        "scopes": ["admin:users", "tokens"]}}]
""")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    log = (root / "hub.log").open("wb")
    process = subprocess.Popen([str(JUPYTERHUB), "-f", str(config)], cwd=root, env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    service_url = f"{base}/services/{SERVICE_NAME}/"
    deadline = time.monotonic() + 120  # safety net: start-up takes a few seconds
    while True:
        if process.poll() is not None:
            raise AssertionError("the test hub exited:\n" + (root / "hub.log").read_text()[-3000:])
        try:
            if _call(service_url)[0] == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            process.terminate()
            raise AssertionError("the check service did not answer:\n" + (root / "hub.log").read_text()[-3000:])
        time.sleep(0.3)
    tokens = {}
    for user in ("student1", "student2", "instructor", "reference"):
        status, text = _call(f"{base}/hub/api/users/{user}/tokens", "POST", token=ADMIN_TOKEN,
                             body=json.dumps({"scopes": [f"access:services!service={SERVICE_NAME}"],
                                              "note": "test_checks"}).encode())
        assert status == 201, text
        tokens[user] = json.loads(text)["token"]
    yield {"base": base, "url": service_url, "check": service_url + "api/check", "tokens": tokens,
           "course": course, "log": root / "hub.log",
           # the service itself, without the hub's proxy in between
           "direct": f"http://127.0.0.1:{service_port}/services/{SERVICE_NAME}/api/check"}
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
    log.close()


def _key(student: str, problem: int) -> dict:
    return student_key(_course_data(), student, [problem])


def _course_data() -> dict:
    import yaml

    from rbtutor.problems.variants import settings

    data = load_course_data(None)
    data["variants"] = yaml.safe_load(COURSE_DATA)["variants"]
    settings(data)
    return data


def _check(hub, user, answer_id, value, **extra):
    body = json.dumps({"id": answer_id, "value": value, **extra}).encode()
    status, text = _call(hub["check"], "POST", body=body, token=hub["tokens"][user],
                         headers={"Content-Type": "application/json"})
    return status, json.loads(text) if text.startswith("{") else text


def _printed_by_cli(student: str, problem: int) -> dict[str, list[str]]:
    """Each answer's value as ``python -m rbtutor key`` prints it for this student (json and table)."""
    data_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"rbtutor-checks-data-{os.getpid()}.yaml"
    data_file.write_text(COURSE_DATA)
    try:
        def run(fmt):
            return subprocess.run([sys.executable, "-m", "rbtutor", "key", "--data", str(data_file), "--student",
                                   student, "--problem", str(problem), "--format", fmt],
                                  capture_output=True, text=True, check=True, cwd=ROOT).stdout
        as_json, table = json.loads(run("json")), run("table")
    finally:
        data_file.unlink()
    out = {}
    for answer_id, entry in as_json.items():
        forms = set(printed_forms(entry["value"])) if not isinstance(entry["value"], str) else set()
        line = next(line for line in table.splitlines() if line.startswith(answer_id + " "))
        forms |= {t.strip("[],").lstrip("-") for t in line.split()[2:] if sum(c.isdigit() for c in t) >= 2}
        out[answer_id] = sorted(forms)
    return out


def _assert_no_value(text: str, forms: list[str]) -> None:
    import re

    for form in forms:
        assert not re.search(r"(?<![\d.])" + re.escape(form) + r"(?!\d)", text), f"{form!r} is in {text!r}"


# --------------------------------------------------------------------------- through the hub


def test_verdicts_right_sign_degrees_near_miss(hub):
    k3, k8 = _key("student1", 3), _key("student1", 8)
    K, phi = k3["p3.b.K"].value, k3["p3.c.phi_rad"].value
    cases = [("p3.b.K", K, True, None), ("p3.b.K", -K, False, "sign"),
             ("p3.c.phi_rad", float(np.degrees(phi)), False, "degrees"),
             ("p8.d.flip_interval", k8["p8.d.flip_interval"].value * 1.005, False, "wrong_value"),
             ("p8.d.flip_interval", k8["p8.d.flip_interval"].value, True, None)]
    forms = {**_printed_by_cli("student1", 3), **_printed_by_cli("student1", 8)}
    for answer_id, value, passed, diagnosis in cases:
        status, reply = _check(hub, "student1", answer_id, value)
        assert status == 200, reply
        assert (reply["passed"], reply["diagnosis"]) == (passed, diagnosis), (answer_id, reply)
        assert set(reply) == {"passed", "message", "diagnosis", "checks_left"}
        for other in forms.values():  # no reference value of the problem, in any printed format
            _assert_no_value(json.dumps(reply), other)
            _assert_no_value(reply["message"], other)


def test_answer_within_a_second(hub):
    value = _key("student1", 3)["p3.d.K"].value
    _check(hub, "student1", "p3.d.K", value)  # the first one may compute the key
    start = time.monotonic()
    status, reply = _check(hub, "student1", "p3.d.K", value)
    elapsed = time.monotonic() - start
    assert status == 200, reply
    assert reply["passed"], reply
    assert elapsed < 1.0, f"a check took {elapsed:.2f} s"


def test_rate_limit_and_exam_switch(hub):
    phi = _key("student2", 3)["p3.c.phi_deg"].value
    for attempt in range(10):
        status, reply = _check(hub, "student2", "p3.c.phi_deg", phi * (1.5 + attempt / 100))
        assert status == 200, reply
        assert reply["checks_left"] == 9 - attempt
    status, reply = _check(hub, "student2", "p3.c.phi_deg", phi)  # the 11th, and right: refused all the same
    assert status == 429, reply
    assert "10 checks an hour" in reply["error"]
    status, reply = _check(hub, "student2", "p3.b.K", _key("student2", 3)["p3.b.K"].value)
    assert status == 200, "the limit is per part"
    assert reply["passed"], "the limit is per part"
    value = _key("student2", 10)["p10.b.displacement"].value
    status, reply = _check(hub, "student2", "p10.b.displacement", value)
    assert status == 403, reply
    assert "switched off for problem10" in reply["error"], reply


def test_identity_comes_from_the_token_only(hub):
    mine, theirs = _key("student2", 3)["p3.b.K"].value, _key("student1", 3)["p3.b.K"].value
    assert abs(mine - theirs) > 1e-3 * abs(mine), "the two students must have different keys"
    status, reply = _check(hub, "student2", "p3.b.K", theirs)
    assert status == 200, "student2 is judged against student2's key"
    assert not reply["passed"], "student2 is judged against student2's key"
    status, reply = _check(hub, "student2", "p3.b.K", theirs, student="student1")
    assert status == 400, "a student named in the body is refused"
    for query in ("?user=student1", "?student=student1"):
        body = json.dumps({"id": "p3.b.K", "value": theirs}).encode()
        status, text = _call(hub["check"] + query, "POST", body=body, token=hub["tokens"]["student2"],
                             headers={"X-Forwarded-User": "student1", "X-Remote-User": "student1",
                                      "Content-Type": "application/json"})
        assert status == 200, text
        assert not json.loads(text)["passed"], text
    json_type = {"Content-Type": "application/json"}
    status, text = _call(hub["check"], "POST", body=json.dumps({"id": "p3.b.K", "value": theirs}).encode(),
                         token="forged-" + hub["tokens"]["student1"][7:], headers=json_type)
    assert status == 401, text
    assert "hub token" in json.loads(text)["error"], text
    status, text = _call(hub["check"], "POST", body=json.dumps({"id": "p3.b.K", "value": theirs}).encode(),
                         headers=json_type)
    assert status == 401, text
    assert "hub token" in json.loads(text)["error"], text


def test_a_reserved_name_cannot_check(hub):
    """A hub account named like the course's own variant ('reference') is refused, not judged against it."""
    book_value = _key("reference", 3)["p3.b.K"].value
    status, reply = _check(hub, "reference", "p3.b.K", book_value)
    assert status == 403, reply
    assert "reserved" in reply["error"], reply
    log = AttemptLog(hub["course"] / "checks" / "attempts.jsonl").records()
    assert not [r for r in log if r["student"] == "reference"], "a refused account leaves no judged attempt"


MALFORMED = [
    (b"{", 400, "not valid JSON"), (b"", 400, "not valid JSON"), (b"\xff\xfe", 400, "not valid JSON"),
    (b'{"id": "p3.b.K", "value": NaN}', 400, "not valid JSON"),
    (b'{"id": "p3.b.K", "value": -Infinity}', 400, "not valid JSON"),
    (b'{"id": "p3.b.K", "value": 1e999}', 400, "not valid JSON"),
    (b'{"id": "p3.b.K", "value": [' + b"[" * 20000 + b"]" * 20000 + b"]}", 400, "not valid JSON"),
    (b"[" * 30000 + b"]" * 30000, 400, "not valid JSON"),
    (b'{"id": "p3.b.K", "value": ' + b"9" * 5000 + b"}", 400, "not valid JSON"),
    (b'{"id": "p3.b.K"}', 400, "expected a JSON object"), (b"[1, 2]", 400, "expected a JSON object"),
    (b'"p3.b.K"', 400, "expected a JSON object"), (b"null", 400, "expected a JSON object"),
    (b'{"id": "p3.b.K", "value": 1, "student": "student2"}', 400, "expected a JSON object"),
    (b'{"id": 3, "value": 1}', 400, "answer id as text"), (b'{"id": ["p3.b.K"], "value": 1}', 400, "answer id as text"),
    (b'{"id": "p3.z.nothing", "value": 1}', 404, "unknown answer id"),
    (b'{"id": "p42.a.K", "value": 1}', 404, "unknown answer id"),
    (b'{"id": "../../etc/passwd", "value": 1}', 404, "unknown answer id"),
    (b'{"id": "p3.b.K", "value": "a lot"}', 400, "expects a number"),
    (b'{"id": "p3.b.K", "value": true}', 400, "expects a number"),
    (b'{"id": "p3.b.K", "value": null}', 400, "expects a number"),
    (b'{"id": "p3.b.K", "value": {"a": 1}}', 400, "expects a number"),
    (b'{"id": "p3.b.K", "value": [[[[[[1]]]]]]}', 400, "expects a number"),
    (b'{"id": "p3.b.K", "value": ' + b"1" + b"0" * 400 + b"}", 400, "expects a number"),
    (b'{"id": "p1.d.strongest_pair", "value": 3}', 400, "expects a short text"),
    (b'{"id": "p1.d.strongest_pair", "value": "' + b"x" * 300 + b'"}', 400, "expects a short text"),
    (b'{"id": "p3.b.K", "value": [' + b"1.0, " * 20000 + b"1.0]}", 413, "larger than 64 kB"),
]


@pytest.mark.parametrize("through", ["proxy", "direct"])
def test_malformed_and_oversized_requests(hub, through):
    """Every malformed request gets its 4xx and reason, through the hub's proxy and from the service itself.

    The oversized body (100 kB) is read to its end before the 413 is sent, so the proxy passes the reply
    on whatever its speed (it used to see the connection closed under it and answer 503).
    """
    url, token = hub["check" if through == "proxy" else "direct"], hub["tokens"]["student1"]
    before = len(AttemptLog(hub["course"] / "checks" / "attempts.jsonl").records())
    for body, status, words in MALFORMED:
        got, text = _call(url, "POST", body=body, token=token, headers={"Content-Type": "application/json"})
        assert got == status, (body[:60], got, text)
        assert words in json.loads(text)["error"], text
    for media in ("text/plain", "application/x-www-form-urlencoded", ""):
        got, text = _call(url, "POST", body=b'{"id": "p3.b.K", "value": 1}', token=token,
                          headers={"Content-Type": media} if media else {})
        assert got == 415, (media, got, text)
        assert "application/json" in json.loads(text)["error"], (media, got, text)
    got, text = _call(url, "GET", token=token)
    assert got == 405, text
    assert "error" in json.loads(text), text
    after = len(AttemptLog(hub["course"] / "checks" / "attempts.jsonl").records())
    assert after == before, "a malformed request is not an attempt: it is neither logged nor counted"
    status, reply = _check(hub, "student1", "p3.d.phi_deg", _key("student1", 3)["p3.d.phi_deg"].value)
    assert status == 200, "the service still answers"
    assert reply["passed"], "the service still answers"
    assert "Traceback" not in hub["log"].read_text(), "no request made the service fail"


def test_a_body_beyond_the_drain_limit_is_refused_at_once(hub):
    """A body announced longer than DRAIN_LIMIT is refused before any of it is read (asked of the service
    itself: through a proxy the closed connection may become the proxy's own 502/503, see the module
    docstring). The client sends the headers only and waits: the 413 must come without the body, which is
    what "at once" means. (Sending the body as well made the test a race: the service closes the connection
    with the body still arriving, and the reset could reach the client before it read the 413.)"""
    from urllib.parse import urlsplit

    from rbtutor.course.checks import DRAIN_LIMIT

    url = urlsplit(hub["direct"])
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.putrequest("POST", url.path)
        for name, value in (("Authorization", f"token {hub['tokens']['student1']}"),
                            ("Content-Type", "application/json"), ("Content-Length", str(DRAIN_LIMIT + 1))):
            connection.putheader(name, value)
        connection.endheaders()  # and no body
        response = connection.getresponse()
        got, text = response.status, response.read().decode()
    finally:
        connection.close()
    assert got == 413, (got, text[:200])
    assert "larger than 64 kB" in json.loads(text)["error"], (got, text[:200])


def test_statistics_for_the_instructor_only(hub):
    K = _key("student1", 3)["p3.b.K"].value
    for _ in range(3):
        _check(hub, "student1", "p3.c.phi_rad", 123.0)
    status, text = _call(hub["url"] + "stats?format=csv", token=hub["tokens"]["instructor"])
    assert status == 200, text
    rows = {line.split(",")[0]: line for line in text.splitlines()[1:]}
    assert rows["p3.b.K"].startswith("p3.b.K,"), text
    assert "sign: 1" in rows["p3.b.K"]
    assert "student1" in rows["p3.c.phi_rad"], "student1 has 3 failed checks and no pass on p3.c.phi_rad"
    status, page = _call(hub["url"] + "stats", token=hub["tokens"]["instructor"])
    assert status == 200
    assert "<table>" in page
    assert "p3.b.K" in page
    _assert_no_value(page, [f"{K:.6g}", repr(K)])
    status, _ = _call(hub["url"] + "stats?format=csv", token=hub["tokens"]["student1"])
    assert status == 403
    log = AttemptLog(hub["course"] / "checks" / "attempts.jsonl").records()
    assert {r["student"] for r in log} >= {"student1", "student2"}
    assert {"time", "student", "id", "passed", "diagnosis"} <= set(log[-1])


def test_check_helper_in_the_notebook(hub):
    """The helper cell's check() (as rendered into the notebooks) on and off the hub, and while grading."""
    from rbtutor.course.render import helpers_source

    value = -_key("student1", 3)["p3.c.phi_deg"].value
    script = helpers_source() + f"\ncheck('p3.c.phi_deg', {value!r})\ncheck('p3.c.phi_deg', object())\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "RBTUTOR_"))}

    def run(extra):
        return subprocess.run([sys.executable, "-c", script], env={**env, **extra}, capture_output=True,
                              text=True, timeout=60)

    on_hub = run({"JUPYTERHUB_API_TOKEN": hub["tokens"]["student1"], "RBTUTOR_CHECK_URL": hub["url"]})
    assert on_hub.returncode == 0, on_hub.stderr
    assert "p3.c.phi_deg: not right yet. The size is right but the sign is not" in on_hub.stdout, on_hub.stdout
    assert "should be a number" in on_hub.stdout
    _assert_no_value(on_hub.stdout, _printed_by_cli("student1", 3)["p3.c.phi_deg"])
    alone = run({})
    assert alone.returncode == 0, alone.stderr
    assert alone.stderr == "", alone.stderr
    assert "checks are not available here" in alone.stdout
    assert "JUPYTERHUB_API_TOKEN" in alone.stdout
    public = run({"JUPYTERHUB_API_TOKEN": hub["tokens"]["student1"], "JUPYTERHUB_PUBLIC_HUB_URL": hub["base"] + "/",
                  "JUPYTERHUB_BASE_URL": "/"})
    assert "p3.c.phi_deg: not right yet" in public.stdout, public.stdout
    dead = run({"JUPYTERHUB_API_TOKEN": "x", "RBTUTOR_CHECK_URL": "http://127.0.0.1:9/"})
    assert dead.returncode == 0, dead.stdout
    assert "did not answer" in dead.stdout, dead.stdout
    on_hub_env = {"JUPYTERHUB_API_TOKEN": hub["tokens"]["student1"], "RBTUTOR_CHECK_URL": hub["url"]}
    for quiet, words in (({"RBTUTOR_AUTOGRADING": "1"}, "while the course grades"),
                         ({"NBGRADER_EXECUTION": "autograde"}, "while the course grades"),
                         ({"NBGRADER_EXECUTION": "validate"}, "during Validate")):
        ran = run({**on_hub_env, **quiet})
        lines = ran.stdout.splitlines()
        assert ran.returncode == 0, ran.stdout
        assert len(lines) == 2, ran.stdout
        assert all(words in line for line in lines), ran.stdout


def _attempts(hub, student: str, answer_id: str) -> int:
    return sum(1 for r in AttemptLog(hub["course"] / "checks" / "attempts.jsonl").records()
               if r["student"] == student and r["id"] == answer_id)


def test_validate_spends_no_checks(hub, tmp_path, monkeypatch):
    """nbgrader's Validate runs a notebook whose cells call check(): no check reaches the service.

    The same notebook run as the student runs it (a kernel without NBGRADER_EXECUTION) does spend
    one check per call, so the test would see a Validate that spends them.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook
    from nbgrader.validator import Validator

    from rbtutor.course.render import helpers_source

    value = -_key("student1", 2)["p2.b.a_O"].value
    notebook = new_notebook(cells=[new_code_cell(helpers_source()),
                                   new_code_cell(f"check('p2.b.a_O', {value.tolist()!r})"),
                                   new_code_cell(f"check('p2.b.a_O', {(value * 2).tolist()!r})")],
                            metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                     "language": "python"}})
    path = tmp_path / "checked.ipynb"
    nbformat.write(notebook, path)
    for name in [n for n in os.environ if n.startswith(("JUPYTERHUB_", "RBTUTOR_", "NBGRADER_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", hub["tokens"]["student1"])
    monkeypatch.setenv("RBTUTOR_CHECK_URL", hub["url"])

    before = _attempts(hub, "student1", "p2.b.a_O")
    result = Validator().validate(str(path))
    assert not result.get("failed"), result
    assert _attempts(hub, "student1", "p2.b.a_O") == before, "Validate spent checks"

    ran = NotebookClient(nbformat.read(path, as_version=4), kernel_name="python3", timeout=120).execute()
    printed = "".join(o.get("text", "") for cell in ran.cells[1:] for o in cell.outputs)
    assert _attempts(hub, "student1", "p2.b.a_O") == before + 2, printed
    assert "p2.b.a_O: not right yet. The size is right but the sign is not" in printed, printed


# --------------------------------------------------------------------------- the core, directly


def test_settings_are_checked(tmp_path):
    course = _course(tmp_path / "c")
    assert read_settings(course)["assignments"]["problem10"] == {"enabled": False, "per_hour": 10}
    (course / "exercises" / "checks.yaml").write_text("default: {per_hour: ten}\n")
    with pytest.raises(ValueError, match="per_hour"):
        read_settings(course)
    (course / "exercises" / "checks.yaml").write_text("assignment: {}\n")
    with pytest.raises(ValueError, match="unknown keys"):
        read_settings(course)
    (course / "exercises" / "checks.yaml").unlink()
    assert read_settings(course)["default"] == {"enabled": True, "per_hour": 10}


def test_limit_survives_a_restart_and_the_window_slides(tmp_path):
    course = _course(tmp_path / "c")
    now = [1.0e9]
    core = CheckCore(course, clock=lambda: now[0])
    key = _key("alice", 1)
    answer_id = next(iter(key))
    body = json.dumps({"id": answer_id, "value": np.asarray(key[answer_id].value).tolist()}).encode()
    for _ in range(10):
        core.check("alice", body)
    again = CheckCore(course, clock=lambda: now[0])  # a restarted service reads the log
    with pytest.raises(CheckRefused) as refused:
        again.check("alice", body)
    assert refused.value.status == 429
    now[0] += 3601
    assert again.check("alice", body)["passed"]


def test_leak_guard_finds_printed_forms():
    value = 2335291.2
    assert reveals("the key says 2.335e+06 here", value) == "2.335e+06"
    assert reveals("about 2335291.2 N m", value)
    assert reveals("The sign is right but the size is about 5 % too large.", value) is None
    assert reveals("Some entries do not agree (counting from 1): (1, 2), (2, 3)", [[0.5, 2.0], [3.0, 4.0]]) is None


def test_statistics_count_and_stuck():
    records = [{"student": "a", "id": "p3.b.K", "epoch": i, "passed": False, "diagnosis": "sign", "refused": None}
               for i in range(3)]
    records += [{"student": "b", "id": "p3.b.K", "epoch": 5, "passed": True, "diagnosis": None, "refused": None},
                {"student": "b", "id": "p3.b.K", "epoch": 6, "passed": None, "diagnosis": None, "refused": "limit"}]
    (part,) = statistics(records, stuck_after=3)
    assert (part.checks, part.passes, part.refused, part.diagnoses, part.stuck) == (4, 1, 1, {"sign": 3}, ["a"])
    assert "p3.b.K,4,1,1,sign: 3,a" in statistics_csv([part])
