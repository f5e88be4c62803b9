"""Parts of hub/hubctl.py that need no hub: the student-id check before accounts are made, the
terminal's PATH script, the search for processes a killed hub left behind, and the systemd units
(checked with ``systemd-analyze verify``; the PostgreSQL unit's command line is run).

The whole set-up runs in tests/test_hub.py (root, a real hub)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "hub"))
import hubctl  # noqa: E402

# Real accounts, the hub's folders and processes: one worker runs these, one after another.
pytestmark = pytest.mark.xdist_group("machine")


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


def test_the_class_list_names_the_students_and_its_absence_the_demos(tmp_path, monkeypatch):
    listed = tmp_path / "students.txt"
    monkeypatch.setattr(hubctl, "CLASS_LIST", listed)
    assert hubctl.students() == hubctl.STUDENTS  # no file: the demo's three
    listed.write_text("# the class of 2027\nada.l  # Ada Lovelace\n\n  emmy\nada.l\nsofia-k\n")
    assert hubctl.students() == ("ada.l", "emmy", "sofia-k")  # in order, each once, comments dropped
    listed.write_text("emmy\nreference\n")
    with pytest.raises(hubctl.HubError) as refused:
        hubctl.check_student_ids(python=sys.executable)
    assert str(refused.value).startswith(f"{listed} holds names no student may have"), refused.value
    assert "reference" in str(refused.value), refused.value


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


# --------------------------------------------------------------- the systemd units (where systemd runs)


def _systemd_analyze() -> str:
    """systemd-analyze, which checks a unit without a running systemd; skip (locally) or fail (CI) without it."""
    found = shutil.which("systemd-analyze")
    if found is None:
        reason = "systemd-analyze is missing (Debian's systemd package): the hub's units cannot be checked"
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide it: {reason}", pytrace=False)
        pytest.skip(reason)
    return found


def _verify(*units: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_systemd_analyze(), "verify", *map(str, units)], capture_output=True, text=True,
                          cwd=units[0].parent, timeout=120)


def _service(text: str) -> dict[str, str]:
    """The ``[Service]`` section's settings (each key once in our units)."""
    section = text.split("[Service]\n", 1)[1].split("\n[", 1)[0]
    return dict(line.split("=", 1) for line in section.splitlines() if line)


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    """hubctl's paths moved under ``tmp_path``, with a course environment whose jupyterhub is this one."""
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "jupyterhub").symlink_to(Path(sys.executable).parent / "jupyterhub")
    (venv_bin / "python").symlink_to(sys.executable)
    monkeypatch.setattr(hubctl, "VENV", venv_bin.parent)
    monkeypatch.setattr(hubctl, "STATE", tmp_path / "state")
    monkeypatch.setattr(hubctl, "LOG", tmp_path / "hub.log")
    (tmp_path / "state").mkdir()
    (tmp_path / "units").mkdir()
    return tmp_path


def test_the_hub_unit_passes_systemd_analyze_and_runs_what_start_runs(deployment):
    units = deployment / "units"
    assert hubctl.main(["units", "--into", str(units)]) == 0
    assert sorted(p.name for p in units.iterdir()) == [hubctl.HUB_UNIT]
    checked = _verify(units / hubctl.HUB_UNIT)
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")
    service = _service((units / hubctl.HUB_UNIT).read_text())
    assert service["ExecStart"].split() == hubctl.hub_argv()  # the argv the pid-file start runs
    # the limits on students' connections first, as start() does; without them the hub starts all the same
    assert service["ExecStartPre"].split() == [f"-{hubctl.VENV / 'bin' / 'python'}", str(ROOT / "hub" / "hubctl.py"),
                                               "limits"]
    assert service["WorkingDirectory"] == str(hubctl.STATE)
    assert service["KillMode"] == "mixed"  # SIGTERM to the hub alone: it stops its servers itself
    # the check can fail: a course environment without jupyterhub
    (deployment / "venv" / "bin" / "jupyterhub").unlink()
    failed = _verify(units / hubctl.HUB_UNIT)
    assert failed.returncode != 0
    assert "is not executable" in failed.stderr


