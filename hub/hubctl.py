"""Set up and run the course on a JupyterHub on this machine: ``make hub`` and ``make hub-stop``.

``python3 hub/hubctl.py up`` (as root; it refuses otherwise) does, each step only when needed:

* Unix accounts ``instructor`` and the students (the ids of :data:`CLASS_LIST`, or ``student1``
  ... ``student3`` without one) with private homes (0700) and random passwords set with
  ``chpasswd``; the passwords are written to :data:`PASSWORDS` (readable by root only) so that
  the administrator can hand them out;
* the course environment, :data:`VENV`, which runs the hub, the instructor's server and the
  hub's services: a virtual environment with rbtutor installed from a copy of the package
  (``pip install .[course,hub]`` with the pinned versions of ``constraints.txt``), not the
  checkout's editable install; its rbtutor package is readable by the group :data:`STAFF_GROUP`
  only (the instructor and the personalising service's account :data:`FETCH_USER`);
* the students' server environment, :data:`STUDENT_VENV`: JupyterHub's single-user server,
  JupyterLab and nbgrader, the course's Validate wording and :mod:`rbtutor_fetch` (the
  students' Fetch), but no rbtutor, so nothing a student runs can compute a key;
* the students' kernel, :data:`KERNEL_VENV`: numpy, scipy, sympy, matplotlib and ipykernel,
  without rbtutor, registered as the kernelspec ``python3`` (the name the assignments use)
  under :data:`SHARE`, which the hub puts first on ``JUPYTER_PATH``;
* the book's kernel ``rbtutor-book`` (:data:`READER_VENV`: rbtutor, myst-nb and ipykernel) and the
  built book's notebooks (:data:`BOOK`), which each reader's server start copies into their home's
  :data:`BOOK_FOLDER`, where the book's launch buttons lead; for the course's account only, unless
  ``--student-book`` lets every reader run them (:func:`share_book` says what that gives away);
* the nbgrader exchange :data:`EXCHANGE`, owned by root, mode 1777 (everyone may write, the
  sticky bit keeps one user from removing another's files), as nbgrader's documentation asks;
* ``etc/jupyter/nbgrader_config.py`` of the hub's two server environments (copied from
  ``hub/nbgrader_config.py``): the exchange, the course id, course membership from the hub's
  groups and the students' Fetch, for every user of the hub with nothing to set by hand. It is
  scoped to those environments, not machine-wide: it names :mod:`rbtutor_fetch`, which only
  they can import, so nbgrader from any other environment (the course's own ``.venv``) keeps
  working beside the hub; a machine-wide copy left by an earlier set-up is removed;
* per-role Jupyter configuration under :data:`ROLE_CONFIG`: students get the assignment list
  and Validate only (no Formgrader, no Create Assignment, no course list, not the grading
  kernel); the instructor (the course's account) gets everything; a grader (any other member of
  the instructors' group, such as an instructor or TA the LMS made) gets the course list, which
  leads to the course's shared Formgrader, a hub service run as the course's account (nbgrader's
  set-up for one class with several graders); nobody gets JupyterLab's question about news;
* MathJax for the Formgrader's page, which asked a CDN for it: ``hub/mathjax.html.j2`` replaces
  nbconvert's loader macro under :data:`SHARE` (only where a page names no MathJax URL) and loads
  MathJax 3 (from sphinx-mathjax-offline, copied to :data:`STATIC`) from the instructor's server;
* the instructor's course folder ``/home/instructor/course`` (``nbgrader_config.py`` and
  ``exercises/`` copied from the checkout, the first time only, so the instructor's work is
  never overwritten) and ``~instructor/.jupyter/nbgrader_config.py`` pointing the Formgrader
  at it;
* the course data :data:`COURSE_DATA` (written the first time, owned by the instructor, readable
  by the group :data:`STAFF_GROUP` only, linked as the course's ``exercises/problem_data.yaml``):
  per-student variants switched on with a random salt; a student's Fetch asks the hub's
  personalising service (:mod:`rbtutor.course.fetch_service`, run as :data:`FETCH_USER`) for the
  notebook with that student's own numbers;
* the course's due dates :data:`DUE_DATES`, beside the course data in a folder of the instructor's
  and :data:`STAFF_GROUP`'s (mode 2750), linked as the course's ``exercises/due_dates.yaml`` even
  before the instructor writes them: the fetch service reads the file for every fetch, so the
  instructor's later edits reach students without root or a restart (``RBTUTOR_DUE_DATES``, set
  for the instructor, lets ``make grade`` put right a link some tool replaced);
* ``/etc/profile.d/rbtutor-hub.sh``: a terminal in JupyterLab (a login shell) keeps its server's
  environment first on ``PATH``, so ``python`` is that environment's;
* ``configurable-http-proxy`` from npm (``npm ci`` in ``hub/``, from ``hub/package-lock.json``);
* with ``--gradebook postgres`` (``make hub GRADEBOOK=postgres``): a PostgreSQL server for the
  course gradebook (:mod:`pgserver`, Debian's ``postgresql`` binaries) in :data:`PG_FOLDER`, on
  127.0.0.1 port :data:`PG_PORT`, with a random password (students have accounts on this machine),
  and ``RBTUTOR_GRADEBOOK`` (which holds it) set for the instructor only (shell and server);
* limits each student account's connections to the hub's own ports (hub/netlimits.py, nftables);
* then starts JupyterHub on http://127.0.0.1:8000 in the background (log in :data:`LOG`).

Where systemd is the init system, the hub (and the PostgreSQL server) are systemd services,
:data:`HUB_UNIT` (and :data:`PG_UNIT`), written to :data:`SYSTEMD_UNITS` and enabled, so they
start again at boot, as The Littlest JupyterHub does; elsewhere (a container, this project's CI)
the hub is a background process with its pid in :data:`PID_FILE`, and ``pg_ctl`` runs PostgreSQL.
``python3 hub/hubctl.py units --into DIR`` writes the units to read or install by hand.

``python3 hub/hubctl.py down`` stops the hub, its proxy, the users' servers and the PostgreSQL
server if one was started (and disables their services), and lifts the connection limits.

This script uses the standard library only: it runs before the course environment exists.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import netlimits

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parent

COURSE_ID = "rbtutor"
INSTRUCTORS = ("instructor",)
STUDENTS = ("student1", "student2", "student3")
STAFF_GROUP = "rbtutor-staff"  # may read rbtutor in VENV and the course data: instructors, FETCH_USER
FETCH_USER = "rbtutor-fetch"  # the personalising service's own account (no login, no home)
INSTRUCTOR_GROUP = f"formgrade-{COURSE_ID}"  # nbgrader's JupyterHubAuthPlugin reads these two groups
STUDENT_GROUP = f"nbgrader-{COURSE_ID}"

PREFIX = Path("/opt/rbtutor")
VENV = PREFIX / "venv"  # the hub, the instructor's server and the services: rbtutor in it
STUDENT_VENV = PREFIX / "student"  # the students' single-user servers: no rbtutor in it
KERNEL_VENV = PREFIX / "kernel"  # the students' kernel: no rbtutor in it
SHARE = PREFIX / "share" / "jupyter"  # on JUPYTER_PATH: the students' kernelspec
#: the book's kernel: an environment with rbtutor (the package, no course data) and what the book's pages
#: import, its kernelspec in its own folder on JUPYTER_PATH of whoever may run the book (:func:`may_run_book`)
READER_VENV = PREFIX / "reader"
BOOK_SHARE = PREFIX / "share-book" / "jupyter"
BOOK_KERNEL = "rbtutor-book"
BOOK_KERNEL_SHOWN = "Python 3 (rbtutor book)"  # its name in JupyterLab
#: the built book's notebooks, each set to the book's kernel; a reader's server start copies them into
#: their home's :data:`BOOK_FOLDER` (where the book's launch buttons, book/_ext/launch_hub.py, lead)
BOOK = PREFIX / "book"
BOOK_FOLDER = "rbtutor-book"
ROLE_CONFIG = PREFIX / "etc"  # ROLE_CONFIG/<role> of ROLE_TOOLS, on JUPYTER_CONFIG_PATH
STATIC = PREFIX / "static"  # served by the instructor's server under static/: MathJax for the Formgrader
EXCHANGE = Path("/srv/nbgrader/exchange")
STATE = Path("/var/lib/rbtutor-hub")  # the hub's database, cookie secret and pid files
LOG = Path("/var/log/rbtutor-hub.log")
PID_FILE = STATE / "jupyterhub.pid"  # where systemd does not run
SYSTEMD_UNITS = Path("/etc/systemd/system")  # where systemd runs: the hub's and PostgreSQL's units
HUB_UNIT = "rbtutor-hub.service"
PG_UNIT = "rbtutor-postgres.service"
PASSWORDS = Path("/etc/rbtutor/hub-passwords.json")
#: the class: one student id a line (``#`` starts a comment); when the file is missing, :data:`STUDENTS`
CLASS_LIST = Path("/etc/rbtutor/students.txt")
#: where an earlier set-up put the hub's nbgrader configuration, read by every environment
LEGACY_NBGRADER_CONFIG = Path("/etc/jupyter/nbgrader_config.py")
URL = "http://127.0.0.1:8000"
HUB_PORT = 8081  # the hub's own API, where the servers and services ask it (c.JupyterHub.hub_port)
PROXY_API_PORT = 8001  # configurable-http-proxy's API (JupyterHub's default)
PROXY = HERE / "node_modules" / ".bin" / "configurable-http-proxy"
PG_FOLDER = Path("/var/lib/rbtutor-postgres")  # make hub GRADEBOOK=postgres: the gradebook's cluster
PG_PORT = 54329
GRADEBOOK_URL_FILE = STATE / "gradebook_url"  # read by jupyterhub_config.py for the instructor's server
COURSE_DATA = Path("/srv/rbtutor/problem_data.yaml")  # the instructor edits it; the fetch service reads it
DUE_DATES = COURSE_DATA.parent / "due_dates.yaml"  # optional, as COURSE_DATA: each student's own due date
CHECK_URL = "http://127.0.0.1:10101"  # where the hub starts the check service (behind the proxy)
FETCH_URL = "http://127.0.0.1:10102"  # where the hub starts the personalising service (behind the proxy)
#: where the hub starts the course's shared Formgrader, the service named :data:`COURSE_ID` (behind the proxy)
GRADING_URL = "http://127.0.0.1:10103"
PROFILE_SCRIPT = Path("/etc/profile.d/rbtutor-hub.sh")
LTI_KEYS = STATE / "lti-keys"  # with [lms] in course.toml: the tool's signing keys (root only, 0700/0600)
LMS_SEND_EVERY = 5  # with [lms]: seconds between the LMS sender's looks at the grades outbox
#: present when students may run the book's notebooks on the hub (``hub up --student-book``)
STUDENT_BOOK = STATE / "student_book"

STUDENT_KERNEL_PACKAGES = ("numpy", "scipy", "sympy", "matplotlib", "ipykernel")
STUDENT_SERVER_PACKAGES = ("jupyterhub", "jupyterlab", "nbgrader")
#: beside rbtutor in the book's kernel: the pages' glue() and the kernel
BOOK_KERNEL_PACKAGES = ("myst-nb", "ipykernel")
# JupyterLab's "Jupyter news?" question on every log-in: off for everyone
QUIET_LAB_PLUGINS = ("@jupyterlab/apputils-extension:announcements",)
# nbgrader's browser plugins and server extensions that only instructors get
INSTRUCTOR_LAB_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                          "@jupyter/nbgrader:course-list")
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")
#: what each role's own server shows of them: the course account's (:data:`INSTRUCTORS`) everything; a
#: grader's (another member of the instructors' group, such as one the LMS made) the course list, which
#: leads to the course's shared Formgrader (:data:`GRADING_URL`); a student's nothing
ROLE_TOOLS = {"student": (),
              "instructor": (*INSTRUCTOR_LAB_PLUGINS, *INSTRUCTOR_SERVER_EXTENSIONS),
              "grader": ("@jupyter/nbgrader:course-list", "nbgrader.server_extensions.course_list")}


class HubError(RuntimeError):
    """The hub cannot be set up or started; the message says why."""


def say(message: str) -> None:
    print(f"hub: {message}", flush=True)


def run(*argv, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], check=True, **kwargs)


def require_root() -> None:
    if os.geteuid() != 0:
        raise HubError("make hub needs root: it creates Unix accounts, /opt/rbtutor, /srv/nbgrader and "
                       "/etc/jupyter, and the hub starts servers as other users (run it with sudo)")


# --- accounts
def instructor_argv(*command) -> list[str]:
    """``command`` as the course's account runs it in a terminal of its server on the hub: the course
    environment first on PATH, the exchange, and the gradebook's address on a PostgreSQL hub."""
    env = {"PATH": f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home(INSTRUCTORS[0])),
           "RBTUTOR_EXCHANGE": str(EXCHANGE), "LANG": "C.UTF-8"}
    if gradebook_url():
        env["RBTUTOR_GRADEBOOK"] = gradebook_url()
    return ["runuser", "-u", INSTRUCTORS[0], "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
            *map(str, command)]


