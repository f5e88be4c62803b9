"""The grading benchmark's own parts: the per-run cgroup that counts CPU, the class it grades, and
the alternating rounds it measures in."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import alternating  # noqa: E402
import grading_class  # noqa: E402
import run_cgroup  # noqa: E402
from grading_class import SAME_ASSIGNMENTS, ClassShape, parse_shape, plan  # noqa: E402
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


def test_the_benchmark_modules_examples_hold():
    """The docstring examples of the benchmark's modules (outside pytest's testpaths) are run here."""
    for module in (alternating, grading_class, run_cgroup):
        result = doctest.testmod(module)
        assert result.attempted > 0, module.__name__
        assert result.failed == 0, (module.__name__, result)


def test_plan_has_every_student_hand_in_the_same_assignments():
    names = ["problem03", "problem10"]
    subs = plan(300, names)
    assert len(subs) == 600
    assert len({(s.student, s.assignment) for s in subs}) == 600
    for name in names:  # 300 students each, about one in four of them wrong
        handed = [s for s in subs if s.assignment == name]
        assert len({s.student for s in handed}) == 300
        assert 70 <= sum(s.kind == "wrong" for s in handed) <= 76
    assert [(s.student, s.assignment) for s in subs if s.kind == "slow"] == [("s0150", "problem03")]
    with pytest.raises(ValueError, match="expected at least one student"):
        plan(0, names)


def test_the_largest_class_has_at_least_thirty_students_an_assignment():
    names = [f"problem{k:02d}" for k in range(1, 12)]
    subs = plan(parse_shape("273xall").students, names)
    assert len(subs) == 3003
    assert min(sum(s.assignment == name for s in subs) for name in names) == 273


def test_class_shapes_read_from_bench_class():
    assert parse_shape("30") == ClassShape(30, SAME_ASSIGNMENTS)
    assert parse_shape(" 12 x all") == ClassShape(12, None)
    for bad in ("0", "thirty", "30x2", ""):
        with pytest.raises(ValueError, match="expected a class such as 30"):
            parse_shape(bad)


def test_class_notebooks_differ_in_numbers_and_text(tmp_path):
    from grading_class import make_class

    subs = make_class(tmp_path / "course", ClassShape(2))  # s0000 right and wrong, s0001 slow and right
    submitted = tmp_path / "course" / "submitted"
    assert sorted(p.relative_to(submitted).as_posix() for p in submitted.glob("*/*/*.ipynb")) == [
        f"{student}/{name}/{name}.ipynb" for student in ("s0000", "s0001") for name in SAME_ASSIGNMENTS]
    first, second = (nbformat.read(submitted / s / "problem03" / "problem03.ipynb", 4) for s in ("s0000", "s0001"))
    data = [next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "problem_data")
            for nb in (first, second)]
    assert data[0] != data[1], "each student computes with their own numbers"
    assert "s0001: my working" in "".join(c.source for c in second.cells)
    assert "a slow loop" in second.cells[-1].source
    assert "a slow loop" not in first.cells[-1].source
    wrong = nbformat.read(submitted / "s0000" / "problem10" / "problem10.ipynb", 4)
    assert any("# a slip" in c.source for c in wrong.cells)
    assert {s.kind for s in subs} == {"right", "wrong", "slow"}
    with pytest.raises(ValueError, match="expected assignments of the course"):
        make_class(tmp_path / "other", ClassShape(1, ("problem99",)))


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


def test_contenders_are_measured_in_turn_with_the_load_of_each_run(tmp_path):
    """A B A B, not A A B B: each run notes when it ran and the load it met; each median is over its own runs."""
    import bench_grading

    order = []

    def work(label, seconds):
        def run(where):
            order.append((label, where.name))
            return seconds
        return run

    series = bench_grading.alternate({"A": (None, work("A", 2.0)), "B": (lambda where: where.mkdir(), work("B", 4.0))},
                                     2, 2, tmp_path)
    assert order == [("A", "A-0"), ("B", "B-0"), ("A", "A-1"), ("B", "B-1")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["B-1"], "each folder removed once its contender ran again"
    assert [r.wall_per for r in series["B"]] == [2.0, 2.0]
    assert all(r.load >= 0 for runs in series.values() for r in runs)
    assert bench_grading.median_of(series["A"], "wall") == 2.0


def test_in_turn_and_spread_refuse_nothing_to_measure():
    from alternating import in_turn, repeat_count, spread

    assert [label for _, label in in_turn(["x", "y"], 3)] == ["x", "y"] * 3
    assert (spread([3.0, 1.0, 2.0]).median, spread([3.0, 1.0, 2.0]).low, spread([3.0, 1.0, 2.0]).high) == (2, 1, 3)
    with pytest.raises(ValueError, match="at least one round"):
        in_turn(["x"], 0)
    with pytest.raises(ValueError, match="at least one measurement"):
        spread([])
    for bad in ("0", "three", "-1"):
        with pytest.raises(ValueError, match="BENCH_REPEAT: expected a count"):
            repeat_count(bad)


def test_targets_compare_medians_with_the_cheaper_and_the_faster_stock_run():
    """CPU against the stock run of lower median CPU, wall against the one of lower median wall."""
    from bench_grading import Run, own_cost_target, stock_targets

    def runs(label, pairs):
        return [Run(label, wall, cpu, None, 10) for wall, cpu in pairs]

    serial = runs("serial", [(20, 30), (25, 28), (90, 29)])  # medians: wall 25, CPU 29
    parallel = runs("parallel", [(18, 60), (19, 61), (30, 62)])  # medians: wall 19, CPU 61
    ours = runs("make grade", [(3, 9), (3.5, 10), (9, 11)])  # medians: wall 3.5, CPU 10
    (cpu_name, share, _, share_ok), (wall_name, speed, _, speed_ok) = stock_targets([serial, parallel], ours)
    assert "serial" in cpu_name
    assert share == pytest.approx(10 / 29)
    assert not share_ok  # above a third
    assert "parallel" in wall_name
    assert speed == pytest.approx(19 / 3.5)
    assert not speed_ok  # below 6
    alone = runs("execution only", [(2, 8.5), (2, 9), (2, 12)])
    name, ratio, _, ok = own_cost_target(ClassShape(30), ours, alone)
    assert ratio == pytest.approx(10 / 9)
    assert ok
    assert "class 30" in name


def test_lower_bound_takes_the_keys_and_imports_from_the_own_cost_allowance(capsys):
    """A fifth of execution only's CPU a notebook, less the class's keys and the grading process's
    imports, each spread over the class's notebooks."""
    from bench_grading import IMPORTS_LABEL, KEYS_LABEL, OWN_COST_TARGET, Run, lower_bound

    class_plan = plan(30, list(SAME_ASSIGNMENTS))  # 60 notebooks
    alone = [Run("execution only", 20.0, cpu, None, 60) for cpu in (27.0, 30.0, 45.0)]  # median 0.5 a notebook
    allowed, keys, imports = lower_bound(class_plan, {"execution only": alone}, "execution only",
                                         [("another line", 9.0), (KEYS_LABEL, 2.4), (IMPORTS_LABEL, 1.8)])
    assert allowed == pytest.approx((OWN_COST_TARGET - 1) * 0.5)
    assert (keys, imports) == (pytest.approx(0.04), pytest.approx(0.03))
    printed = capsys.readouterr().out
    assert f"leaves {allowed * 1e3:.0f} CPU ms" in printed
    assert f"leaving {(allowed - keys - imports) * 1e3:.0f} for intake" in printed


def test_make_grades_progress_lines_are_read():
    """The benchmark reads rbtutor grade's own progress lines, with and without the time left."""
    from bench_grading import PROGRESS

    from rbtutor.course.grade.run import progress_line

    for line in (progress_line(3, 60, "s0001", "problem03", "11/13 autograded", 0.43, 5.0),
                 progress_line(60, 60, "s0002", "problem10", "9.5/10 autograded", 1.25, 9.0)):
        found = PROGRESS.match(line)
        assert found is not None, line
        assert found.group(1).startswith("s000")
        assert float(found.group(3)) in (11, 9.5)
        assert float(found.group(5)) in (0.4, 1.2)