def test_the_postgres_unit_starts_the_server_and_its_kill_signal_stops_it(deployment, monkeypatch):
    """The PostgreSQL unit's command line, run as its ``User``, serves the gradebook; its ``KillSignal``
    (what ``systemctl stop`` sends the main process) ends it cleanly."""
    sys.path.insert(0, str(ROOT / "tests"))
    from postgres import require_postgres

    require_postgres()
    from pgserver import free_port

    folder = Path(tempfile.mkdtemp(prefix="rbtutor-pg-unit-"))
    os.chmod(folder, 0o711)  # the server's own account must reach its folder below this one
    monkeypatch.setattr(hubctl, "PG_FOLDER", folder / "cluster")
    monkeypatch.setattr(hubctl, "PG_PORT", free_port())
    units = deployment / "units"
    server = hubctl.postgres_server()
    try:
        assert hubctl.main(["units", "--gradebook", "postgres", "--into", str(units)]) == 0
        pg_unit = units / hubctl.PG_UNIT
        checked = _verify(units / hubctl.HUB_UNIT, pg_unit)
        assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")
        assert f"Requires={hubctl.PG_UNIT}" in (units / hubctl.HUB_UNIT).read_text()
        service = _service(pg_unit.read_text())
        assert service["Type"] == "notify"
        server.create()
        argv = service["ExecStart"].split()
        if os.geteuid() == 0:
            argv = ["runuser", "-u", service["User"], "--", *argv]
        with open(server.log, "ab") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            server.wait_ready()
            assert server.psql("SELECT 40 + 2").strip() == "42"
            main_pid = int((server.data / "postmaster.pid").read_text().split()[0])
            os.kill(main_pid, getattr(signal, service["KillSignal"]))
            assert process.wait(timeout=60) == 0
            assert not (server.data / "postmaster.pid").exists()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        server.remove()
        shutil.rmtree(folder, ignore_errors=True)


def role_environments(config) -> dict[str, dict[str, str]]:
    """The environment the hub's pre-spawn hook gives the instructor, a grader and a student."""
    import asyncio
    from types import SimpleNamespace

    environments = {}
    for name, group in ((hubctl.INSTRUCTORS[0], hubctl.INSTRUCTOR_GROUP), ("leuler", hubctl.INSTRUCTOR_GROUP),
                        ("student1", hubctl.STUDENT_GROUP)):
        spawner = SimpleNamespace(user=SimpleNamespace(name=name, groups=[SimpleNamespace(name=group)]),
                                  environment={})
        asyncio.run(config.Spawner.pre_spawn_hook(spawner))
        environments[name] = spawner.environment
    return environments


@pytest.fixture
def hub_config(monkeypatch, tmp_path):
    """jupyterhub_config.py as the hub reads it, with the course folder in ``tmp_path`` and no book to copy."""
    from traitlets.config import Config

    monkeypatch.setattr(hubctl, "course_folder", lambda: tmp_path / "course")
    monkeypatch.setattr(hubctl, "gradebook_url", lambda: None)
    monkeypatch.setattr(hubctl, "BOOK", tmp_path / "no-book")
    monkeypatch.setattr(hubctl, "STUDENT_BOOK", tmp_path / "student_book")
    config = Config()
    source = ROOT / "hub" / "jupyterhub_config.py"
    exec(compile(source.read_text(), str(source), "exec"), {"get_config": lambda: config, "__file__": str(source)})
    return config


