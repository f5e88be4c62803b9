"""The grading benchmark's own parts: the per-run cgroup that counts CPU, and the class it grades."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from grading_class import WRONG_EVERY, plan  # noqa: E402
from run_cgroup import RunGroup, own_cgroups, v2_usage_seconds  # noqa: E402


def test_own_cgroups_reads_v1_and_v2_lines():
    text = "12:memory:/process_api/abc\n3:cpu,cpuacct:/\n0::/user.slice/x.scope\n"
    assert own_cgroups(text) == {"memory": "/process_api/abc", "cpu": "/", "cpuacct": "/",
                                 "": "/user.slice/x.scope"}
    with pytest.raises(ValueError, match="expected 'id:controllers:path'"):
        own_cgroups("garbage\n")


def test_v2_usage_needs_its_line():
    assert v2_usage_seconds("usage_usec 1500000\nuser_usec 1000000\n") == 1.5
    with pytest.raises(ValueError, match="usage_usec"):
        v2_usage_seconds("user_usec 5\n")


def test_plan_spreads_submissions_over_students_with_one_slow_and_some_wrong():
    names = [f"problem{k:02d}" for k in range(1, 12)]
    subs = plan(300, names)
    assert len({(s.student, s.assignment) for s in subs}) == 300
    assert [s.kind for s in subs].count("slow") == 1
    assert [s.kind for s in subs].count("wrong") == sum(1 for k in range(300) if k % WRONG_EVERY == 1) - (
        1 if 150 % WRONG_EVERY == 1 else 0)
    assert len({s.student for s in subs}) == 28
    with pytest.raises(ValueError, match="expected at least one submission"):
        plan(0, names)


def test_class_notebooks_differ_in_numbers_and_text(tmp_path):
    from grading_class import make_class

    subs = make_class(tmp_path / "course", 13)  # s0000 has all twelve, s0001 problem01
    first, second = (nbformat.read(tmp_path / "course" / "submitted" / s / "problem01" / "problem01.ipynb", 4)
                     for s in ("s0000", "s0001"))
    data = [next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "problem_data")
            for nb in (first, second)]
    assert data[0] != data[1], "each student computes with their own numbers"
    assert "s0001: my working" in "".join(c.source for c in second.cells)
    assert {s.kind for s in subs} == {"right", "wrong", "slow"}


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root")
def test_run_group_counts_a_grandchild_nobody_waits_for():
    """getrusage misses the CPU of a process whose parent exits without waiting; the run's group does not."""
    burn = "import os,time\nif os.fork()==0:\n    t=time.process_time()\n    while time.process_time()-t<0.5: pass\n"
    with RunGroup("test") as group:
        subprocess.run([sys.executable, "-c", burn], check=True)  # the child exits; its orphan burns 0.5 s
    if group.usage.source.startswith("getrusage"):
        if os.environ.get("CI"):
            pytest.fail(f"expected a cgroup as root in CI, got {group.usage.source}")
        pytest.skip(group.usage.source)
    assert group.usage.cpu >= 0.5, group.usage


@pytest.mark.skipif(os.geteuid() != 0, reason="making a cgroup needs root")
def test_run_group_tells_processes_memory_from_the_page_cache_of_written_files(tmp_path):
    """A child that holds 200 MB for a moment is in the processes' peak; a 300 MB file written by
    the run is in the group's peak (page cache) and not in the processes'."""
    hold = ("import select,sys\nblock = bytearray(200 * 2**20)\nblock[::4096] = b'x' * len(block[::4096])\n"
            "print('held', flush=True)\nselect.select([sys.stdin], [], [])\n")
    with RunGroup("memory") as group:
        child = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        assert child.stdout.readline() == "held\n"
        deadline = time.monotonic() + 60  # until the sampler has read it
        while (group.peak_processes_so_far() or 0) < 200 * 2**20 and time.monotonic() < deadline:
            os.sched_yield()
        child.communicate("")
        with open(tmp_path / "written", "wb") as out:
            for _ in range(300):
                out.write(b"y" * 2**20)
    if group.usage.source.startswith("getrusage"):
        if os.environ.get("CI"):
            pytest.fail(f"expected a cgroup as root in CI, got {group.usage.source}")
        pytest.skip(group.usage.source)
    assert 200 * 2**20 <= group.usage.peak_processes < 290 * 2**20, group.usage
    assert group.usage.peak_memory >= 300 * 2**20, group.usage