def user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def home(name: str) -> Path:
    import pwd

    return Path(pwd.getpwnam(name).pw_dir)


def course_folder() -> Path:
    """The instructor's course folder (the check service reads it)."""
    return home(INSTRUCTORS[0]) / "course"


def students(class_list: Path | None = None) -> tuple[str, ...]:
    """The course's students: the ids of :data:`CLASS_LIST` (one a line, in order, each once), or
    :data:`STUDENTS` when there is no such file. The ids are checked by :func:`check_student_ids`."""
    try:
        text = (class_list or CLASS_LIST).read_text(encoding="utf-8")
    except FileNotFoundError:
        return STUDENTS
    names = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return tuple(dict.fromkeys(name for name in names if name))


def check_student_ids(names=None, python: Path | str | None = None) -> None:
    """Refuse student names that are not acceptable student ids, before any account is made.

    The rule is rbtutor's own (:func:`rbtutor.grading.student_ids.check_id`: no reserved name
    such as ``reference``, the instructor's own variant, no glob or path characters), run with
    ``python`` (the course environment, which has rbtutor; this script has only the standard
    library). A student may not share a name with an instructor or the service account either.
    """
    names = students() if names is None else names
    python = python or VENV / "bin" / "python"
    code = ("import sys\nfrom rbtutor.grading.student_ids import check_id\n"
            "for name in sys.argv[1:]:\n"
            "    try:\n        check_id(name)\n    except ValueError as exc:\n        print(exc)\n")
    result = subprocess.run([str(python), "-I", "-c", code, *names], capture_output=True, text=True, cwd="/")
    if result.returncode != 0:
        raise HubError(f"cannot check the student ids with {python}:\n{result.stderr[-2000:]}")
    problems = result.stdout.splitlines()
    problems += [f"expected a student id, got {name!r}: it is also an instructor or service account"
                 for name in names if name in (*INSTRUCTORS, FETCH_USER)]
    if problems:
        source = CLASS_LIST if CLASS_LIST.exists() else "hub/hubctl.py STUDENTS"
        raise HubError(f"{source} holds names no student may have:\n  " + "\n  ".join(problems))