def test_each_role_s_server_gets_its_configuration_and_only_the_instructor_the_due_dates(hub_config, tmp_path):
    """``grade`` and ``generate`` in the instructor's server keep the due dates the course's own
    (:func:`rbtutor.course.late.publish_due_dates`); a student's server is not told where they are,
    nor is a grader's (another member of the instructors' group, whose home holds no course: they
    grade in the shared Formgrader)."""
    config = hub_config
    environments = role_environments(config)
    roles = {name: env["RBTUTOR_ROLE"] for name, env in environments.items()}
    assert roles == {hubctl.INSTRUCTORS[0]: "instructor", "leuler": "grader", "student1": "student"}
    for name, role in roles.items():
        assert environments[name]["JUPYTER_CONFIG_PATH"] == str(hubctl.ROLE_CONFIG / role)
    assert environments[hubctl.INSTRUCTORS[0]]["RBTUTOR_DUE_DATES"] == str(hubctl.DUE_DATES)
    assert "RBTUTOR_DUE_DATES" not in environments["leuler"]
    assert "RBTUTOR_DUE_DATES" not in environments["student1"]
    shared = next(service for service in config.JupyterHub.services if service["name"] == hubctl.COURSE_ID)
    assert (shared["user"], shared["cwd"]) == (hubctl.INSTRUCTORS[0], str(tmp_path / "course"))
    assert shared["environment"]["JUPYTER_CONFIG_PATH"] == str(hubctl.ROLE_CONFIG / "instructor")


def test_the_book_s_kernel_is_the_course_account_s_until_the_operator_shares_it(hub_config):
    """Only the course's account finds the book's kernel (its folder on JUPYTER_PATH) until
    ``hub up --student-book`` leaves its mark; then every role's next server start does."""
    def with_book_kernel() -> set[str]:
        return {name for name, env in role_environments(hub_config).items()
                if str(hubctl.BOOK_SHARE) in env["JUPYTER_PATH"].split(":")}

    assert with_book_kernel() == {hubctl.INSTRUCTORS[0]}
    hubctl.STUDENT_BOOK.write_text("on\n")
    assert with_book_kernel() == {hubctl.INSTRUCTORS[0], "leuler", "student1"}


def test_the_book_s_imports_are_read_from_its_code_cells(tmp_path):
    """What place_book checks the book's kernel for: every module a code cell imports, none from text."""
    import json

    cells = [{"cell_type": "code", "source": ["import numpy as np\n", "from rbtutor.problems import load_data\n"]},
             {"cell_type": "code", "source": "  import rbtutor.figures, os\nx = 'import nothing'"},
             {"cell_type": "markdown", "source": "import markdown_is_not_code"}]
    page = tmp_path / "page.ipynb"
    page.write_text(json.dumps({"cells": cells}))
    assert hubctl.book_modules([page]) == ["numpy", "os", "rbtutor.figures", "rbtutor.problems"]


def test_the_hub_s_nbgrader_config_stays_in_the_hub_s_environments(tmp_path):
    """It names rbtutor_fetch, which only the hub's environments import: written into their
    etc/jupyter (what Jupyter reads for that environment alone), never machine-wide, and the
    machine-wide copy of an earlier set-up is removed; someone else's file there is kept."""
    envs = (tmp_path / "venv", tmp_path / "student")
    legacy = tmp_path / "etc-jupyter" / "nbgrader_config.py"
    legacy.parent.mkdir()
    legacy.write_text((Path(hubctl.__file__).parent / "nbgrader_config.py").read_text())
    written = hubctl.ensure_nbgrader_config(envs, legacy)
    assert written == [env / "etc" / "jupyter" / "nbgrader_config.py" for env in envs]
    assert all("rbtutor_fetch.ServiceFetchAssignment" in path.read_text() for path in written)
    assert not legacy.exists()
    legacy.write_text("c.Exchange.root = '/srv/other'\n")  # an administrator's own machine-wide file
    hubctl.ensure_nbgrader_config(envs, legacy)
    assert legacy.read_text() == "c.Exchange.root = '/srv/other'\n"


