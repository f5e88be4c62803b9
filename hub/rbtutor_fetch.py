"""The students' Fetch on the course hub: nbgrader's fetch, then each new notebook made personal by the hub.

A student's server has no rbtutor and cannot read the course data (its salt decides every
student's numbers), so it cannot write the student's own numbers into a fetched notebook.
:class:`ServiceFetchAssignment` is nbgrader's default fetch (``ExchangeFetchAssignment``: the
released folder copied from the exchange) followed by one step: every notebook the fetch has
just copied is replaced by the one the hub's personalising service returns for this server's
user (:mod:`rbtutor.course.fetch_service`, ``POST <service>/api/personalise`` with the
server's own ``JUPYTERHUB_API_TOKEN``). If that fails, a folder the fetch created is removed
again and Fetch reports why, so a student never works on the released (reference) numbers
by mistake.

``make hub`` copies this file into the students' server environment and the instructor's
(``hub/hubctl.py``), and names the class in the system-wide nbgrader configuration::

    c.ExchangeFactory.fetch_assignment = "rbtutor_fetch.ServiceFetchAssignment"

The service's address comes from ``RBTUTOR_FETCH_URL`` (set for every server by the hub's
configuration) or ``c.ServiceFetchAssignment.service_url``.

nbgrader names the folder of fetched feedback after the submission's time as it stores it,
``feedback/2026-12-06 03:44:27.123456 UTC/``: spaces and colons, which a student must quote
in a shell and some tools refuse. :class:`PlainFetchFeedback` writes the same files to
``feedback/2026-12-06_03-44-27/`` (:func:`plain_folder`), and :class:`PlainList`, the
Assignment List's lister, looks for them there, so "feedback already fetched" and "feedback
updated" keep working::

    c.ExchangeFactory.fetch_feedback = "rbtutor_fetch.PlainFetchFeedback"
    c.ExchangeFactory.list = "rbtutor_fetch.PlainList"

This module imports nbgrader and the standard library only: it runs where rbtutor is not.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeFetchFeedback, ExchangeList
from nbgrader.utils import notebook_hash
from traitlets import Unicode

#: seconds to wait for the service's reply for one notebook
TIMEOUT = 60


class ServiceFetchAssignment(ExchangeFetchAssignment):
    """nbgrader's fetch, then each fetched notebook replaced by the student's personal one from the hub."""

    service_url = Unicode(os.environ.get("RBTUTOR_FETCH_URL", ""),
                          help="the personalising service's URL (ending in /)").tag(config=True)

    def copy_files(self):
        existed = os.path.isdir(self.dest_path)
        before = set(self._notebooks()) if existed else set()
        super().copy_files()
        fetched = sorted(set(self._notebooks()) - before)
        try:
            for path in fetched:
                self._make_personal(path)
        except BaseException:
            if not existed:  # no half-personal copy stays behind
                shutil.rmtree(self.dest_path, ignore_errors=True)
            raise

    def _notebooks(self) -> list[Path]:
        return [p for p in Path(self.dest_path).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]

    def _make_personal(self, path: Path) -> None:
        relative = path.relative_to(self.dest_path).as_posix()
        notebook = self._ask(relative)
        partial = path.with_name(f".{path.name}.personal")
        partial.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(partial, path)
        self.log.info("Your own numbers written into %s", relative)

    def _ask(self, relative: str) -> dict:
        """The service's personal version of the released notebook ``relative``; ``self.fail`` otherwise."""
        token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
        if not self.service_url or not token:
            self.fail("Fetch needs the course hub's personalising service (RBTUTOR_FETCH_URL and "
                      "JUPYTERHUB_API_TOKEN are not set): fetch from your server on the hub")
        body = json.dumps({"assignment": self.coursedir.assignment_id, "notebook": relative}).encode()
        request = urllib.request.Request(self.service_url.rstrip("/") + "/api/personalise", data=body, method="POST",
                                         headers={"Authorization": f"token {token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                reply = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            self.fail(f"the course hub could not make {relative} personal: HTTP {exc.code}: {_reason(exc)}")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            self.fail(f"the course hub's personalising service did not answer for {relative}: {exc}")
        notebook = reply.get("notebook") if isinstance(reply, dict) else None
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            self.fail(f"expected a notebook from the personalising service for {relative}, got {str(reply)[:200]}")
        return notebook


def _reason(error: urllib.error.HTTPError) -> str:
    """The ``error`` field of a refusal's JSON body, else its first 200 characters."""
    text = error.read().decode("utf-8", errors="replace")
    try:
        return str(json.loads(text)["error"])
    except (ValueError, KeyError, TypeError):
        return text[:200] or error.reason


def plain_folder(timestamp: str) -> str:
    """The folder name of feedback for a submission made at ``timestamp`` (nbgrader's form,
    ``2026-12-06 03:44:27.123456 UTC``): ``2026-12-06_03-44-27``, in UTC. A timestamp in
    another form keeps its letters, digits, dots and dashes, the rest becoming ``_``."""
    try:
        when = dt.datetime.strptime(timestamp.strip(), "%Y-%m-%d %H:%M:%S.%f %Z")
    except ValueError:
        return re.sub(r"[^A-Za-z0-9.-]+", "_", timestamp).strip("_.") or "feedback"
    return when.strftime("%Y-%m-%d_%H-%M-%S")


def _md5(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.md5(handle.read()).hexdigest()  # the checksum nbgrader's own list compares


class PlainFetchFeedback(ExchangeFetchFeedback):
    """nbgrader's Fetch Feedback, into ``feedback/<plain_folder(time)>/`` instead of a folder named
    with spaces and colons."""

    def do_copy(self, src, dest):
        for notebook_id, timestamp, feedback_path in self.feedback_files:
            folder = os.path.join(dest, plain_folder(timestamp))
            os.makedirs(folder, exist_ok=True)
            target = os.path.join(folder, notebook_id + ".html")
            shutil.copy(feedback_path, target)
            self.log.info("Fetched feedback: %s", target)


class PlainList(ExchangeList):
    """nbgrader's Assignment List lister, which finds fetched feedback where :class:`PlainFetchFeedback`
    puts it."""

    def parse_assignments(self):
        assignments = super().parse_assignments()
        for group in assignments:  # a submitted assignment groups its submissions
            for info in group.get("submissions", [group]):
                if info.get("status") == "submitted" and info.get("notebooks"):
                    self._plain_feedback(info)
        return assignments

    def _plain_feedback(self, info: dict) -> None:
        """Recompute the local-feedback entries of one submitted assignment for the plain folder."""
        if self.path_includes_course:
            assignment_dir = os.path.join(self.assignment_dir, info["course_id"], info["assignment_id"])
        else:
            assignment_dir = os.path.join(self.assignment_dir, info["assignment_id"])
        folder = os.path.abspath(os.path.join(assignment_dir, "feedback", plain_folder(info["timestamp"])))
        secret_file = os.path.join(info["path"], "submission_secret.txt")
        secret = Path(secret_file).read_text() if os.path.isfile(secret_file) else None
        for notebook in info["notebooks"]:
            local = os.path.join(folder, notebook["notebook_id"] + ".html")
            notebook["has_local_feedback"] = os.path.isfile(local)
            notebook["local_feedback_path"] = local if notebook["has_local_feedback"] else None
            notebook["feedback_updated"] = False
            if notebook["has_local_feedback"] and notebook["has_exchange_feedback"] and secret is not None:
                digest = notebook_hash(secret=secret, notebook_id=notebook["notebook_id"])
                exchange = os.path.join(self.root, info["course_id"], "feedback", f"{digest}.html")
                notebook["feedback_updated"] = os.path.isfile(exchange) and _md5(exchange) != _md5(local)
        info["has_local_feedback"] = all(n["has_local_feedback"] for n in info["notebooks"])
        info["feedback_updated"] = any(n["feedback_updated"] for n in info["notebooks"])
        info["local_feedback_path"] = folder if info["has_local_feedback"] else None