def in_group(user: str, group: str) -> bool:
    import grp
    import pwd

    entry = grp.getgrnam(group)
    return user in entry.gr_mem or pwd.getpwnam(user).pw_gid == entry.gr_gid


def ensure_staff() -> None:
    """The group :data:`STAFF_GROUP` with the instructors in it, and the service account :data:`FETCH_USER`."""
    import grp

    try:
        grp.getgrnam(STAFF_GROUP)
    except KeyError:
        run("groupadd", "--system", STAFF_GROUP)
    if not user_exists(FETCH_USER):  # no password, no home, no shell: the hub starts the service as it
        run("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
            FETCH_USER)
    for name in (*INSTRUCTORS, FETCH_USER):
        if not in_group(name, STAFF_GROUP):
            run("usermod", "--append", "--groups", STAFF_GROUP, name)


def ensure_accounts() -> dict[str, str]:
    """Create the accounts that are missing, with passwords; return every account's password."""
    check_student_ids()
    PASSWORDS.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(PASSWORDS.read_text()) if PASSWORDS.exists() else {}
    for name in (*INSTRUCTORS, *students()):
        if not user_exists(name):
            run("useradd", "--create-home", "--shell", "/bin/bash", name)
            known.pop(name, None)
        if name not in known:
            known[name] = secrets.token_urlsafe(12)
            run("chpasswd", input=f"{name}:{known[name]}\n", text=True)
            say(f"account {name}: password set")
        os.chmod(home(name), 0o700)  # no one reads another's home
    PASSWORDS.write_text(json.dumps(known, indent=1) + "\n")
    os.chmod(PASSWORDS, 0o600)
    os.chmod(PASSWORDS.parent, 0o700)
    ensure_staff()
    return known


def create_lms_account(name: str) -> None:
    """The Unix account of a user the LMS launched (the hub with ``[lms]``): a private home and no
    password, so they log in through the LMS only. The name was checked (rbtutor.lms.accounts)."""
    run("useradd", "--create-home", "--shell", "/bin/bash", name)
    os.chmod(home(name), 0o700)  # no one reads another's home


