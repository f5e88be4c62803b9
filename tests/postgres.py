"""A throwaway PostgreSQL server for the tests that grade into a PostgreSQL gradebook.

Import the fixture into a test module (``from postgres import postgres_server``). It starts
Debian's PostgreSQL server binaries (``apt-get install -y postgresql``; ``.ci/run`` installs
them) on a free loopback port in a temporary folder, through :class:`hub.pgserver.PostgresServer`
(as the ``postgres`` system user when the tests run as root: PostgreSQL refuses root), and
stops it and removes the folder after the session. Without the binaries the tests skip
locally, saying so, and fail in CI.

Why not pytest-postgresql's ``postgresql_proc``: it runs ``pg_ctl`` as the user running the
tests, which PostgreSQL refuses when that is root, as in CI (its issues #341 and #455), and the
hub starts its gradebook server with the same :class:`PostgresServer`, so this fixture also
tests the hub's own start-up.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hub"))
from pgserver import PostgresError, PostgresServer, bin_dir, free_port


def require_postgres() -> None:
    """Skip (locally) or fail (in CI) without PostgreSQL's server binaries, saying why."""
    try:
        bin_dir()
    except PostgresError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide PostgreSQL: {exc}", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def postgres_server():
    """A running :class:`PostgresServer`; ``create_database(name)`` gives a fresh database's URL."""
    require_postgres()
    folder = Path(tempfile.mkdtemp(prefix="rbtutor-pg-"))
    os.chmod(folder, 0o711)  # the server's own account must reach its folder below this one
    server = None
    try:
        for attempt in range(3):  # the free port may be taken between the probe and the start
            server = PostgresServer(folder / f"cluster{attempt}", free_port())
            try:
                server.start()
                break
            except PostgresError:
                if attempt == 2:
                    raise
                server.remove()
        yield server
    finally:
        if server is not None:
            server.remove()
        shutil.rmtree(folder, ignore_errors=True)
