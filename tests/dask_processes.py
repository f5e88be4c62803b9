"""A Dask scheduler and workers as separate processes on this machine (tests and benchmarks).

Started from the environment's own ``dask`` command, on 127.0.0.1, the scheduler on a port
it chooses itself (read back from its scheduler file, so no port is guessed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
STARTUP_LIMIT = 60  # s, safety net for a scheduler or worker process to come up


class DaskProcesses:
    """A ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1, each a process of its own.

    The scheduler listens on a port it chooses (written to a scheduler file, so no port is
    guessed); workers have one thread and no nanny. ``prefix`` wraps a worker's command
    (e.g. to start it in a mount namespace of its own). Stopped by :meth:`close`.
    """

    def __init__(self, folder: Path, workers: int = 2, worker_args=(), env=None):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.scheduler_file = folder / "scheduler.json"
        self.env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
        self.procs: list[subprocess.Popen] = []
        self.scheduler = self._start("scheduler", [str(VENV_BIN / "dask"), "scheduler", "--host", "127.0.0.1",
                                                   "--port", "0", "--no-dashboard",
                                                   "--scheduler-file", str(self.scheduler_file)])
        deadline = time.monotonic() + STARTUP_LIMIT
        while (address := self._written_address()) is None:  # written by the scheduler once it listens
            assert self.scheduler.poll() is None, self.log("scheduler")
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        self.address = address
        self.workers = [self.add_worker(list(worker_args)) for _ in range(workers)]

    def _written_address(self) -> str | None:
        """The scheduler's address once its file is complete (it can be seen empty or half written)."""
        try:
            return json.loads(self.scheduler_file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            return None

    def _start(self, name, argv, prefix=()):
        with open(self.folder / f"{name}.log", "w") as log:  # the child keeps its own copy
            proc = subprocess.Popen([*prefix, *argv], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                    cwd=self.folder, start_new_session=True)
        proc.name = name
        self.procs.append(proc)
        return proc

    def add_worker(self, extra=(), prefix=()) -> subprocess.Popen:
        name = f"worker{len(self.procs)}"
        local = self.folder / name
        local.mkdir()
        return self._start(name, [str(VENV_BIN / "dask"), "worker", self.address, "--nthreads", "1",
                                  "--nworkers", "1", "--no-nanny", "--host", "127.0.0.1", "--no-dashboard",
                                  "--local-directory", str(local), "--name", name, *extra], prefix)

    def log(self, name) -> str:
        return (self.folder / f"{name}.log").read_text()[-3000:]

    def client(self):
        from distributed import Client

        return Client(self.address, timeout=STARTUP_LIMIT, set_as_default=False)

    def wait_for_workers(self, count: int) -> None:
        with self.client() as client:
            client.wait_for_workers(count, timeout=STARTUP_LIMIT)

    def close(self) -> None:
        """Stop the workers, then the scheduler. A worker stopped together with its scheduler can
        hang in its own close (seen in CI: two workers 30 s each, until killed), so they go first."""
        workers = [proc for proc in self.procs if proc is not self.scheduler]
        for group in (workers, [self.scheduler]):
            for proc in group:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            for proc in group:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