def forget_hub_users(names) -> None:
    """Drop ``names`` from the stopped hub's database (their groups, servers and tokens go with them),
    as a clean-up after accounts that a test or a benchmark made for a while."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(STATE / "jupyterhub.sqlite")) as db:
        db.execute("PRAGMA foreign_keys = ON")
        db.executemany("DELETE FROM users WHERE name = ?", [(name,) for name in names])
        db.commit()


# --- environments
def _stamp(*files: Path) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def package_stamp() -> str:
    """A digest of the rbtutor package's files in the checkout (names and bytes) and pyproject.toml."""
    digest = hashlib.sha256(_stamp(CHECKOUT / "pyproject.toml").encode())
    for path in sorted((CHECKOUT / "rbtutor").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(str(path.relative_to(CHECKOUT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def refresh_package(venv: Path, source: Path) -> None:
    """rbtutor in ``venv`` reinstalled from ``source`` (a :func:`package_copy`) when the checkout's
    package changed since the last install there; pip builds a wheel for it, some seconds each time."""
    stamp_file = venv / ".rbtutor-package-stamp"
    wanted = package_stamp()
    if stamp_file.exists() and stamp_file.read_text() == wanted:
        return
    run(venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-deps",
        "--force-reinstall", source)
    stamp_file.write_text(wanted)


def package_copy(target: Path) -> Path:
    """The files that make the rbtutor package, copied from the checkout (so pip builds nothing in it);
    the licence files are named by pyproject.toml's license-files, and a build without them fails."""
    for name in ("pyproject.toml", "README.md", "LICENSE", "LICENSE-TEXT.md"):
        shutil.copy2(CHECKOUT / name, target / name)
    shutil.copytree(CHECKOUT / "rbtutor", target / "rbtutor",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def base_python() -> str:
    """The interpreter the environments are made from: one every user can run.

    A venv links to its base interpreter and reads its standard library from there, so an
    interpreter under a private home (pyenv in /root) would not start for the students.
    """
    for candidate in ("/usr/bin/python3", sys.executable):
        path = Path(candidate).resolve()
        if path.exists() and all(os.stat(p).st_mode & 0o005 == 0o005 for p in path.parents):
            return candidate
    raise HubError("no python3 that every user can run: apt-get install -y python3 python3-venv")


def usable_constraints(python: Path, *requirements: str) -> Path:
    """``constraints.txt`` less the pins that ``python`` cannot install, as a file under PREFIX.

    The pins were tested with the checkout's interpreter; the system python3 the hub's
    environments are made from may be an older patch release that a pinned version refuses
    (Debian 12's 3.11.2 and soupsieve 4.1.3, which asks for 3.11.5). Such a pin is dropped,
    said on the terminal, and pip picks the newest version that this interpreter accepts.
    """
    import re

    # pins an earlier call dropped for this interpreter's version: with such a pin in place pip
    # may give up with resolution-too-deep instead of naming the pin it cannot install
    version = subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    dropped_file = PREFIX / f"dropped-pins-{version}.txt"
    dropped = set(dropped_file.read_text().split()) if dropped_file.exists() else set()
    lines = [line for line in (CHECKOUT / "constraints.txt").read_text().splitlines()
             if line.split("==")[0].lower() not in dropped]
    target = PREFIX / f"constraints-{Path(python).parent.parent.name}.txt"
    for _ in range(10):
        target.write_text("\n".join(lines) + "\n")
        probe = subprocess.run([str(python), "-m", "pip", "install", "--dry-run", "--disable-pip-version-check",
                                "-c", str(target), *requirements], capture_output=True, text=True)
        if probe.returncode == 0:
            return target
        refused = re.search(r"requested \(constraint\) ([A-Za-z0-9_.-]+)==", probe.stdout + probe.stderr)
        if not refused:
            raise HubError("pip cannot install the course environment:\n" + probe.stderr[-2000:])
        name = refused.group(1).lower()
        say(f"pin of {name} dropped: {python} cannot install the pinned version")
        lines = [line for line in lines if line.split("==")[0].lower() != name]
        dropped.add(name)
        dropped_file.write_text("\n".join(sorted(dropped)) + "\n")
    raise HubError("too many pins this interpreter cannot install; use a newer python3")


def package_environment(venv: Path, what: str, extras: str = "", packages: tuple[str, ...] = (),
                        python: str | None = None) -> None:
    """``venv`` with rbtutor (with ``extras``, such as ``[course,hub]``, from a :func:`package_copy`) and
    ``packages``, pinned by constraints.txt: made anew when the pins, pyproject.toml or ``packages``
    change, else with rbtutor itself refreshed when it changed."""
    stamp_file = venv / ".rbtutor-stamp"
    wanted = _stamp(CHECKOUT / "constraints.txt", CHECKOUT / "pyproject.toml") + " ".join(packages)
    pip = [venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    with tempfile.TemporaryDirectory(prefix="rbtutor-package-") as tmp:
        source = package_copy(Path(tmp))
        if not stamp_file.exists() or stamp_file.read_text() != wanted:
            say(f"installing {what} into {venv}")
            run(python or base_python(), "-m", "venv", venv)
            run(*pip, "-c", CHECKOUT / "constraints.txt", "pip")  # the pinned pip resolves the pins
            constraints = usable_constraints(venv / "bin" / "python", f"{source}{extras}", *packages)
            run(*pip, "-c", constraints, f"{source}{extras}", *packages)
            stamp_file.write_text(wanted)
            (venv / ".rbtutor-package-stamp").write_text(package_stamp())
        else:  # the dependencies are unchanged: refresh rbtutor itself, if it changed
            refresh_package(venv, source)


def ensure_venv(python: str | None = None) -> None:
    """The server environment: rbtutor[course,hub] from a copy of the package, pinned versions."""
    package_environment(VENV, "the course environment (a few minutes the first time)", "[course,hub]",
                        python=python)
    # the grading kernel's kernelspec (rbtutor-student) lives in the environment: write it now,
    # as root, since the instructor cannot write there
    # (-I and cwd /: the installed package, never the checkout's rbtutor/ beside the current folder)
    run(VENV / "bin" / "python", "-I", "-c", "from rbtutor.grading import sandbox; sandbox.install()", cwd="/")


def protect_package() -> Path:
    """The rbtutor package in :data:`VENV` readable by root and :data:`STAFF_GROUP` only; returns its folder.

    The rest of the environment stays readable by all: the grading kernel, when grading runs as
    root, runs VENV's interpreter as a user of its own (and never imports rbtutor).
    """
    import grp

    gid = grp.getgrnam(STAFF_GROUP).gr_gid
    package = package_folder(VENV)
    for path in [package, *package.rglob("*")]:
        os.lchown(path, 0, gid)
        if not path.is_symlink():
            os.chmod(path, 0o750 if path.is_dir() else 0o640)
    return package


def package_folder(venv: Path) -> Path:
    """The rbtutor package installed in ``venv``."""
    found = sorted(venv.glob("lib/python3*/site-packages/rbtutor"))
    if len(found) != 1:
        raise HubError(f"expected one rbtutor package in {venv}, found {[str(f) for f in found]}")
    return found[0]


def purelib(venv: Path) -> Path:
    out = subprocess.run([str(venv / "bin" / "python"), "-I", "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, cwd="/")
    return Path(out.stdout.strip())


def install_fetch_client(venv: Path) -> None:
    """Copy hub/rbtutor_fetch.py (the students' Fetch; nbgrader and the standard library only) into ``venv``."""
    target = purelib(venv) / "rbtutor_fetch.py"
    shutil.copy2(HERE / "rbtutor_fetch.py", target)
    os.chmod(target, 0o644)


def pip_environment(venv: Path, packages: tuple[str, ...], what: str, python: str | None = None) -> None:
    """``packages`` in the environment ``venv``, pinned by constraints.txt, made anew when they or the pins change."""
    constraints = CHECKOUT / "constraints.txt"
    stamp_file = venv / ".rbtutor-stamp"
    wanted = _stamp(constraints) + " ".join(packages)
    if stamp_file.exists() and stamp_file.read_text() == wanted:
        return
    say(f"installing {what} into {venv}")
    run(python or base_python(), "-m", "venv", venv)
    pip = [venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    run(*pip, "-c", constraints, "pip")
    run(*pip, "-c", usable_constraints(venv / "bin" / "python", *packages), *packages)
    stamp_file.write_text(wanted)


def ensure_student_env(python: str | None = None) -> None:
    """The students' servers: JupyterHub's single-user server, JupyterLab and nbgrader, without rbtutor."""
    pip_environment(STUDENT_VENV, STUDENT_SERVER_PACKAGES, "the students' server environment", python)
    install_fetch_client(STUDENT_VENV)
    # the course's wording of nbgrader's Validate dialog (a prebuilt JupyterLab extension, no Python)
    target = STUDENT_VENV / "share" / "jupyter" / "labextensions" / "rbtutor-validate"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(CHECKOUT / "rbtutor" / "course" / "labextension", target)
    python_found = subprocess.run([str(STUDENT_VENV / "bin" / "python"), "-I", "-c", "import rbtutor"],
                                  capture_output=True, cwd="/")
    if python_found.returncode == 0:
        raise HubError(f"{STUDENT_VENV} must not hold rbtutor, but it imports there")


def ensure_kernel(python: str | None = None) -> None:
    """The students' kernel: its own small environment without rbtutor, as kernelspec ``python3``."""
    pip_environment(KERNEL_VENV, STUDENT_KERNEL_PACKAGES, "the students' kernel", python)
    spec_dir = SHARE / "kernels" / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [str(KERNEL_VENV / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (course)", "language": "python",
            "metadata": {"debugger": True}}
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")


# --- the book on the hub
def ensure_book_kernel(python: str | None = None) -> None:
    """The book's kernel :data:`BOOK_KERNEL`: :data:`READER_VENV`, with rbtutor (without extras) and
    :data:`BOOK_KERNEL_PACKAGES`. The course data and its salt are not in the package; who may read
    the package is :func:`share_book`'s to say."""
    package_environment(READER_VENV, "the book's kernel", packages=BOOK_KERNEL_PACKAGES, python=python)
    spec_dir = BOOK_SHARE / "kernels" / BOOK_KERNEL
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [str(READER_VENV / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": BOOK_KERNEL_SHOWN, "language": "python", "metadata": {"debugger": True}}
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")


def book_modules(notebooks) -> list[str]:
    """The modules the code cells of ``notebooks`` (paths of ``.ipynb`` files) import."""
    found = set()
    pattern = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w., ]+))", re.M)
    for notebook in notebooks:
        for cell in json.loads(Path(notebook).read_text(encoding="utf-8")).get("cells", []):
            if cell.get("cell_type") == "code":
                for source, names in pattern.findall("".join(cell.get("source", ""))):
                    found.update([source] if source else (name.split()[0] for name in names.split(",") if name.strip()))
    return sorted(found)


def place_book(source: Path, toc: Path = CHECKOUT / "_toc.yml") -> int:
    """The notebooks of the built book (``source``: its ``_build/html/_sources``) into :data:`BOOK`, each
    set to run in the book's kernel, which must import every module they import; returns how many.
    The pages' MyST sources and the table of contents ``toc`` go beside them: the course plan's page
    reads them (its reading times).

    Raises :class:`HubError` when a module they import does not import in the book's kernel.
    """
    notebooks = sorted(path for path in source.rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts)
    modules = book_modules(notebooks)
    probe = subprocess.run([str(READER_VENV / "bin" / "python"), "-I", "-c",
                            "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)",
                            *modules], capture_output=True, text=True, cwd="/", env={"MPLBACKEND": "Agg"})
    if probe.returncode != 0:
        raise HubError(f"the book's kernel cannot import what the book's notebooks import:\n{probe.stderr[-2000:]}")
    new = BOOK.with_name(BOOK.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    for notebook in notebooks:
        target = new / notebook.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        content = json.loads(notebook.read_text(encoding="utf-8"))
        content.setdefault("metadata", {})["kernelspec"] = {
            "name": BOOK_KERNEL, "display_name": BOOK_KERNEL_SHOWN, "language": "python"}
        target.write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for page in source.rglob("*.md"):
        (new / page.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, new / page.relative_to(source))
    shutil.copyfile(toc, new / toc.name)
    for path in [new, *new.rglob("*")]:  # the public book: everyone may read it
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    shutil.rmtree(BOOK, ignore_errors=True)
    new.rename(BOOK)
    return len(notebooks)


def share_book(students_too: bool) -> None:
    """Who may run the book's notebooks on the hub: the course's account always (through
    :data:`STAFF_GROUP`, as for the course environment's rbtutor); students and the LMS's graders
    only when ``students_too`` (``hub up --student-book``).

    The boundary is the file mode of the rbtutor package in :data:`READER_VENV`: without the switch,
    no one outside the group can import it, whatever kernel they make. With it, a student's book
    kernel holds rbtutor, whose functions compute the answers to their own numbers: the manual says so.
    """
    import grp

    gid = grp.getgrnam(STAFF_GROUP).gr_gid
    package = package_folder(READER_VENV)
    for path in [package, *package.rglob("*")]:
        os.lchown(path, 0, gid)
        if not path.is_symlink():
            mode = 0o755 if path.is_dir() else 0o644
            os.chmod(path, mode if students_too else mode & 0o770)
    if students_too:
        STUDENT_BOOK.write_text("students may run the book's notebooks (hub up --student-book)\n")
    else:
        STUDENT_BOOK.unlink(missing_ok=True)


def book_readers() -> str:
    """Who runs the book's notebooks on the hub, in words (``up`` and ``status`` say it)."""
    return "everyone, students too" if STUDENT_BOOK.exists() else "the course's account only"


def may_run_book(role: str) -> bool:
    """Whether a server of ``role`` (:data:`ROLE_TOOLS`) offers the book's kernel and gets the book."""
    return role == "instructor" or STUDENT_BOOK.exists()


def ensure_book(students_too: bool, source: Path = CHECKOUT / "_build" / "html" / "_sources") -> None:
    """The book on the hub: its kernel, the built book's notebooks (when the book is built), and who may run them."""
    ensure_book_kernel()
    if any(source.rglob("*.ipynb")):
        say(f"the book's notebooks: {place_book(source)} from {source}")
    elif BOOK.exists():
        say(f"the book is not built ({source} has no notebooks): readers keep the notebooks of {BOOK}")
    else:
        say(f"the book is not built ({source} has no notebooks): run `make book`, then set up the hub again, "
            "for its notebooks on the hub")
    share_book(students_too)
    say(f"the book's notebooks run for {book_readers()}")


def ensure_proxy() -> None:
    """configurable-http-proxy from npm, as pinned by hub/package-lock.json."""
    if PROXY.exists() and (HERE / "node_modules" / ".package-lock.json").exists() and \
            (HERE / "node_modules" / ".package-lock.json").stat().st_mtime >= \
            (HERE / "package-lock.json").stat().st_mtime:
        return
    if not shutil.which("npm"):
        raise HubError("npm is missing: apt-get install -y nodejs npm (configurable-http-proxy 5.1.0 needs node >= 18)")
    say("installing configurable-http-proxy (npm ci in hub/)")
    run("npm", "ci", "--no-audit", "--no-fund", "--prefix", HERE)


# --- shared folders and configuration
def ensure_exchange() -> None:
    EXCHANGE.mkdir(parents=True, exist_ok=True)
    os.chown(EXCHANGE, 0, 0)
    os.chmod(EXCHANGE, 0o1777)  # nbgrader: writable by all, sticky


def ensure_profile_script() -> None:
    """:data:`PROFILE_SCRIPT`: a login shell started by a Jupyter server keeps that server's environment on PATH.

    JupyterLab's terminals are login shells, and Debian's /etc/profile sets PATH anew; the hub
    gives each server ``RBTUTOR_ENV_BIN`` (its environment's ``bin``), which this puts back in front.
    """
    PROFILE_SCRIPT.parent.mkdir(parents=True, exist_ok=True)
    PROFILE_SCRIPT.write_text(
        "# rbtutor hub (hub/hubctl.py): a terminal of a Jupyter server keeps that server's environment first\n"
        'if [ -n "${RBTUTOR_ENV_BIN:-}" ] && [ -d "$RBTUTOR_ENV_BIN" ]; then\n'
        '    PATH="$RBTUTOR_ENV_BIN:$PATH"\n'
        "fi\n")
    os.chmod(PROFILE_SCRIPT, 0o644)


def ensure_nbgrader_config(environments=(VENV, STUDENT_VENV), legacy: Path = LEGACY_NBGRADER_CONFIG) -> list[Path]:
    """The hub's nbgrader configuration into each of ``environments`` (``<env>/etc/jupyter``, which
    Jupyter reads for programs of that environment only); ``legacy``, the machine-wide copy of an
    earlier set-up, removed when it is the hub's (an instructor's own file there is left alone).
    Returns the files written."""
    text = (HERE / "nbgrader_config.py").read_text()
    written = []
    for env in environments:
        target = Path(env) / "etc" / "jupyter" / "nbgrader_config.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        os.chmod(target, 0o644)
        written.append(target)
    if legacy.is_file() and "rbtutor_fetch.ServiceFetchAssignment" in legacy.read_text(errors="replace"):
        legacy.unlink()
        say(f"removed {legacy}, the machine-wide copy of an earlier set-up (now in the hub's environments)")
    return written


def ensure_config() -> None:
    ensure_nbgrader_config()
    for role, shown in ROLE_TOOLS.items():
        folder = ROLE_CONFIG / role
        (folder / "labconfig").mkdir(parents=True, exist_ok=True)
        (folder / "jupyter_server_config.d").mkdir(parents=True, exist_ok=True)
        page = {"disabledExtensions": {**{name: name not in shown for name in INSTRUCTOR_LAB_PLUGINS},
                                       **{name: True for name in QUIET_LAB_PLUGINS}}}
        (folder / "labconfig" / "page_config.json").write_text(json.dumps(page, indent=1) + "\n")
        server = {"ServerApp": {"jpserver_extensions": {name: name in shown for name in INSTRUCTOR_SERVER_EXTENSIONS}}}
        (folder / "jupyter_server_config.d" / "zz-rbtutor-role.json").write_text(json.dumps(server, indent=1) + "\n")
        # students see their own kernel (and the book's, when its folder is on their JUPYTER_PATH:
        # may_run_book), not the grading kernel (the .d files above are read for the extensions
        # only, so this goes into the role's jupyter_server_config.json)
        server_config = {"KernelSpecManager": {"allowed_kernelspecs": ["python3", BOOK_KERNEL]}} \
            if role == "student" else \
            {"ServerApp": {"extra_static_paths": [str(STATIC)]}}
        (folder / "jupyter_server_config.json").write_text(json.dumps(server_config, indent=1) + "\n")
    STATE.mkdir(parents=True, exist_ok=True)
    os.chmod(STATE, 0o700)
    ensure_profile_script()
    ensure_formgrader_mathjax()


def ensure_formgrader_mathjax() -> None:
    """MathJax 3 in :data:`STATIC` and the loader macro that points nbgrader's Formgrader page at it."""
    template = SHARE / "nbconvert" / "templates" / "base" / "mathjax.html.j2"
    template.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / "mathjax.html.j2", template)
    os.chmod(template, 0o644)
    target = STATIC / "rbtutor-mathjax"
    if (target / "tex-chtml-full.js").exists():
        return
    found = sorted(VENV.glob("lib/python3*/site-packages/sphinx-mathjax-offline/static/mathjax"))
    if not found:
        raise HubError(f"MathJax for the Formgrader is missing: no sphinx-mathjax-offline in {VENV}")
    STATIC.mkdir(parents=True, exist_ok=True)
    shutil.copytree(found[0], target)


def ensure_course() -> None:
    """The instructor's course folder (copied once) and the Formgrader's pointer to it."""
    import pwd

    account = pwd.getpwnam(INSTRUCTORS[0])
    owner = (account.pw_uid, account.pw_gid)
    course = Path(account.pw_dir) / "course"
    if not (course / "nbgrader_config.py").exists():
        course.mkdir(exist_ok=True)
        shutil.copy2(CHECKOUT / "nbgrader_config.py", course / "nbgrader_config.py")
        shutil.copytree(CHECKOUT / "exercises", course / "exercises", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "problem_data.yaml"))
        say(f"course folder {course} created")
    ensure_course_data(course / "exercises" / "problem_data.yaml", owner)
    ensure_due_dates(course / "exercises" / "due_dates.yaml", owner)
    checks = course / "exercises" / "checks.yaml"  # limits of the check service, kept once edited
    if not checks.exists() and (CHECKOUT / "exercises" / "checks.yaml").exists():
        shutil.copy2(CHECKOUT / "exercises" / "checks.yaml", checks)
    jupyter = Path(account.pw_dir) / ".jupyter"
    jupyter.mkdir(exist_ok=True)
    (jupyter / "nbgrader_config.py").write_text(
        '"""The Formgrader and nbgrader commands run outside the course folder grade this course."""\n'
        "from rbtutor.course.nbgrader import configure\n\n"
        f'configure(get_config(), "{course}")  # noqa: F821\n')
    profile = Path(account.pw_dir) / ".profile"
    url = gradebook_url()
    line = (f"export RBTUTOR_EXCHANGE={EXCHANGE} RBTUTOR_DUE_DATES={DUE_DATES} PATH={VENV}/bin:$PATH"
            + (f" RBTUTOR_GRADEBOOK={url}" if url else "") + "  # rbtutor hub\n")
    text = profile.read_text() if profile.exists() else ""
    if line not in text:
        kept = [old for old in text.splitlines(keepends=True) if not old.rstrip().endswith("# rbtutor hub")]
        profile.write_text("".join(kept) + line)
    for path in [course, *course.rglob("*"), jupyter, *jupyter.rglob("*"), profile]:
        os.lchown(path, *owner)


def ensure_course_data(link: Path, owner: tuple[int, int]) -> None:
    """:data:`COURSE_DATA`, written once with variants on, and ``link`` (the course's data file) to it.

    The personalising service (:data:`FETCH_USER`) must read the course data, and the
    instructor's course folder is private, so the file lives outside it, readable by
    :data:`STAFF_GROUP` only (its salt decides every student's numbers), and the course links to
    it. A data file the course folder already had is moved there (variants as it says).
    """
    gid = staff_folder(COURSE_DATA.parent, owner)
    if link.is_file() and not link.is_symlink() and not COURSE_DATA.exists():
        shutil.move(link, COURSE_DATA)
    if not COURSE_DATA.exists():
        COURSE_DATA.write_text(
            "# The course's problem data, merged over rbtutor's reference data (python -m rbtutor data --help).\n"
            "# Each student fetches their own numbers, derived from their user name and this salt; the\n"
            "# reference data stay the instructor's own variant. Keep it from the students: with the salt,\n"
            "# anyone can work out every student's numbers.\n"
            f"variants:\n  per_student: true\n  salt: {secrets.token_hex(8)}\n")
        say(f"course data {COURSE_DATA} written: per-student variants on")
    os.chown(COURSE_DATA, owner[0], gid)
    os.chmod(COURSE_DATA, 0o640)
    if link.is_symlink() and os.readlink(link) != str(COURSE_DATA):
        link.unlink()
    if not link.is_symlink():
        if link.exists():
            say(f"{link} is not linked to {COURSE_DATA}: the students' numbers come from {COURSE_DATA}")
        else:
            link.symlink_to(COURSE_DATA)



def staff_folder(folder: Path, owner: tuple[int, int]) -> int:
    """``folder`` (made when missing) owned by the instructor ``owner`` and the group :data:`STAFF_GROUP`,
    mode 2750: no student enters it, and what the instructor writes there later, without root,
    belongs to the group, so the services of the staff read it. Returns the group's id."""
    import grp

    gid = grp.getgrnam(STAFF_GROUP).gr_gid
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, owner[0], gid)
    os.chmod(folder, 0o2750)
    return gid


def ensure_due_dates(link: Path, owner: tuple[int, int], target: Path = DUE_DATES) -> None:
    """The course's ``exercises/due_dates.yaml``, a link to ``target`` beside the course data.

    The personalising service shows each student their own due date (extensions included) and
    cannot read the private course folder, so the file lives where :data:`COURSE_DATA` does, in a
    folder of the instructor's and :data:`STAFF_GROUP`'s (:func:`staff_folder`), and the course
    links to it. The link is made even before there is a file: the instructor's first write to
    ``exercises/due_dates.yaml`` makes ``target``, and every later edit through the link reaches
    the service at its next fetch (it reads the file for each one), with no root and no restart.
    A regular file the instructor has written in the course folder instead is the newest word:
    it replaces ``target`` and the link is made (here, and in every ``make grade`` and
    ``make assignments`` of the instructor's, :func:`rbtutor.course.late.publish_due_dates`).
    """
    gid = staff_folder(target.parent, owner)
    if link.is_file() and not link.is_symlink():
        shutil.move(link, target)
        say(f"{link} moved to {target} (linked back), where the fetch service reads it")
    if target.exists():
        os.chown(target, owner[0], gid)
        os.chmod(target, 0o640)
    if link.is_symlink() and os.readlink(link) != str(target):
        link.unlink()
    if not link.is_symlink() and not link.exists():
        link.symlink_to(target)
        os.lchown(link, *owner)


# --- the PostgreSQL gradebook (make hub GRADEBOOK=postgres)
def postgres_server(password: str | None = None):
    sys.path.insert(0, str(HERE))
    from pgserver import PostgresServer

    return PostgresServer(PG_FOLDER, PG_PORT, password=password)


def ensure_postgres() -> str:
    """Start the course's PostgreSQL server (created the first time) and return the gradebook URL.

    Where systemd runs, the server is its service :data:`PG_UNIT`; elsewhere ``pg_ctl`` starts it."""
    sys.path.insert(0, str(HERE))
    from pgserver import PostgresError

    try:
        secret = STATE / "postgres_password"  # root only (STATE is 0700)
        if not secret.exists():
            secret.write_text(secrets.token_urlsafe(18) + "\n")
            os.chmod(secret, 0o600)
        server = postgres_server(secret.read_text().strip())
        if systemd_running():
            server.create()
            install_unit(PG_UNIT, server.systemd_unit(PG_DESCRIPTION))
            run("systemctl", "enable", "--now", PG_UNIT)
            server.wait_ready()
        elif not (server.data / "PG_VERSION").exists() or not server.running():
            server.start()
        url = server.create_database(COURSE_ID)
    except PostgresError as exc:
        raise HubError(str(exc)) from exc
    GRADEBOOK_URL_FILE.write_text(url + "\n")
    os.chmod(GRADEBOOK_URL_FILE, 0o600)
    say(f"gradebook on PostgreSQL at 127.0.0.1:{PG_PORT}, database {COURSE_ID} (URL with its password: "
        f"{GRADEBOOK_URL_FILE}, root only)")
    return url


def stop_postgres() -> None:
    if under_systemd(PG_UNIT):
        run("systemctl", "disable", "--now", PG_UNIT)
        say("PostgreSQL stopped (and will not start at boot)")
        return
    if not (PG_FOLDER / "data" / "PG_VERSION").exists():
        return
    postgres_server().stop()
    say("PostgreSQL stopped")


def gradebook_url() -> str | None:
    """The PostgreSQL gradebook URL when the hub was set up with one, else None (SQLite in the course)."""
    try:
        return GRADEBOOK_URL_FILE.read_text().strip() or None
    except OSError:
        return None


# --- systemd where it runs (as The Littlest JupyterHub does), pid files where it does not
PG_DESCRIPTION = "PostgreSQL server of the rbtutor course gradebook (written by hub/hubctl.py)"


def systemd_running() -> bool:
    """Whether systemd is this machine's init system (the test of ``sd_booted(3)``)."""
    return Path("/run/systemd/system").is_dir()


def under_systemd(unit: str) -> bool:
    """Whether ``unit`` is run by systemd here: systemd runs, and :func:`install_unit` wrote it."""
    return systemd_running() and (SYSTEMD_UNITS / unit).exists()


def hub_argv() -> list[str]:
    """The hub's command line, for both ways of starting it."""
    return [str(VENV / "bin" / "jupyterhub"), "-f", str(HERE / "jupyterhub_config.py")]


def hub_path() -> str:
    return f"{VENV / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def hub_unit(postgres: bool = False) -> str:
    """The systemd service of the hub: what :func:`start` runs without systemd, and the same stop.

    ``KillMode=mixed`` sends SIGTERM to the hub alone, which stops its proxy, servers and
    services itself; whatever is left after ``TimeoutStopSec`` is killed, as :func:`stop` does.
    With the PostgreSQL gradebook, the hub needs :data:`PG_UNIT` and starts after it. Each start puts
    the limits on students' connections in force first (nftables' rules do not outlive a reboot); when
    they cannot be, the hub starts all the same, with the reason in the journal."""
    needs = f"Requires={PG_UNIT}\nAfter={PG_UNIT}\n" if postgres else ""
    return ("[Unit]\nDescription=JupyterHub of the rbtutor course (written by hub/hubctl.py)\n"
            f"After=network-online.target\nWants=network-online.target\n{needs}\n"
            f"[Service]\nUser=root\nWorkingDirectory={STATE}\nEnvironment=PATH={hub_path()}\n"
            f"ExecStartPre=-{VENV / 'bin' / 'python'} {HERE / 'hubctl.py'} limits\n"
            f"ExecStart={' '.join(hub_argv())}\nStandardOutput=append:{LOG}\nStandardError=inherit\n"
            "KillMode=mixed\nTimeoutStopSec=45\nRestart=on-failure\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def units(postgres: bool) -> dict[str, str]:
    """Every unit of this deployment by file name: the hub's, and PostgreSQL's with that gradebook."""
    written = {HUB_UNIT: hub_unit(postgres)}
    if postgres:
        sys.path.insert(0, str(HERE))
        from pgserver import PostgresError

        try:
            written[PG_UNIT] = postgres_server().systemd_unit(PG_DESCRIPTION)
        except PostgresError as exc:
            raise HubError(str(exc)) from exc
    return written


def install_unit(name: str, text: str) -> None:
    """Write ``name`` into :data:`SYSTEMD_UNITS` when it changed, and have systemd read it again."""
    path = SYSTEMD_UNITS / name
    if path.exists() and path.read_text() == text:
        return
    path.write_text(text)
    run("systemctl", "daemon-reload")


def unit_state(unit: str) -> str:
    """``systemctl is-active``'s word for ``unit``: active, activating, failed, inactive, ..."""
    return subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True).stdout.strip()


def hub_service_ended() -> str | None:
    """How the hub's service ended (for :func:`wait_until_up`), or None while it runs or starts."""
    state = unit_state(HUB_UNIT)
    return None if state in ("active", "activating", "reloading") else f"service {HUB_UNIT} is {state}"


# --- the hub process
def hub_pid() -> int | None:
    """The running hub's pid, or None."""
    if under_systemd(HUB_UNIT):
        shown = subprocess.run(["systemctl", "show", "--property=MainPID", "--value", HUB_UNIT],
                               capture_output=True, text=True).stdout.strip()
        return int(shown) if shown.isdigit() and int(shown) > 0 else None
    try:
        pid = int(PID_FILE.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return pid if b"jupyterhub" in cmdline else None


def wait_until_up(ended, timeout: float = 90.0) -> None:
    """Wait until the hub answers on :data:`URL`; ``ended()`` says how it ended, or None while it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        how = ended()
        if how is not None:
            raise HubError(f"JupyterHub {how}; last lines of {LOG}:\n"
                           + "\n".join(LOG.read_text(errors="replace").splitlines()[-25:]))
        try:
            with urllib.request.urlopen(f"{URL}/hub/api", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise HubError(f"JupyterHub did not answer on {URL} within {timeout:.0f} s; see {LOG}")


def hub_ports() -> list[int]:
    """The loopback ports of this deployment that every account can reach: the proxy, its API, the
    hub's API, the course's services and PostgreSQL (not the users' own servers)."""
    urls = (URL, CHECK_URL, FETCH_URL, GRADING_URL)
    return sorted({*(urllib.parse.urlsplit(url).port for url in urls), HUB_PORT, PROXY_API_PORT, PG_PORT})


def limit_connections() -> bool:
    """Put hub/netlimits.py's per-account limits on :func:`hub_ports` in force, the instructors exempt;
    False, with a warning saying why, when they cannot be."""
    import pwd

    exempt = [pwd.getpwnam(name).pw_uid for name in INSTRUCTORS if user_exists(name)]
    try:
        netlimits.apply(hub_ports(), exempt)
    except netlimits.LimitsError as exc:
        say(f"WARNING: no limits on students' connections to the hub's ports: {exc}. One student's processes "
            "can then keep the check service and the proxy busy for everyone (Operator guide, the hub page).")
        return False
    say(f"each student account may hold {netlimits.OPEN_AT_ONCE} connections to the hub's ports and open "
        f"{netlimits.PER_SECOND} a second (nftables table {netlimits.TABLE})")
    return True


def start(extra_env: dict[str, str] | None = None) -> int:
    """Start JupyterHub in the background; return its pid once it answers.

    Where systemd runs, the hub is the service :data:`HUB_UNIT`, enabled so that it starts at
    boot (``extra_env`` is then not used); elsewhere a process of its own, its pid in :data:`PID_FILE`."""
    pid = hub_pid()
    if pid:
        say(f"already running (pid {pid}) on {URL}; `make hub-stop` first to restart it")
        return pid
    end_leftovers()  # a server or service of a hub that was killed would hold its port
    limit_connections()
    LOG.touch()
    os.chmod(LOG, 0o600)  # the servers and services log there: root only
    if systemd_running():
        install_unit(HUB_UNIT, hub_unit(postgres=gradebook_url() is not None))
        run("systemctl", "enable", "--now", HUB_UNIT)
        wait_until_up(hub_service_ended)
        pid = hub_pid()
        say(f"JupyterHub is up on {URL} (systemd service {HUB_UNIT}, pid {pid}, log {LOG}); "
            f"passwords in {PASSWORDS}")
        return pid
    env = {**os.environ, **(extra_env or {}), "PATH": f"{VENV / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_DIR", None)
    with LOG.open("ab") as log:
        process = subprocess.Popen(hub_argv(), cwd=STATE, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    PID_FILE.write_text(f"{process.pid}\n")
    wait_until_up(lambda: None if process.poll() is None else f"exited with status {process.returncode}")
    say(f"JupyterHub is up on {URL} (pid {process.pid}, log {LOG}); passwords in {PASSWORDS}")
    return process.pid


def leftover_processes() -> dict[int, str]:
    """Processes of this deployment other than the hub itself, by pid, with their command lines.

    The proxy (the pid JupyterHub wrote), every single-user server started from :data:`VENV` or
    :data:`STUDENT_VENV`, and the services (``-m rbtutor.course...`` and ``-m rbtutor lms``, by VENV's interpreter).
    A hub that stops cleanly ends them itself; one that has to be killed leaves them running
    (the spawner starts each in a session of its own), still bound to their ports.
    """
    servers = tuple(str(env / "bin" / "jupyterhub-singleuser") for env in (VENV, STUDENT_VENV))
    try:
        proxy = int((STATE / "proxy.pid").read_text().strip())
    except (OSError, ValueError):
        proxy = None
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:  # it ended while we looked
            continue
        ours = (int(entry.name) == proxy
                or any(arg in servers for arg in argv[:2])
                or (argv[:1] == [str(VENV / "bin" / "python")] and len(argv) > 2 and argv[1] == "-m"
                    and (argv[2].startswith("rbtutor.course.") or argv[2:4] == ["rbtutor", "lms"])))
        if ours:
            found[int(entry.name)] = " ".join(argv)[:160]
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has ended; only its parent has not collected it
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_gone(pids, timeout: float) -> list[int]:
    """Wait until every pid has ended or ``timeout`` seconds have passed; return those still running."""
    deadline = time.monotonic() + timeout
    running = [pid for pid in pids if alive(pid)]
    while running and time.monotonic() < deadline:
        time.sleep(0.2)
        running = [pid for pid in running if alive(pid)]
    return running


def end_leftovers(grace: float = 10.0) -> None:
    """SIGTERM the deployment's leftover processes, SIGKILL those still there after ``grace`` seconds."""
    left = leftover_processes()
    if not left:
        return
    say(f"ending {len(left)} process(es) the hub left running: " + "; ".join(f"{p} {c}" for p, c in left.items()))
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in wait_gone(left, grace):
        say(f"pid {pid} did not end within {grace:.0f} s of SIGTERM: killed")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def stop(timeout: float = 45.0) -> bool:
    """Stop the hub (it stops its proxy, the users' servers and the services); True if one was running.

    JupyterHub stops the services one after the other, then the servers together (each gets
    SIGINT, then SIGTERM and SIGKILL after the spawner's timeouts, 20 s at most). A hub still
    running after ``timeout`` seconds is killed with its process group, and whatever it left
    (:func:`leftover_processes`) is ended here, so that the next start finds no stale server.
    Where systemd runs the hub, ``systemctl disable --now`` does the same (``TimeoutStopSec``),
    and the hub no longer starts at boot.
    """
    pid = hub_pid()
    if under_systemd(HUB_UNIT):
        started = time.monotonic()
        run("systemctl", "disable", "--now", HUB_UNIT)
        say(f"hub stopped in {time.monotonic() - started:.1f} s (systemd service {HUB_UNIT}, disabled)")
    elif pid is None:
        say("no hub running")
    else:
        os.kill(pid, signal.SIGTERM)
        started = time.monotonic()
        if wait_gone([pid], timeout):
            say(f"hub pid {pid} did not stop within {timeout:.0f} s: killing its process group; last lines of "
                f"{LOG}:\n" + "\n".join(LOG.read_text(errors="replace").splitlines()[-15:]))
            os.killpg(pid, signal.SIGKILL)
            wait_gone([pid], 10)
        else:
            say(f"hub stopped in {time.monotonic() - started:.1f} s")
        PID_FILE.unlink(missing_ok=True)
    end_leftovers()
    return pid is not None


def up(start_hub: bool = True, gradebook: str = "sqlite", student_book: bool = False) -> None:
    require_root()
    STATE.mkdir(parents=True, exist_ok=True)
    ensure_venv()  # first: the accounts' names are checked with rbtutor's rule
    ensure_accounts()
    protect_package()
    install_fetch_client(VENV)  # the instructor's server reads the same nbgrader config
    ensure_student_env()
    if gradebook == "postgres":
        ensure_postgres()
    else:
        GRADEBOOK_URL_FILE.unlink(missing_ok=True)  # SQLite in the course folder (the default)
    ensure_proxy()
    ensure_kernel()
    ensure_book(student_book)
    ensure_exchange()
    ensure_config()
    ensure_course()
    if start_hub:
        start()


def status() -> tuple[int, list[str]]:
    """Whether the hub runs, as ``(status, lines)``: 0 when it runs, 3 when it does not, 4 when this
    user cannot tell (as ``systemctl status`` counts), with where it answers, its gradebook and its log."""
    if not under_systemd(HUB_UNIT) and PID_FILE.parent.exists() and not os.access(PID_FILE.parent, os.R_OK | os.X_OK):
        # the pid file is root's: without reading it "not running" would be a guess
        return 4, [f"cannot tell whether the course hub runs: {PID_FILE.parent} is readable by root only",
                   "ask with: sudo rbtutor hub status"]
    pid = hub_pid()
    gradebook = "PostgreSQL (started by this set-up)" if gradebook_url() else f"SQLite in {course_folder()}"
    if pid is None:
        lines = ["the course hub is not running" + (f" (service {HUB_UNIT}: {unit_state(HUB_UNIT)})"
                                                    if under_systemd(HUB_UNIT) else ""),
                 "start it with: sudo rbtutor hub up"]
        return 3, lines
    how = f"service {HUB_UNIT}" if under_systemd(HUB_UNIT) else f"pid file {PID_FILE}"
    return 0, [f"the course hub is running: pid {pid} ({how})", f"address: {URL}",
               f"gradebook: {gradebook}", f"the book's notebooks run for: {book_readers()}", f"log: {LOG}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=os.environ.get("RBTUTOR_PROG", "hub/hubctl.py"),
                                     description=__doc__.splitlines()[0],
                                     epilog="example: sudo rbtutor hub up --gradebook postgres")
    parser.add_argument("command", choices=["up", "down", "status", "setup", "units", "limits"],
                        help="up: set up and start; setup: set up only; down: stop (and lift the limits); "
                             "limits: put the limits on students' connections to the hub's ports in force "
                             "(up does; exit 1 when they cannot be); status: whether it runs "
                             "(exit 0) or not (exit 3), or cannot be told without root (exit 4); "
                             "units: write the systemd units `up` installs where systemd runs into --into, "
                             "to read or install by hand")
    parser.add_argument("--into", type=Path, help="units: the folder to write them into")
    parser.add_argument("--gradebook", choices=["sqlite", "postgres"], default="sqlite",
                        help="where the course gradebook lives: SQLite in the course folder (default) or a "
                             "PostgreSQL server started here (several graders at once)")
    parser.add_argument("--student-book", action="store_true",
                        help="students may run the book's notebooks on the hub, in a kernel with rbtutor, "
                             "whose functions compute the answers to their own numbers (default: the "
                             "course's account only)")
    args = parser.parse_args(argv)
    if args.command == "units" and args.into is None:
        parser.error("units needs --into FOLDER")
    try:
        if args.command == "status":
            code, lines = status()
            print("\n".join(lines))
            return code
        if args.command == "units":
            for name, text in units(postgres=args.gradebook == "postgres").items():
                (args.into / name).write_text(text)
                say(f"wrote {args.into / name}")
        elif args.command == "down":
            require_root()
            stop()
            stop_postgres()
            netlimits.remove()
        elif args.command == "limits":
            require_root()
            return 0 if limit_connections() else 1
        else:
            up(start_hub=args.command == "up", gradebook=args.gradebook, student_book=args.student_book)
    except (HubError, subprocess.CalledProcessError) as exc:
        print(f"hub: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
