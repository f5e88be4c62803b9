"""A control group per measured run of the benchmarks: the CPU time and peak memory of a run and of
every process it starts, whoever reaps them.

getrusage counts only the children a process waited for. A confined grading kernel is not
waited for by the grader: nbclient kills its ``bwrap``, whose child in the new PID namespace then
dies with it and is reaped by that namespace's init, so its CPU would be lost. A cgroup counts it.

:class:`RunGroup` makes a child group of the cgroup this process is in now (so that any limit
set above it still holds), moves this process into it for the run, and moves it back after.
Tried in order: cgroup v2 (``/sys/fs/cgroup/cgroup.controllers``: ``cpu.stat`` and
``memory.peak``), cgroup v1 (``/sys/fs/cgroup/cpuacct`` and ``/sys/fs/cgroup/memory``); where
neither can be made (not root, no such mount) it says so and falls back to getrusage.

A cgroup's peak memory counts the page cache of the files the run writes as well as its
processes' memory (the notebooks and feedback pages a grading run writes). So the
processes' own memory (``anon`` of v2's ``memory.stat``, ``total_rss`` of v1's, the group and
every group inside it) is sampled too, every :data:`SAMPLE_SECONDS`, by a small process kept
outside the group; its largest value is the run's ``peak_processes``.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
DRAIN_SECONDS = 10.0  # how long a finished run's stray processes may take to exit
SAMPLE_SECONDS = 0.02  # how often the processes' memory is read
# the sampler: reads the field of memory.stat every period until its stdin closes; each new largest
# value is written to the file it is given (read by RunGroup.peak_processes_so_far)
SAMPLER = """
import os, select, sys
path, field, period, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
largest = 0
while not select.select([sys.stdin], [], [], period)[0]:
    try:
        with open(path) as stat:
            value = next(int(v) for n, _, v in (line.partition(" ") for line in stat) if n == field)
    except FileNotFoundError:  # started before the group is made
        continue
    if value > largest:
        largest = value
        with open(out + ".new", "w") as new:
            new.write(str(largest))
        os.replace(out + ".new", out)
"""


def own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` read as {controller: path}; the v2 hierarchy is the key ``""``.

    >>> own_cgroups("4:memory:/a/b\\n2:cpuacct,cpu:/\\n0::/user.slice\\n")
    {'memory': '/a/b', 'cpuacct': '/', 'cpu': '/', '': '/user.slice'}
    """
    found = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(":", 2)
        if len(parts) != 3:
            raise ValueError(f"expected 'id:controllers:path' in /proc/self/cgroup, got {line!r}")
        for controller in parts[1].split(",") if parts[1] else [""]:
            found[controller] = parts[2]
    return found


def v2_usage_seconds(cpu_stat: str) -> float:
    """CPU seconds from a cgroup v2 ``cpu.stat`` (its ``usage_usec`` line).

    >>> v2_usage_seconds("usage_usec 2500000\\nuser_usec 2000000\\nsystem_usec 500000\\n")
    2.5
    """
    for line in cpu_stat.splitlines():
        name, _, value = line.partition(" ")
        if name == "usage_usec":
            return int(value) / 1e6
    raise ValueError(f"expected a usage_usec line in cpu.stat, got {cpu_stat[:200]!r}")


@dataclass
class RunUsage:
    """What one run used: CPU seconds, peak memory in bytes (None when unknown), and how it was counted."""

    cpu: float
    peak_memory: int | None
    source: str
    peak_processes: int | None = None  # the processes' own memory at most (sampled), bytes


