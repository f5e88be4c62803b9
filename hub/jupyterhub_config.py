"""JupyterHub for the course on one machine (``make hub``; see hub/hubctl.py for what it sets up).

* Log-in with the machine's Unix accounts and passwords (PAM); the accounts, their groups and
  the paths are those of hubctl.py. When the course's ``course.toml`` has an ``[lms]`` section,
  log-in from the LMS instead (LTI 1.3, rbtutor.lms.authenticator): accounts are made at a user's
  first launch, the tool's public keys are at /hub/lti13/jwks, an instructor's deep-linking launch
  picks a released assignment at /hub/lti13/deep_link, and a third service, the LMS sender
  (``rbtutor lms sync --every``, as root: only root reads the tool keys), posts the grades the
  instructor's ``rbtutor feedback`` queued, within hubctl.LMS_SEND_EVERY seconds; it logs to the hub's log.
* Each user's server is started as that Unix user (course_spawner.py: LocalProcessSpawner, with a
  start page that says how far along it is), in their home, with JupyterLab: an instructor's
  from the course environment /opt/rbtutor/venv, a student's from /opt/rbtutor/student, which
  has no rbtutor (hubctl.STUDENT_VENV).
* Course membership comes from the hub's groups ``formgrade-rbtutor`` (instructors) and
  ``nbgrader-rbtutor`` (students); each server's token may read its own user's groups, which is
  what nbgrader's JupyterHubAuthPlugin asks.
* Students' servers read the student role's configuration (no Formgrader, no Create
  Assignment, no course list, only the students' kernel); the course account's the instructor
  role's; any other instructor's or TA's the grader role's: their own server has the course list,
  which leads to the course's shared Formgrader, the hub service ``rbtutor`` run as the course's
  account in its folder (as nbgrader's demo of one class with several graders does), since their
  own home holds no course.
* Two services run beside the hub: the instant checks (rbtutor.course.checks, as the
  instructor) and the personalising Fetch (rbtutor.course.fetch_service, as its own account
  hubctl.FETCH_USER), which gives each student the released notebook with their own numbers;
  the course's groups may reach both.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hubctl

c = get_config()  # noqa: F821 - provided by JupyterHub

c.JupyterHub.bind_url = hubctl.URL
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = hubctl.HUB_PORT
c.JupyterHub.db_url = f"sqlite:///{hubctl.STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(hubctl.STATE / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.command = [str(hubctl.PROXY)]
c.ConfigurableHTTPProxy.pid_file = str(hubctl.STATE / "proxy.pid")

from rbtutor.course.settings import load_settings  # noqa: E402

_students = hubctl.students()  # /etc/rbtutor/students.txt, or the demo's student1..3

_lms = load_settings(hubctl.course_folder()).lms  # course.toml's [lms]: log-in from the LMS; none: PAM
_lms_services = []  # with [lms]: the LMS sender
if _lms is None:
    c.JupyterHub.authenticator_class = "pam"
    c.PAMAuthenticator.open_sessions = False  # no login sessions (systemd-logind) for a notebook server
    c.Authenticator.allowed_users = {*hubctl.INSTRUCTORS, *_students}
else:  # LTI 1.3 (rbtutor.lms.authenticator): whoever the LMS launches and the course's checks admit
    from rbtutor.lms.keys import ToolKeys

    ToolKeys(hubctl.LTI_KEYS).ensure()  # made once; published at /hub/lti13/jwks
    c.JupyterHub.authenticator_class = "rbtutor.lms.authenticator.CourseLTIAuthenticator"
    c.Authenticator.allow_all = True
    _lti = c.CourseLTIAuthenticator
    _lti.issuer, _lti.client_id, _lti.deployment_ids = _lms.issuer, {_lms.client_id}, set(_lms.deployment_ids)
    _lti.authorize_url, _lti.jwks_endpoint, _lti.account_claim = _lms.auth_url, _lms.jwks_url, _lms.account_claim
    _lti.gradebook_url = hubctl.gradebook_url() or f"sqlite:///{hubctl.course_folder() / 'gradebook.db'}"
    _lti.keys_folder = str(hubctl.LTI_KEYS)
    _lti.instructor_group, _lti.student_group = hubctl.INSTRUCTOR_GROUP, hubctl.STUDENT_GROUP
    _lti.make_account = hubctl.create_lms_account
    _lti.formgrader_url = f"/services/{hubctl.COURSE_ID}/formgrader"  # the course's shared Formgrader (below)
    # a student's first launch of an assignment fetches it as the Fetch button would, then opens it
    _lti.fetch_argv = [str(hubctl.STUDENT_VENV / "bin" / "nbgrader"), "fetch_assignment", "{assignment}"]
    _lti.fetch_env = {"PATH": f"{hubctl.STUDENT_VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
                      "JUPYTER_CONFIG_PATH": str(hubctl.ROLE_CONFIG / "student"), "JUPYTER_PATH": str(hubctl.SHARE),
                      "RBTUTOR_EXCHANGE": str(hubctl.EXCHANGE), "JUPYTERHUB_API_URL": f"http://127.0.0.1:{hubctl.HUB_PORT}/hub/api",
                      "RBTUTOR_FETCH_URL": f"{hubctl.URL}/services/rbtutor-fetch/"}
    _lti.fetch_scopes = ["access:services!service=rbtutor-fetch", "read:users:groups!user={user}",
                         "read:users:name!user={user}"]
    # deep linking: the picker lists what `rbtutor release` put into the exchange, with its points
    _lti.course_folder = str(hubctl.course_folder())
    _lti.released_folder = str(hubctl.EXCHANGE / hubctl.COURSE_ID / "outbound")
    # the LMS sender: the tool keys are root's, so the instructor's `rbtutor feedback` only queues the
    # grades; this service (run as root, as the hub is) sends what is queued, asking every few seconds
    _sender_env = {"PATH": f"{hubctl.VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                   "PYTHONUNBUFFERED": "1", "RBTUTOR_LMS_KEYS": str(hubctl.LTI_KEYS)}
    if hubctl.gradebook_url():
        _sender_env["RBTUTOR_GRADEBOOK"] = hubctl.gradebook_url()
    _lms_services = [{"name": "rbtutor-lms-sender", "cwd": str(hubctl.course_folder()), "environment": _sender_env,
                      "command": [str(hubctl.VENV / "bin" / "python"), "-m", "rbtutor", "lms", "--root",
                                  str(hubctl.course_folder()), "sync", "--every", str(hubctl.LMS_SEND_EVERY)]}]
from rbtutor.grading.student_ids import check_id  # noqa: E402

for _student in _students:  # a reserved or malformed id never becomes a hub user
    check_id(_student)
c.JupyterHub.load_groups = {
    hubctl.INSTRUCTOR_GROUP: {"users": list(hubctl.INSTRUCTORS)},
    hubctl.STUDENT_GROUP: {"users": list(_students)},
}

c.JupyterHub.spawner_class = "course_spawner.CourseSpawner"  # LocalProcessSpawner that says how far a start is
c.CourseSpawner.history_file = str(hubctl.STATE / "start_seconds.json")  # how long starts took here
c.JupyterHub.tornado_settings = {"slow_spawn_timeout": 0}  # the progress page at once, not after 10 s
c.Spawner.cmd = [str(hubctl.VENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.http_timeout = 180  # a loaded 2-core machine has been seen to need more than 90 s
c.Spawner.start_timeout = 180
c.Spawner.server_token_scopes = [
    "users:activity!user",
    "access:servers!server",
    "read:users:name!user",
    "read:users:groups!user",  # nbgrader's JupyterHubAuthPlugin: which courses this user is in
    "access:services!service=rbtutor-check",  # check() in the kernel sends this server's token
    "access:services!service=rbtutor-fetch",  # the students' Fetch sends this server's token
    "list:services", f"read:services!service={hubctl.COURSE_ID}",  # a grader's course list finds the Formgrader
]


def server_environment(role: str) -> dict[str, str]:
    """The environment of a server of ``role`` (hubctl.ROLE_TOOLS): its Jupyter configuration and the course's URLs."""
    environment = hubctl.STUDENT_VENV if role == "student" else hubctl.VENV
    env = {
        "JUPYTER_CONFIG_PATH": str(hubctl.ROLE_CONFIG / role),
        "JUPYTER_PATH": str(hubctl.SHARE),
        "PATH": f"{environment / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "RBTUTOR_ENV_BIN": str(environment / "bin"),  # /etc/profile.d/rbtutor-hub.sh: terminals keep it on PATH
        "RBTUTOR_EXCHANGE": str(hubctl.EXCHANGE),
        "RBTUTOR_ROLE": role,
        "RBTUTOR_CHECK_URL": f"{hubctl.URL}/services/rbtutor-check/",  # where check() posts
        "RBTUTOR_FETCH_URL": f"{hubctl.URL}/services/rbtutor-fetch/",  # where Fetch asks for the own numbers
    }
    if role == "instructor":  # the course's account: the gradebook, and the due dates the fetch service reads
        url = hubctl.gradebook_url()  # make hub GRADEBOOK=postgres: the Formgrader grades into PostgreSQL
        if url:
            env["RBTUTOR_GRADEBOOK"] = url
        env["RBTUTOR_DUE_DATES"] = str(hubctl.DUE_DATES)  # grade and generate keep it current
    return env


