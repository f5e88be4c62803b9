"""The course hub's spawner: each user's JupyterLab started as their Unix user, saying how far along it is.

JupyterHub shows a page with a progress bar while a server starts, fed by the spawner's
``progress()`` events; the stock LocalProcessSpawner sends none of its own, so a student waited
16 to 29 s on a bar that did not move. :class:`CourseSpawner` is that spawner with events that
say what is happening: which JupyterLab is being prepared, that its process runs, a count of the
seconds against how long a start usually takes on this hub (the median of the last starts, kept
in the hub's state folder), and that JupyterLab answers. The hub then sends the user on.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import ClassVar

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Unicode

#: what a start is taken to need before this hub has timed one (seconds; 16-29 s were seen on 2 cores)
FIRST_GUESS = 20.0
#: how many past starts the usual duration is taken from
KEPT = 15
#: where the bar stands once the process runs, and the most the count may move it to before JupyterLab answers
LAUNCHED, LOADED = 20, 90


def usual_seconds(history: list[float]) -> float:
    """How long a start usually takes: the median of ``history``, or :data:`FIRST_GUESS` without one."""
    return statistics.median(history) if history else FIRST_GUESS


def loading_event(elapsed: float, usual: float, limit: float) -> dict:
    """The progress event while JupyterLab loads: ``elapsed`` seconds so far against ``usual``; ``limit``
    is how long the hub waits before it gives up."""
    share = min(elapsed / usual, 1.0) if usual > 0 else 1.0
    progress = LAUNCHED + round((LOADED - LAUNCHED) * share)
    if elapsed <= usual:
        message = f"JupyterLab is loading: {elapsed:.0f} s so far, usually about {usual:.0f} s"
    else:
        message = (f"JupyterLab is still loading: {elapsed:.0f} s so far (usually about {usual:.0f} s; "
                   f"a busy hub may take up to {limit / 60:.0f} min)")
    return {"progress": progress, "message": message}


class CourseSpawner(LocalProcessSpawner):
    """LocalProcessSpawner whose progress events say what a start of the course's JupyterLab is doing."""

    history_file = Unicode("", help="The file the durations of past starts are kept in (empty: in memory only)."
                           ).tag(config=True)
    _history: ClassVar[dict[str, list[float]]] = {}  # role: seconds of its last starts, shared by every user

    def role(self) -> str:
        return self.environment.get("RBTUTOR_ROLE", "student")

    async def start(self):
        self.progress_log = [{"progress": 10, "message": f"Preparing {self.user.name}'s JupyterLab "
                              f"({self.role()}'s environment) in their home folder"}]
        self.launched_at = self.answered_at = None
        address = await super().start()
        self.launched_at = time.monotonic()
        self.progress_log.append({"progress": LAUNCHED, "message": f"JupyterLab started as {self.user.name} "
                                  f"(process {self.pid}); waiting for it to load"})
        self._watcher = asyncio.ensure_future(self.watch(*address))
        return address

    async def watch(self, ip: str, port: int) -> None:
        """Note the moment JupyterLab first accepts a connection (or give up with the hub, or when it ends)."""
        deadline = self.launched_at + self.http_timeout
        while time.monotonic() < deadline and self.proc is not None and self.proc.poll() is None:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(ip, port), timeout=1)
            except (TimeoutError, OSError):
                await asyncio.sleep(0.5)
                continue
            writer.close()
            self.answered_at = time.monotonic()
            seconds = self.answered_at - self.launched_at
            self.progress_log.append({"progress": 95, "message": f"JupyterLab answers after {seconds:.0f} s; "
                                      "opening it"})
            self.remember(seconds)
            return

    async def progress(self):
        shown = 0
        while True:
            log = getattr(self, "progress_log", [])
            while shown < len(log):
                yield log[shown]
                shown += 1
            if getattr(self, "launched_at", None) is not None and self.answered_at is None:
                yield loading_event(time.monotonic() - self.launched_at, usual_seconds(self.history()),
                                    self.http_timeout)
            await asyncio.sleep(1)

    def history(self) -> list[float]:
        """The durations of this role's last starts, from the history file when there is one."""
        role = self.role()
        if role not in self._history and self.history_file:
            try:
                saved = json.loads(Path(self.history_file).read_text())
                CourseSpawner._history[role] = [float(s) for s in saved.get(role, [])][-KEPT:]
            except (OSError, ValueError, TypeError, AttributeError):
                CourseSpawner._history[role] = []
        return self._history.setdefault(role, [])

    def remember(self, seconds: float) -> None:
        """Add a start's duration to its role's history (and to the file; a file that cannot be written is
        logged and left)."""
        history = self.history()
        history.append(round(seconds, 1))
        del history[:-KEPT]
        if not self.history_file:
            return
        try:
            Path(self.history_file).write_text(json.dumps(self._history))
        except OSError as exc:
            self.log.warning("could not keep the start durations in %s: %s", self.history_file, exc)
