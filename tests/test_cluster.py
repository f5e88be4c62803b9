"""`grade --scheduler`: a class graded on a real Dask cluster gets exactly the grades of a local run.

A scheduler and two workers are started as separate processes on 127.0.0.1 from the
environment's ``dask`` command (each worker one process, one thread, no nanny, so a killed
worker stays dead as a lost machine would). A small class of Problem 3 (two honest students,
one with every answer wrong, one hostile that tries to read the course and write the
gradebook from its kernel, one slow) is graded locally and through the cluster, and every
grade is compared: clean, with a worker SIGKILLed while it grades (the scheduler shows a
grading task executing on it first), and with the client interrupted and run again. A
scheduler that cannot be reached, and workers that cannot grade the course, end the command
with status 2 and a message that says why, before anything is written.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require_sandbox
from dask_processes import DaskProcesses
from test_assignments import ROOT, grade_of, run_course, submit_as
from test_harness import AUTOGRADED, FULL, SNOOP, code_answered, insert_after, wrong_all

from rbtutor.course import api
from rbtutor.course.cluster import _running_grading_tasks, task_key

NAME = "problem03"
# student: (answer(nb, course), points expected per autograded grade id; a missing id earns 0)
CLASS = {
    "ann": (lambda nb, course: code_answered(nb), FULL),
    "ben": (lambda nb, course: code_answered(nb), FULL),
    "wrong": (wrong_all, {}),
    "snoop": (insert_after("p3_b_K", SNOOP), FULL),
    # a few seconds of work, so that a grading task is surely running when a worker is killed
    "slow": (insert_after("p3_b_K", "import time\ntime.sleep(4)"), FULL),
}
@pytest.fixture
def cluster(tmp_path):
    require_sandbox()
    processes = DaskProcesses(tmp_path / "dask")
    try:
        processes.wait_for_workers(2)
        yield processes
    finally:
        processes.close()


@pytest.fixture(scope="module")
def small_class(tmp_path_factory):
    """Problem 3 released and submitted by every student of CLASS (not yet graded)."""
    require_sandbox()
    tmp = tmp_path_factory.mktemp("cluster")
    course = tmp / "course"
    (course / "exercises").mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "exercises" / NAME, course / "exercises" / NAME,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    grader = api(course)
    assert grader.generate_assignment(NAME, force=True)["success"]
    assert grader.release_assignment(NAME)["success"]
    for student, (answer, _) in CLASS.items():
        submit_as(course, student, NAME, lambda nb, answer=answer: answer(nb, course))
    collected = run_course(course, "collect", NAME)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    return course


@pytest.fixture(scope="module")
def local_grades(small_class, tmp_path_factory):
    """The class graded here, by the local worker pool: {(student, grade id): (score, max)}."""
    course = tmp_path_factory.mktemp("local") / "course"
    shutil.copytree(small_class, course, symlinks=True)
    result = run_course(course, "grade")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    grades = grades_of(course)
    for student, (_, expected) in CLASS.items():  # the local run itself is right
        for grade_id, points in AUTOGRADED.items():
            assert grades[student, grade_id] == (expected.get(grade_id, 0.0), points), (student, grade_id)
    return grades


def grades_of(course: Path) -> dict:
    return {(student, grade_id): grade_of(course, NAME, student, grade_id)
            for student in CLASS for grade_id in AUTOGRADED}


def copy_class(small_class: Path, where: Path) -> Path:
    course = where / "course"
    shutil.copytree(small_class, course, symlinks=True)
    return course


def grade_command(course: Path, address: str) -> list[str]:
    return [sys.executable, "-m", "rbtutor.course", "--root", str(course), "grade", "--scheduler", address]


def check_run(course: Path, stdout: str) -> None:
    """Every student graded, one progress line each, the report and grades.csv written."""
    for student in CLASS:
        assert f"{student} {NAME}: " in stdout, stdout
        assert f"{student} {NAME}: NOT GRADED" not in stdout, stdout
    assert f"[{len(CLASS)}/{len(CLASS)}]" in stdout
    assert f"graded {len(CLASS)} submissions" in stdout
    rows = (course / "grades.csv").read_text().splitlines()
    assert sorted(r.split(",")[0] for r in rows[1:]) == sorted(CLASS)
    for student in CLASS:
        assert (course / "feedback" / student / NAME / f"{NAME}.html").is_file()
    assert (course / "integrity_report.json").is_file()


def test_cluster_grades_equal_local_grades(cluster, small_class, local_grades, tmp_path):
    course = copy_class(small_class, tmp_path)
    result = subprocess.run(grade_command(course, cluster.address), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "on 2 worker(s)" in result.stdout
    check_run(course, result.stdout)
    assert grades_of(course) == local_grades
    # the hostile kernel was confined on the worker as it is locally: nothing read, nothing written
    snoop = json.loads((course / "integrity_report.json").read_text())
    events = {e["kind"] for entry in snoop if entry["student"] == "snoop" for e in entry["events"]}
    assert "forbidden_path" in events
    page = (course / "feedback" / "snoop" / NAME / f"{NAME}.html").read_text()
    assert "('classmate', 'blocked')" in page.replace("&#x27;", "'").replace("&#39;", "'")
    assert "('gradebook', 'blocked')" in page.replace("&#x27;", "'").replace("&#39;", "'")


def executing_on(client) -> dict[str, list[str]]:
    """Grading tasks executing right now, by worker address (asked of each worker, not guessed)."""

    return {address: keys for address, keys in client.run(_running_grading_tasks).items() if keys}


def test_a_worker_killed_while_grading_changes_nothing(cluster, small_class, local_grades, tmp_path):
    course = copy_class(small_class, tmp_path)
    proc = subprocess.Popen(grade_command(course, cluster.address), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        with cluster.client() as client:
            pids = client.run(os.getpid)
            slow = task_key(NAME, "slow")  # its notebook sleeps 4 s: it is surely mid-task when killed
            deadline = time.monotonic() + 300
            while not (victim := next((w for w, keys in executing_on(client).items() if slow in keys), None)):
                assert proc.poll() is None, "the run ended before the slow task was seen running"
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert slow in client.processing()[victim]  # the scheduler agrees it runs there
            os.kill(pids[victim], signal.SIGKILL)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    victim_proc = next(p for p in cluster.workers if p.pid == pids[victim])
    assert victim_proc.wait(timeout=30) == -signal.SIGKILL
    check_run(course, out)
    assert grades_of(course) == local_grades
    # the task the killed worker was running was graded once more, elsewhere, and reported once
    assert out.count(f"] slow {NAME}: ") == 1


def test_interrupted_client_then_rerun_gives_the_same_grades(cluster, small_class, local_grades, tmp_path):
    course = copy_class(small_class, tmp_path)
    proc = subprocess.Popen(grade_command(course, cluster.address), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        while line and not line.startswith("grading "):  # the run says it starts: no task is back yet
            line = proc.stdout.readline()
        assert line.startswith(f"grading {len(CLASS)} submissions on "), line
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)  # safety net: the interrupt ends the client at once
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, f"the run was not interrupted: {out[-2000:]}{err[-2000:]}"
    assert "submissions in" not in out, "the run was not interrupted"
    assert "stopped by Ctrl-C; grades.csv and the reports were not written" in err, err[-2000:]
    rerun = subprocess.run(grade_command(course, cluster.address), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    check_run(course, rerun.stdout)
    assert grades_of(course) == local_grades


def test_unreachable_scheduler_exits_2_and_writes_nothing(small_class, tmp_path):
    import socket

    course = copy_class(small_class, tmp_path)
    before = {p: p.read_bytes() for p in course.rglob("*") if p.is_file()}
    with socket.socket() as taken:  # a port of 127.0.0.1 that is bound and not listening
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        result = subprocess.run(grade_command(course, f"tcp://127.0.0.1:{port}"), capture_output=True,
                                text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"cannot reach the Dask scheduler at 'tcp://127.0.0.1:{port}'" in result.stderr
    after = {p: p.read_bytes() for p in course.rglob("*") if p.is_file()}
    assert after == before, "nothing may be written when the scheduler cannot be reached"


def test_a_bad_due_dates_file_exits_2_before_grading_on_the_cluster(cluster, small_class, tmp_path):
    """As locally: exercises/due_dates.yaml is checked before any task is sent, and a broken one says why."""
    course = copy_class(small_class, tmp_path)
    (course / "exercises" / "due_dates.yaml").write_text(f"{NAME}: 2030-03-01 12:00\n")  # no time zone
    result = subprocess.run(grade_command(course, cluster.address), capture_output=True, text=True, timeout=600)
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert "rbtutor grade:" in result.stderr, result.stderr
    assert "time zone" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert "grading " not in result.stdout
    assert not (course / "grades.csv").exists()

def test_workers_that_cannot_grade_are_refused_with_the_reason(small_class, tmp_path):
    """A worker with two threads, and one that does not see the course folder (a tmpfs over it)."""
    require_sandbox()
    course = copy_class(small_class, tmp_path)
    before = {p: p.read_bytes() for p in course.rglob("*") if p.is_file()}
    processes = DaskProcesses(tmp_path / "dask", workers=0)
    try:
        processes.add_worker(["--nthreads", "2"])
        hidden = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                  f'mount -t tmpfs none "{course}" && exec "$@"', "sh"]
        probe = subprocess.run([*hidden, "true"], capture_output=True, text=True)
        if probe.returncode == 0:
            processes.add_worker(prefix=hidden)
        processes.wait_for_workers(len(processes.procs) - 1)
        result = subprocess.run(grade_command(course, processes.address), capture_output=True, text=True,
                                timeout=300)
    finally:
        processes.close()
    assert result.returncode == 2, result.stdout + result.stderr
    assert "these workers cannot grade this course" in result.stderr
    assert "2 threads; a worker grades one notebook at a time" in result.stderr
    if probe.returncode == 0:
        assert f"no {course / 'nbgrader_config.py'} on this worker" in result.stderr
    else:
        pytest.fail(f"could not start a worker without the course folder: {probe.stderr}")
    after = {p: p.read_bytes() for p in course.rglob("*") if p.is_file()}
    assert after == before