async def role_environment(spawner):
    """The user's role decides which environment and Jupyter configuration their server gets: the course's
    account (the first of hubctl.INSTRUCTORS, whose home holds the course) is the instructor, any other
    member of the instructors' group a grader, the rest students. Whoever may run the book
    (hubctl.may_run_book) also gets its kernel and, the first time, a copy of its notebooks."""
    groups = {group.name for group in spawner.user.groups}
    if hubctl.INSTRUCTOR_GROUP in groups:
        role = "instructor" if spawner.user.name == hubctl.INSTRUCTORS[0] else "grader"  # whose the course is
    else:
        role = "student"
    env = server_environment(role)
    if hubctl.may_run_book(role):
        env["JUPYTER_PATH"] += f":{hubctl.BOOK_SHARE}"
        await copy_book(spawner.user.name)
    spawner.cmd = [str(Path(env["RBTUTOR_ENV_BIN"]) / "jupyterhub-singleuser")]
    spawner.environment.update(env)


async def copy_book(name: str) -> None:
    """The book's notebooks (hubctl.BOOK) into the user's ~/rbtutor-book, unless that name is taken:
    a reader's own edits are never overwritten. ``cp`` runs as the user, so a link or folder they
    placed there decides nothing about anyone else's files."""
    import asyncio
    import pwd

    if not hubctl.BOOK.is_dir():
        return
    account = pwd.getpwnam(name)
    target = Path(account.pw_dir) / hubctl.BOOK_FOLDER
    if os.path.lexists(target):
        return
    copy = await asyncio.create_subprocess_exec(
        "cp", "-R", "--no-preserve=mode,ownership", str(hubctl.BOOK), str(target), cwd="/",
        user=account.pw_uid, group=account.pw_gid, extra_groups=[], umask=0o077,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await copy.communicate()
    if copy.returncode != 0:  # the server still starts; the reader has no book copy and the log says why
        print(f"rbtutor: the book's notebooks were not copied for {name}: {err.decode(errors='replace')[:500]}",
              flush=True)


c.Spawner.pre_spawn_hook = role_environment


# the instant-check service (rbtutor.course.checks) at /services/rbtutor-check/: started by
# the hub, run as the instructor (it reads the course data and writes its attempt log in the course
# folder); the course's users may reach it, and it may read user names and the instructors' group.
from rbtutor.course import fetch_service  # noqa: E402
from rbtutor.course.checks import service_entry  # noqa: E402

_check_service, _check_roles = service_entry(hubctl.course_folder(), str(hubctl.VENV / "bin" / "python"),
                                             url=hubctl.CHECK_URL, user=hubctl.INSTRUCTORS[0],
                                             instructor_group=hubctl.INSTRUCTOR_GROUP)
_check_service["cwd"] = str(hubctl.course_folder())
_check_roles[1]["groups"] = [hubctl.INSTRUCTOR_GROUP, hubctl.STUDENT_GROUP]

# the personalising Fetch at /services/rbtutor-fetch/: run as its own account, which may read the
# course data and the exchange's released notebooks (the instructor's, or root's) and nothing else;
# it also tells each student their own due dates and the course's late share (course.toml, read now)
_late_share, _late_source = fetch_service.course_late_share(hubctl.course_folder())
print(f"rbtutor-fetch: late share {_late_share:g} % per started day, from {_late_source}", flush=True)
_fetch_service, _fetch_roles = fetch_service.service_entry(
    hubctl.EXCHANGE / hubctl.COURSE_ID / "outbound", hubctl.COURSE_DATA, str(hubctl.VENV / "bin" / "python"),
    user=hubctl.FETCH_USER, releasers=list(hubctl.INSTRUCTORS), url=hubctl.FETCH_URL, due_dates=hubctl.DUE_DATES,
    late_percent_per_day=_late_share)
_fetch_roles[0]["groups"] = [hubctl.INSTRUCTOR_GROUP, hubctl.STUDENT_GROUP]

# the course's shared Formgrader at /services/rbtutor/ (nbgrader's set-up for one class with several
# graders): a JupyterLab run as the course's account in the course folder, which every member of the
# instructors' group may open; the LMS's instructors and TAs, whose own accounts hold no course, grade here
_grading_service = {"name": hubctl.COURSE_ID, "url": hubctl.GRADING_URL, "user": hubctl.INSTRUCTORS[0],
                    "cwd": str(hubctl.course_folder()), "oauth_no_confirm": True,
                    "command": [str(hubctl.VENV / "bin" / "jupyterhub-singleuser")],
                    "environment": {**server_environment("instructor"), "JUPYTERHUB_DEFAULT_URL": "/lab"}}
_grading_roles = [{"name": f"{hubctl.COURSE_ID}-graders", "groups": [hubctl.INSTRUCTOR_GROUP],
                   "scopes": [f"access:services!service={hubctl.COURSE_ID}", "list:services",
                              f"read:services!service={hubctl.COURSE_ID}"]},
                  # nbgrader's JupyterHubAuthPlugin in the service asks which courses its own account is in
                  {"name": f"{hubctl.COURSE_ID}-formgrader-service", "services": [hubctl.COURSE_ID],
                   "scopes": [f"read:users:name!user={hubctl.INSTRUCTORS[0]}",
                              f"read:users:groups!user={hubctl.INSTRUCTORS[0]}"]}]
c.JupyterHub.services = [_check_service, _fetch_service, _grading_service, *_lms_services]
c.JupyterHub.load_roles = [*_check_roles, *_fetch_roles, *_grading_roles]
