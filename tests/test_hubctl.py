"""Parts of hub/hubctl.py that need no hub: the student-id check before accounts are made, the
terminal's PATH script, and the search for processes a killed hub left behind.

The whole set-up runs in tests/test_hub.py (root, a real hub)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "hub"))
import hubctl  # noqa: E402


def test_the_course_students_are_acceptable_ids():
    hubctl.check_student_ids(hubctl.STUDENTS, python=sys.executable)


@pytest.mark.parametrize(("name", "words"), [
    ("reference", "reserved for the course itself"),
    ("Reference", "reserved for the course itself"),
    ("instructor", "reserved"),
    ("a/b", "contains '/'"),
    ("st*", "contains '*'"),
    ("-x", "starts with '-'"),
    (hubctl.FETCH_USER, "service account"),
])
def test_reserved_and_malformed_student_names_are_refused_before_any_account(name, words):
    with pytest.raises(hubctl.HubError) as refused:
        hubctl.check_student_ids(("student1", name), python=sys.executable)
    assert words in str(refused.value), refused.value
    assert "student1" not in str(refused.value).split(":", 1)[1], refused.value


def test_a_terminal_login_shell_keeps_its_servers_environment_first(tmp_path, monkeypatch):
    script = tmp_path / "rbtutor-hub.sh"
    monkeypatch.setattr(hubctl, "PROFILE_SCRIPT", script)
    hubctl.ensure_profile_script()
    env_bin = tmp_path / "env" / "bin"
    env_bin.mkdir(parents=True)
    (env_bin / "python").symlink_to(sys.executable)
    # as /etc/profile does: PATH set anew, then the profile.d scripts sourced
    shell = f'PATH=/usr/bin:/bin; . "{script}"; command -v python'
    found = subprocess.run(["sh", "-c", shell], env={"RBTUTOR_ENV_BIN": str(env_bin)}, capture_output=True,
                           text=True, check=True)
    assert found.stdout.strip() == str(env_bin / "python")
    untouched = subprocess.run(["sh", "-c", f'PATH=/usr/bin:/bin; . "{script}"; echo "$PATH"'], env={},
                               capture_output=True, text=True, check=True)
    assert untouched.stdout.strip() == "/usr/bin:/bin", "a shell outside the hub must keep its PATH"


def test_leftovers_are_only_this_deployments_processes():
    """A process that merely mentions the services' names (as this test does) is not taken for one."""
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "rbtutor.course.checks",
                              str(hubctl.STUDENT_VENV / "bin" / "jupyterhub-singleuser")])
    try:
        assert decoy.pid not in hubctl.leftover_processes()
        assert os.getpid() not in hubctl.leftover_processes()
    finally:
        decoy.kill()
        decoy.wait()


def test_a_zombie_counts_as_ended():
    """The hub started by a test is that test's child: once it exits it is a zombie until collected,
    and a stop that waited for it to vanish waited for its whole timeout."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline_ok = hubctl.wait_gone([child.pid], 30)
    assert deadline_ok == [], "an exited child must count as ended"
    child.wait()
