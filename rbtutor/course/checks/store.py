"""Step: instant checks, the aggregated store. Counts, not lines: the limit window, tallies, refusals.

One SQLite file, ``checks/summary.sqlite`` in the course folder, kept by the service's main
process (:class:`.core.CheckCore`); :mod:`.stats` reads the statistics page from it.

* ``recent``: the time of every judged check still inside the sliding window of the
  limit, per student and answer id. The limit is counted from here, so a restarted
  service keeps it. Rows older than the window are deleted as they are met.
* ``tally``: per student and answer id, the checks judged, the passes and the failures
  (for "stuck"); ``diagnoses``: per answer id, how often each mistake was named.
* ``refused``: checks refused without judging (over the hourly limit, or switched off),
  counted per student, answer id, hour and reason. A student who sends 3,000 refused
  checks in a minute adds one row and a count, not 3,000 lines.

The size of every table depends on the students, the answer ids and the hours, never on
the number of requests, so neither a flood nor a long term makes the statistics slower
than that. Writes use a write-ahead log without waiting for the disk
(``synchronous=NORMAL``): a power cut may lose the last moments of counts, never corrupt
the file.

A course whose log, ``checks/attempts.jsonl``, was written before this store existed is
read once (:meth:`CheckStore.import_records`), so its limits and statistics carry over.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS recent (student TEXT NOT NULL, id TEXT NOT NULL, epoch REAL NOT NULL);
CREATE INDEX IF NOT EXISTS recent_pair ON recent (student, id);
CREATE TABLE IF NOT EXISTS tally (student TEXT NOT NULL, id TEXT NOT NULL, checks INTEGER NOT NULL,
    passes INTEGER NOT NULL, failed INTEGER NOT NULL, PRIMARY KEY (student, id));
CREATE TABLE IF NOT EXISTS diagnoses (id TEXT NOT NULL, code TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (id, code));
CREATE TABLE IF NOT EXISTS refused (student TEXT NOT NULL, id TEXT NOT NULL, hour INTEGER NOT NULL,
    reason TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (student, id, hour, reason));
"""

#: why a check was refused without judging, as stored
REFUSED_REASONS = ("limit", "disabled")


