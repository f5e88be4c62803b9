"""The test side of the LTI test platform: start it under uvicorn, and talk to it.

:func:`serve` starts :mod:`lti_platform.app` in a subprocess on a socket bound here to a free port of
127.0.0.1 (handed to uvicorn with ``--fd``, so no other process can take the port in between),
waits until ``/health`` answers (polling, with a deadline) and stops it afterwards; the platform's
log goes to ``test-artifacts/``. :class:`Platform` wraps its URLs and test routes.
"""

from __future__ import annotations

import contextlib
import html
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

import httpx

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE.parents[1] / "test-artifacts"
INSTRUCTOR, STUDENT1, STUDENT2 = "inst-7c1e", "stu-2b9d", "stu-4f03"
ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
LEARNER, INSTRUCTOR_ROLE = ROLE + "Learner", ROLE + "Instructor"
TEACHING_ASSISTANT = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"


class Platform:
    """One running platform: its URLs (as an LMS shows them to an administrator) and its test routes.

    Attributes: ``url`` (the issuer), ``client_id``, ``deployment_id``, ``auth_url``, ``token_url``,
    ``jwks_url``, ``lineitems_url``, ``memberships_url``, ``deep_link_return_url``, ``context``
    (``id``, ``label``, ``title``). Members at the start: :data:`INSTRUCTOR`, :data:`STUDENT1`,
    :data:`STUDENT2` (their ``sub``; see :meth:`members` for names, e-mails, logins and roles).
    """

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, timeout=30)
        self.refresh()

    def refresh(self) -> None:
        config = self.http.get("/test/config").raise_for_status().json()
        self.issuer, self.client_id, self.deployment_id = config["issuer"], config["client_id"], config["deployment_id"]
        for key in ("auth_url", "token_url", "jwks_url", "lineitems_url", "memberships_url", "deep_link_return_url",
                    "context"):
            setattr(self, key, config[key])

    def reset(self) -> None:
        """The course as it started: three members, no links, items, scores, faults or tool."""
        self.http.post("/test/reset").raise_for_status()
        self.refresh()

    def register_tool(self, *, oidc_login_url: str, redirect_uris: list[str], target_link_uri: str,
                      jwks_url: str | None = None, jwks: dict | None = None, deep_link_uri: str | None = None,
                      client_id: str | None = None, deployment_id: str | None = None) -> None:
        """The tool's registration, as an administrator enters it in the LMS (a JWKS URL or the keys themselves)."""
        tool = {"oidc_login_url": oidc_login_url, "redirect_uris": redirect_uris, "target_link_uri": target_link_uri,
                "jwks_url": jwks_url, "jwks": jwks, "deep_link_uri": deep_link_uri or target_link_uri,
                "client_id": client_id or self.client_id, "deployment_id": deployment_id or self.deployment_id}
        self.http.post("/test/tool", json=tool).raise_for_status()
        self.refresh()

    def members(self) -> list[dict]:
        """Every member as NRPS shows them: user_id, name, email, lis_person_sourcedid, roles, status."""
        return self.http.get("/test/config").raise_for_status().json()["members"]

    def add_member(self, user_id: str, name: str, email: str, login: str, roles=(LEARNER,),
                   status: str = "Active") -> dict:
        """Add (or replace) a member; ``status`` Active or Inactive."""
        body = {"user_id": user_id, "name": name, "email": email, "login": login, "roles": list(roles),
                "status": status}
        return self.http.post("/test/members", json=body).raise_for_status().json()

    def remove_member(self, user_id: str) -> None:
        """Take a member out of the course (the LMS no longer lists them)."""
        self.http.delete(f"/test/members/{user_id}").raise_for_status()

    def add_resource_link(self, link_id: str, title: str, *, target_link_uri: str | None = None,
                          custom: dict | None = None, line_item: dict | None = None) -> None:
        """A link in the course (``custom`` goes into the launch's custom claim), with a line item if given."""
        body = {"id": link_id, "title": title, "custom": custom or {}, "line_item": line_item}
        if target_link_uri:
            body["target_link_uri"] = target_link_uri
        self.http.post("/test/resource_links", json=body).raise_for_status()

    def store(self) -> dict:
        """What the platform received: scores (line item -> user -> last score), score_posts, line_items,
        deep_links and every service request (method, path, status)."""
        return self.http.get("/test/store").raise_for_status().json()

    def fault(self, kind: str, count: int = 1, path: str = "/") -> None:
        """Answer the next ``count`` service calls under ``path`` with ``kind``: 503, 429, malformed, huge, redirect."""
        self.http.post("/test/faults", json={"kind": kind, "count": count, "path": path}).raise_for_status()

    def clear_faults(self) -> None:
        self.http.delete("/test/faults").raise_for_status()

    def course_page(self, sub: str) -> str:
        """The URL of a member's course page (the links a browser clicks)."""
        return f"{self.url}/course/{sub}"

    def launch_url(self, sub: str, resource_link: str | None = None, *, tweak: str = "",
                   deep_link: bool = False) -> str:
        """Where a click starts a launch: the platform redirects to the tool's OIDC initiation URL.

        ``tweak`` (comma separated) breaks the id_token: expired, not_yet_valid, unknown_key,
        other_audience, other_deployment, no_roles, old_version."""
        query = {"user": sub, "tweak": tweak}
        query.update({"deep_link": "1"} if deep_link else {"resource_link": resource_link})
        return f"{self.url}/launch?{urlencode(query)}"

    def id_token(self, sub: str, resource_link: str | None = None, *, redirect_uri: str, nonce: str, state: str,
                 tweak: str = "", deep_link: bool = False) -> dict:
        """Play the tool's half of the OIDC flow without a browser; return the form the platform posts.

        Follows the launch to the tool's initiation URL (not requested: its query is read), sends
        the authorization request with ``nonce``, ``state`` and ``redirect_uri``, and returns
        ``{"id_token", "state", "action", "login"}`` (``login`` holds the initiation parameters)."""
        start = self.http.get(self.launch_url(sub, resource_link, tweak=tweak, deep_link=deep_link))
        if start.status_code not in (302, 303, 307):
            raise RuntimeError(f"launch did not redirect: {start.status_code} {start.text[:300]}")
        login = {key: values[0] for key, values in parse_qs(urlparse(start.headers["location"]).query).items()}
        answer = self.http.get("/auth", params={
            "response_type": "id_token", "scope": "openid", "response_mode": "form_post", "prompt": "none",
            "client_id": login.get("client_id", self.client_id), "redirect_uri": redirect_uri,
            "login_hint": login["login_hint"], "lti_message_hint": login["lti_message_hint"], "nonce": nonce,
            "state": state})
        if answer.status_code != 200:
            raise RuntimeError(f"authorization refused: {answer.status_code} {answer.text[:300]}")
        fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', answer.text))
        action = re.search(r'action="([^"]*)"', answer.text).group(1)
        return {"id_token": html.unescape(fields["id_token"]), "state": html.unescape(fields["state"]),
                "action": html.unescape(action), "login": login}


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def wait_until_healthy(url: str, process: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the LTI platform exited ({process.returncode}); log {log}:\n"
                               + log.read_text(errors="replace")[-3000:])
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the LTI platform did not answer within {timeout:.0f} s; log {log}")


@contextlib.contextmanager
def serve(log_name: str = "lti-platform"):
    """Run the platform in a subprocess on 127.0.0.1; yield a :class:`Platform`; stop it afterwards."""
    ARTIFACTS.mkdir(exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    log = ARTIFACTS / f"{log_name}-{worker}.log"
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env = {**os.environ, "LTI_PLATFORM_URL": url,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, "-m", "uvicorn", "--factory", "lti_platform.app:create_app", "--fd", str(sock.fileno()),
            "--log-level", "info", "--no-access-log" if os.environ.get("LTI_PLATFORM_QUIET") else "--access-log"]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, pass_fds=[sock.fileno()],
                                   stdin=subprocess.DEVNULL)
    sock.close()  # the child holds its own copy
    try:
        wait_until_healthy(url, process, log)
        yield Platform(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