class RunGroup:
    """A cgroup for one run (``with RunGroup("name") as run: ...``; then ``run.usage``).

    Everything this process starts inside the ``with`` block is counted, and processes still
    alive at its end are waited for (up to :data:`DRAIN_SECONDS`) and then named in an error:
    their CPU would otherwise be missed.
    """

    def __init__(self, name: str) -> None:
        self.name = f"rbtutor-bench-{os.getpid()}-{name}"
        self.groups: dict[str, tuple[Path, Path]] = {}  # controller: (the run's group, the one to go back to)
        self.kind = "none"
        self.usage: RunUsage | None = None
        self.left_groups: list[Path] = []  # empty groups the run's processes made inside ours and left

    def __enter__(self) -> RunGroup:
        mine = own_cgroups(Path("/proc/self/cgroup").read_text())
        self._sampler = None
        if (CGROUP_ROOT / "cgroup.controllers").exists():
            home = CGROUP_ROOT / mine.get("", "/").lstrip("/")
            self._sampler = self._start_sampler(home / self.name, "anon")
            self._join({"v2": home}, "cgroup v2")
        elif (CGROUP_ROOT / "cpuacct" / "cpuacct.usage").exists():
            homes = {c: CGROUP_ROOT / c / mine.get(c, "/").lstrip("/") for c in ("cpuacct", "memory")
                     if (CGROUP_ROOT / c).is_dir() and c in mine}
            if "memory" in homes:
                self._sampler = self._start_sampler(homes["memory"] / self.name, "total_rss")
            self._join(homes, "cgroup v1")
        self._start = self._read()
        return self

    def _start_sampler(self, group: Path, field: str) -> subprocess.Popen:
        """The sampler of the processes' memory in ``group``, started before this process joins it (so
        that the sampler is not counted)."""
        self._largest = Path(tempfile.mkdtemp(prefix="rbtutor-bench-memory-")) / "largest"
        return subprocess.Popen([sys.executable, "-c", SAMPLER, str(group / "memory.stat"), field,
                                 str(SAMPLE_SECONDS), str(self._largest)], stdin=subprocess.PIPE)

    def peak_processes_so_far(self) -> int | None:
        """The largest memory of the run's processes the sampler has read so far (bytes; None before any)."""
        try:
            return int(self._largest.read_text())
        except (AttributeError, FileNotFoundError):
            return None

    def _join(self, homes: dict[str, Path], kind: str) -> None:
        for controller, home in homes.items():
            group = home / self.name
            try:
                group.mkdir()
                (group / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                if group.is_dir():
                    group.rmdir()
                self._leave()
                return
            self.groups[controller] = (group, home)
        self.kind = kind

    def _read(self) -> tuple[float, int | None]:
        if self.kind == "cgroup v2":
            group = self.groups["v2"][0]
            peak = group / "memory.peak"
            return (v2_usage_seconds((group / "cpu.stat").read_text()),
                    int(peak.read_text()) if peak.exists() else None)
        if self.kind == "cgroup v1":
            cpu = int((self.groups["cpuacct"][0] / "cpuacct.usage").read_text()) / 1e9
            memory = self.groups.get("memory")
            return cpu, int((memory[0] / "memory.max_usage_in_bytes").read_text()) if memory else None
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, None

    def __exit__(self, *exc_info) -> None:
        strays = self._drain()
        end = self._read()
        peak_processes = None
        if self._sampler is not None:
            self._sampler.communicate(b"", timeout=30)  # its stdin closed: it exits
            peak_processes = self.peak_processes_so_far() if self._sampler.returncode == 0 and self.groups else None
            shutil.rmtree(self._largest.parent)
        where = next(iter(self.groups.values()))[0].name if self.groups else ""
        source = (f"{self.kind} ({where} under {next(iter(self.groups.values()))[1]})" if self.groups else
                  "getrusage: no cgroup could be made (not root, or no cgroup mount); the CPU of kernels "
                  "the grader does not wait for is missing")
        self.usage = RunUsage(end[0] - self._start[0], end[1], source, peak_processes)
        self._leave()
        if strays and exc_info[0] is None:
            raise RuntimeError(f"expected every process of run {self.name} to have exited, got {strays} still alive")

    def _drain(self) -> list[int]:
        """Wait for the run's other processes to exit; returns those still alive."""
        if not self.groups:
            return []
        procs = next(iter(self.groups.values()))[0] / "cgroup.procs"
        deadline = time.monotonic() + DRAIN_SECONDS
        while True:
            others = [int(p) for p in procs.read_text().split() if int(p) != os.getpid()]
            if not others or time.monotonic() > deadline:
                return others
            time.sleep(0.1)

    def _leave(self) -> None:
        for group, home in self.groups.values():
            (home / "cgroup.procs").write_text(str(os.getpid()))
            for inner in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                if not (inner / "cgroup.procs").read_text().split():
                    inner.rmdir()
                    self.left_groups.append(inner)
            if not (group / "cgroup.procs").read_text().split():
                group.rmdir()  # else a stray process is still in it: the group stays, and __exit__ says so
        self.groups = {}