class CheckStore:
    """The aggregated store of one course (or of a list of records, with ``path=":memory:"``).

    Parameters
    ----------
    path : path or ":memory:"
        The SQLite file; its folder is made when missing.
    window : float
        Seconds a judged check counts against the limit.
    """

    def __init__(self, path, window: float):
        self.path = path if path == ":memory:" else Path(path)
        self.window = float(window)
        if self.path != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # the service calls it from its event loop thread; tests and the oracle from theirs
        self._db = sqlite3.connect(str(self.path), check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- the limit
    def recent(self, student: str, answer_id: str, now: float) -> list[float]:
        """Times of the judged checks of ``student`` on ``answer_id`` inside the window, oldest first."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM recent WHERE student = ? AND id = ? AND epoch <= ?",
                             (student, answer_id, now - self.window))
            rows = self._db.execute("SELECT epoch FROM recent WHERE student = ? AND id = ? ORDER BY epoch",
                                    (student, answer_id)).fetchall()
        return [row[0] for row in rows]

    def reserve(self, student: str, answer_id: str, epoch: float) -> None:
        """Count a check against the limit now, before it is judged (so that checks sent at once cannot pass it)."""
        with self._lock, self._db:
            self._db.execute("INSERT INTO recent VALUES (?, ?, ?)", (student, answer_id, epoch))

    def release(self, student: str, answer_id: str, epoch: float) -> None:
        """Give back a reservation whose check was not judged after all (the judge failed)."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM recent WHERE rowid IN (SELECT rowid FROM recent WHERE student = ? "
                             "AND id = ? AND epoch = ? LIMIT 1)", (student, answer_id, epoch))

    # --- what happened
    def judged(self, student: str, answer_id: str, passed: bool, diagnosis: str | None) -> None:
        """Add one judged check to the tallies (a check refused for quoting the key counts as failed)."""
        with self._lock, self._db:
            self._judged(student, answer_id, passed, diagnosis)

    def _judged(self, student, answer_id, passed, diagnosis) -> None:
        self._db.execute("INSERT INTO tally VALUES (?, ?, 1, ?, ?) ON CONFLICT (student, id) DO UPDATE SET "
                         "checks = checks + 1, passes = passes + excluded.passes, failed = failed + excluded.failed",
                         (student, answer_id, int(bool(passed)), int(not passed)))
        if not passed:
            self._db.execute("INSERT INTO diagnoses VALUES (?, ?, 1) ON CONFLICT (id, code) DO UPDATE SET n = n + 1",
                             (answer_id, diagnosis or "wrong_value"))

    def refused(self, student: str, answer_id: str, epoch: float, reason: str, count: int = 1) -> None:
        """Count ``count`` checks refused for ``reason`` (see :data:`REFUSED_REASONS`) in the hour of ``epoch``."""
        if reason not in REFUSED_REASONS:
            raise ValueError(f"expected a refusal reason in {REFUSED_REASONS}, got {reason!r}")
        with self._lock, self._db:
            self._refused(student, answer_id, epoch, reason, count)

    def _refused(self, student, answer_id, epoch, reason, count) -> None:
        hour = int(epoch // 3600) * 3600
        self._db.execute("INSERT INTO refused VALUES (?, ?, ?, ?, ?) ON CONFLICT (student, id, hour, reason) "
                         "DO UPDATE SET n = n + excluded.n", (student, answer_id, hour, reason, count))

    def forget(self, students: Iterable[str]) -> None:
        """Remove every count of ``students``: their limit window, tallies and refusals (for made-up
        accounts, such as a benchmark's; the diagnoses per answer id are not per student and stay)."""
        names = [(name,) for name in students]
        with self._lock, self._db:
            for table in ("recent", "tally", "refused"):
                self._db.executemany(f"DELETE FROM {table} WHERE student = ?", names)

    # --- an old log, once
    def imported(self) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM meta WHERE name = 'log_imported'").fetchone() is not None

    def import_records(self, records: Iterable[dict], now: float | None = None) -> int:
        """Fold attempt records (the lines of an older ``attempts.jsonl``) into the store, in one transaction.

        Judged records go to the tallies, and to the limit window when ``now`` is given and
        they are inside it; refused ones (``"refused": "limit"`` or ``"disabled"``) to the
        refusal counts. Returns how many records were read.
        """
        count = 0
        refusals: dict[tuple, int] = {}  # added up first: an old log may hold hundreds of thousands
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            if self._db.execute("SELECT 1 FROM meta WHERE name = 'log_imported'").fetchone() is not None:
                return 0  # another process of the same course did it meanwhile
            for record in records:
                count += 1
                reason = record.get("refused")
                if reason in REFUSED_REASONS:
                    key = (record["student"], record["id"], int(float(record["epoch"]) // 3600) * 3600, reason)
                    refusals[key] = refusals.get(key, 0) + 1
                    continue
                self._judged(record["student"], record["id"], bool(record.get("passed")), record.get("diagnosis"))
                if now is not None and now - float(record["epoch"]) < self.window:
                    self._db.execute("INSERT INTO recent VALUES (?, ?, ?)",
                                     (record["student"], record["id"], float(record["epoch"])))
            for (student, answer_id, hour, reason), n in refusals.items():
                self._refused(student, answer_id, hour, reason, n)
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('log_imported', ?)", (str(count),))
        return count

    # --- for the statistics
    def tallies(self) -> list[tuple[str, str, int, int, int]]:
        """``(student, id, checks, passes, failed)`` per student and answer id."""
        with self._lock:
            return self._db.execute("SELECT student, id, checks, passes, failed FROM tally").fetchall()

    def diagnosis_counts(self) -> list[tuple[str, str, int]]:
        """``(id, code, n)``: how often each mistake was named on each answer id."""
        with self._lock:
            return self._db.execute("SELECT id, code, n FROM diagnoses").fetchall()

    def refusals(self) -> list[tuple[str, str, int]]:
        """``(id, student, n)``: refused checks per answer id and student, all hours and reasons together."""
        with self._lock:
            return self._db.execute("SELECT id, student, SUM(n) FROM refused GROUP BY id, student").fetchall()

    def refusals_by_hour(self) -> list[tuple[str, str, int, str, int]]:
        """``(student, id, hour, reason, n)``, the hour as seconds since the epoch, newest first."""
        with self._lock:
            return self._db.execute("SELECT student, id, hour, reason, n FROM refused "
                                    "ORDER BY hour DESC, n DESC, student, id").fetchall()
