"""Step: sandbox (memory of the process tree). A memory cgroup for each kernel, where one can be made.

Tried in this order: cgroup v2, then v1; without either, only the per-process bound of the plan holds,
and the launcher records why (:func:`memory_group`).
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path

CGROUP_MOUNT = Path("/sys/fs/cgroup")
GROUP_PREFIX = "rbtutor-kernel-"


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per controller ("" for the cgroup-v2 hierarchy)."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            found[controller] = path
    return found


def _sweep(base: Path) -> None:
    """Remove the kernel groups under ``base`` whose launcher is gone (one killed before it could)."""
    for folder in base.glob(f"{GROUP_PREFIX}*"):
        pid = folder.name[len(GROUP_PREFIX):]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                folder.rmdir()
            except OSError:  # processes still in it: the next sweep takes it
                continue


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _v2_base(own: dict[str, str]) -> Path:
    mount = CGROUP_MOUNT if (CGROUP_MOUNT / "cgroup.controllers").exists() else CGROUP_MOUNT / "unified"
    return mount / own.get("", "/").lstrip("/")


def memory_group(limit: int) -> tuple[Path | None, str]:
    """A memory cgroup for one kernel's whole process tree, a child of this process's own group.

    Tries cgroup v2 (``memory.max``, ``memory.swap.max`` 0), then v1 (``memory.limit_in_bytes``,
    ``memory.memsw.limit_in_bytes`` equal to it, so no swap). Returns the group's folder and how the
    memory is bounded, or None and why no group could be made (only the per-process limit holds then).
    """
    own = _own_cgroups()
    reasons = []
    base = _v2_base(own)
    if "" in own and "memory" in _read(base / "cgroup.subtree_control").split():
        settings = [("memory.max", str(limit)), ("memory.swap.max", "0")]
        made = _make_group(base, settings, reasons, "cgroup v2")
        if made:
            return made, f"cgroup v2 memory.max {limit} bytes, no swap ({made})"
    else:
        reasons.append(f"cgroup v2: no memory controller for {base}")
    if "memory" in own:
        base = CGROUP_MOUNT / "memory" / own["memory"].lstrip("/")
        settings = [("memory.limit_in_bytes", str(limit)), ("memory.memsw.limit_in_bytes", str(limit))]
        made = _make_group(base, settings, reasons, "cgroup v1")
        if made:
            return made, f"cgroup v1 memory.limit_in_bytes {limit} bytes, no swap ({made})"
    else:
        reasons.append("cgroup v1: no memory controller")
    return None, "per process only (RLIMIT_AS): no cgroup could be made: " + "; ".join(reasons)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _make_group(base: Path, settings: list[tuple[str, str]], reasons: list[str], kind: str) -> Path | None:
    folder = base / f"{GROUP_PREFIX}{os.getpid()}"
    try:
        _sweep(base)
        folder.mkdir()
    except OSError as exc:
        reasons.append(f"{kind}: {exc}")
        return None
    try:
        for name, value in settings:
            if (folder / name).exists() or name in ("memory.max", "memory.limit_in_bytes"):
                _write(folder / name, value)
        if kind == "cgroup v1" and not (folder / "memory.memsw.limit_in_bytes").exists():
            _write(folder / "memory.swappiness", "0")  # no swap accounting here: at least no swapping
    except OSError as exc:
        reasons.append(f"{kind}: {exc}")
        folder.rmdir()
        return None
    return folder


def memory_kills(group: str | Path | None) -> int:
    """How many processes of ``group`` the kernel killed for going over its memory limit (0 without one)."""
    if not group:
        return 0
    for name in ("memory.events", "memory.oom_control"):
        for line in _read(Path(group) / name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return 0


@contextmanager
def inside(group: Path | None):
    """This process inside ``group`` for the block (what it starts stays there), back in its own after."""
    if group is None:
        yield
        return
    _write(group / "cgroup.procs", str(os.getpid()))
    try:
        yield
    finally:
        _write(group.parent / "cgroup.procs", str(os.getpid()))


def _kill_members(group: Path) -> None:
    """SIGKILL every process still in ``group``, each through a pidfd taken while it is listed there."""
    for pid in _read(group / "cgroup.procs").split():
        try:
            pidfd = os.pidfd_open(int(pid))
        except OSError:  # gone already
            continue
        try:
            if pid in _read(group / "cgroup.procs").split():  # still a member: the pidfd holds this process
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(pidfd)


def remove_group(group: Path | None, wait: float = 5.0) -> None:
    """Remove ``group`` once its kernel has ended; a process still in it is a stray of the sandbox's
    (the sandbox's processes die with its first one) and is killed."""

    if group is None:
        return
    deadline = time.monotonic() + wait
    while True:
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # left for the next launcher's sweep
            _kill_members(group)
            time.sleep(0.02)
