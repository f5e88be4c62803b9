"""A PostgreSQL server in a folder of its own, from Debian's server binaries (``apt-get install postgresql``).

Used by ``make hub GRADEBOOK=postgres`` (a server for the hub's course gradebook, kept in
``/var/lib/rbtutor-postgres``) and by the tests (a throwaway server per test session).
The server listens on the loopback address only, on the port given, for the one database role it
creates (:data:`ROLE`). Without a password it trusts every local connection (the tests' throwaway
servers); on a machine with other users (the hub: students have accounts) give it a password,
which it then asks of every connection (scram-sha-256).

PostgreSQL refuses to run as root, so when this runs as root the server runs as the
``postgres`` system user (or ``nobody`` when there is none), with ``runuser``, in a folder that
user owns.

:meth:`PostgresServer.start` starts the server with ``pg_ctl``; where systemd runs, the hub
instead installs :meth:`PostgresServer.systemd_unit` (the same command line and options) after
:meth:`PostgresServer.create`.

This module uses the standard library only: ``hub/hubctl.py`` runs before any environment exists.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

ROLE = "rbtutor"  # the database role the graders connect as
BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name)
                  if p.parent.name.isdigit() else 0, reverse=True)


class PostgresError(RuntimeError):
    """The server cannot be found, started or reached; the message says why."""


def bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb`` and ``pg_ctl``."""
    for folder in BIN_DIRS:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    raise PostgresError("PostgreSQL's server binaries are missing (no /usr/lib/postgresql/*/bin/initdb): "
                        "apt-get install -y postgresql")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def service_account() -> str:
    """The account a server started by root runs as: ``postgres``, or ``nobody`` when there is none."""
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PostgresError("running as root, and there is neither a postgres nor a nobody account to run "
                        "PostgreSQL as (it refuses root)")


def server_user() -> str | None:
    """The account the server runs as: None (this one) unless we are root."""
    return service_account() if os.geteuid() == 0 else None


class PostgresServer:
    """One PostgreSQL cluster in ``folder`` (created on :meth:`start` if it is not there yet).

    Examples
    --------
    >>> server = PostgresServer(Path("/tmp/pg"), port=free_port())   # doctest: +SKIP
    >>> server.start(); server.create_database("gradebook")           # doctest: +SKIP
    'postgresql+psycopg://rbtutor@127.0.0.1:...'
    """

    def __init__(self, folder: Path, port: int, password: str | None = None):
        self.folder = Path(folder)
        self.port = int(port)
        self.password = password
        self.bin = bin_dir()
        self.user = server_user()

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` on this server (what ``RBTUTOR_GRADEBOOK`` takes)."""
        secret = f":{self.password}" if self.password else ""
        return f"postgresql+psycopg://{ROLE}{secret}@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(a) for a in argv]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        env = {**os.environ, **({"PGPASSWORD": self.password} if self.password else {})}
        result = subprocess.run(command, capture_output=True, text=True, cwd="/", env=env)
        if check and result.returncode != 0:
            raise PostgresError(f"{' '.join(command)} failed (exit {result.returncode}):\n"
                                f"{result.stdout[-1500:]}{result.stderr[-1500:]}")
        return result

    def _own(self, path: Path) -> None:
        if self.user:
            account = pwd.getpwnam(self.user)
            os.chown(path, account.pw_uid, account.pw_gid)

    def create(self) -> None:
        """Create the folder and the cluster (``initdb``) when they are not there yet."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.user:
            closed = [str(p) for p in self.folder.parents if os.stat(p).st_mode & 0o001 == 0]
            if closed:
                raise PostgresError(f"{self.user} cannot reach {self.folder}: {', '.join(closed)} "
                                    "is not searchable by other users (chmod o+x, or choose another folder)")
        os.chmod(self.folder, 0o700)
        self._own(self.folder)
        if not (self.data / "PG_VERSION").exists():
            auth = ["--auth=trust"]
            if self.password:
                secret = self.folder / "initial-password"
                secret.write_text(self.password + "\n")
                os.chmod(secret, 0o600)
                self._own(secret)
                auth = ["--auth=scram-sha-256", f"--pwfile={secret}"]
            try:
                self._run(self.bin / "initdb", "-D", self.data, "-U", ROLE, *auth, "-E", "UTF8",
                          "--no-instructions")
            finally:
                if self.password:
                    secret.unlink(missing_ok=True)
        self.sockets.mkdir(exist_ok=True)
        self._own(self.sockets)

    @property
    def sockets(self) -> Path:
        return self.folder / "sockets"

    def options(self) -> list[str]:
        """The server's options: this port, the loopback address only, its own socket folder."""
        return ["-p", str(self.port), "-c", "listen_addresses=127.0.0.1", "-k", str(self.sockets)]

    def start(self) -> None:
        """Create the cluster when needed and start the server with ``pg_ctl``; return once it accepts
        connections. (Where systemd runs, the hub starts it from :meth:`systemd_unit` instead.)"""
        self.create()
        self._run(self.bin / "pg_ctl", "-D", self.data, "-l", self.log, "-o", " ".join(self.options()),
                  "-w", "-t", "60", "start")

    def systemd_unit(self, description: str) -> str:
        """A systemd service running this server: the unit PostgreSQL's manual gives (server
        start-up, "Using systemd"), with this cluster's folder, account and options."""
        argv = " ".join([str(self.bin / "postgres"), "-D", str(self.data), *self.options()])
        return (f"[Unit]\nDescription={description}\nDocumentation=man:postgres(1)\n"
                "After=network-online.target\nWants=network-online.target\n\n"
                f"[Service]\nType=notify\nUser={service_account()}\nExecStart={argv}\n"
                f"StandardOutput=append:{self.log}\nStandardError=inherit\n"
                "ExecReload=/bin/kill -HUP $MAINPID\nKillMode=mixed\nKillSignal=SIGINT\nTimeoutSec=infinity\n\n"
                "[Install]\nWantedBy=multi-user.target\n")

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Return once the server accepts connections (``pg_isready``), or raise after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            result = self._run(self.bin / "pg_isready", "-h", "127.0.0.1", "-p", self.port, "-t", "5", check=False)
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise PostgresError(f"PostgreSQL on port {self.port} did not accept connections within "
                                    f"{timeout:.0f} s: {result.stdout.strip()} (log: {self.log})")
            time.sleep(0.2)

    def running(self) -> bool:
        return self._run(self.bin / "pg_ctl", "-D", self.data, "status", check=False).returncode == 0

    def stop(self) -> None:
        """Stop the server (fast shutdown: open connections are closed); nothing if it is not running."""
        if self.data.exists() and self.running():
            self._run(self.bin / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "60", "stop")

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` with ``psql`` on ``database``; its output, unaligned, without headers."""
        return self._run(self.bin / "psql", "-h", "127.0.0.1", "-p", self.port, "-U", ROLE, "-d", database,
                         "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql).stdout

    def create_database(self, name: str) -> str:
        """Create ``name`` unless it exists; return its URL."""
        if not name.replace("_", "").isalnum():
            raise PostgresError(f"expected a plain database name, got {name!r}")
        if name not in self.psql("SELECT datname FROM pg_database").split():
            self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        """Stop the server and delete its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