def test_jupyter_reads_an_environment_s_etc_jupyter_for_that_environment_only():
    """What the scoping above relies on: jupyter_core puts ``<sys.prefix>/etc/jupyter`` on the config
    path of programs of that environment, and the course's own environment has another prefix."""
    out = subprocess.run([sys.executable, "-c", "from jupyter_core.paths import jupyter_config_path; "
                          "print('\\n'.join(jupyter_config_path()))"], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")})
    paths = out.stdout.splitlines()
    assert str(Path(sys.prefix) / "etc" / "jupyter") in paths
    assert str(hubctl.VENV / "etc" / "jupyter") not in paths
    assert str(hubctl.STUDENT_VENV / "etc" / "jupyter") not in paths


def test_status_says_whether_the_hub_runs(monkeypatch, tmp_path):
    """`rbtutor hub status`: 0 and where it answers while the hub runs, 3 and how to start it when
    not (a pid file of a hub without systemd naming a process that has ended)."""
    monkeypatch.setattr(hubctl, "under_systemd", lambda unit: False)
    monkeypatch.setattr(hubctl, "PID_FILE", tmp_path / "jupyterhub.pid")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    hubctl.PID_FILE.write_text(str(gone.pid))
    code, lines = hubctl.status()
    assert code == 3
    assert lines == ["the course hub is not running", "start it with: sudo rbtutor hub up"]
    # the running case: hub_pid's own reading of the pid file is the part above; here it finds a hub
    monkeypatch.setattr(hubctl, "hub_pid", lambda: 4242)
    code, lines = hubctl.status()
    assert code == 0
    assert lines[0] == f"the course hub is running: pid 4242 (pid file {hubctl.PID_FILE})"
    assert f"address: {hubctl.URL}" in lines


@pytest.fixture
def open_folder():
    """A folder under /tmp that every user can enter (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="rbtutor-status-", dir="/tmp"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


def test_status_without_root_says_it_cannot_tell_rather_than_guess(open_folder):
    """The pid file lives in a folder only root reads: run as another user, status says so (exit 4)
    instead of reporting a running hub as stopped."""
    state = open_folder / "state"
    state.mkdir(mode=0o700)
    (state / "jupyterhub.pid").write_text(str(os.getpid()))  # root's folder; the pid does not matter
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import hubctl; from pathlib import Path\n"
              "hubctl.under_systemd = lambda unit: False\n"
              "hubctl.PID_FILE = Path(sys.argv[2]) / 'jupyterhub.pid'\n"
              "code, lines = hubctl.status(); print(code); print(lines[0])\n")
    done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
                           script, str(ROOT / "hub"), str(state)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    code, line = done.stdout.splitlines()
    assert code == "4"
    assert line == f"cannot tell whether the course hub runs: {state} is readable by root only"


def test_without_nft_the_hub_starts_and_says_the_limits_are_missing(tmp_path, monkeypatch, capsys):
    """Where nftables is missing, putting the connection limits in force says so in a warning that
    names the package, and ``hubctl.py limits`` (the systemd unit's step before each start) exits 1;
    ``down``'s removal of the limits is quiet."""
    import netlimits

    monkeypatch.setenv("PATH", str(tmp_path))  # no nft on it
    monkeypatch.setattr(netlimits.os, "access", lambda path, mode: False)  # nor in sbin
    assert hubctl.limit_connections() is False
    said = capsys.readouterr().out
    assert "WARNING: no limits on students' connections to the hub's ports: nft is missing" in said, said
    assert "apt-get install -y nftables" in said
    if os.geteuid() == 0:
        assert hubctl.main(["limits"]) == 1
    netlimits.remove()
    assert "nft" not in capsys.readouterr().err


def test_the_limits_cover_the_hub_s_ports_and_spare_the_instructors():
    """The nftables table: the hub's own ports (not the users' servers), the instructors and the
    system's accounts left alone, and the two bounds of hub/netlimits.py."""
    import netlimits

    assert hubctl.hub_ports() == sorted({8000, 8001, 8081, 10101, 10102, 10103, hubctl.PG_PORT})
    rules = netlimits.ruleset(hubctl.hub_ports(), [1001])
    assert "tcp dport != { 8000, 8001, 8081, 10101, 10102, 10103, 54329 } accept" in rules
    assert "meta skuid < 1000 accept" in rules
    assert "meta skuid 1001 accept" in rules
    assert f"ct count over {netlimits.OPEN_AT_ONCE} }} reject with tcp reset" in rules
    assert f"limit rate over {netlimits.PER_SECOND}/second burst {netlimits.BURST} packets }}" in rules
