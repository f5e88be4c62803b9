"""Step: instant checks, the attempt log. Every judged check appended to checks/attempts.jsonl,
rotated at :data:`LOG_MAX_BYTES` with :data:`LOG_KEEP` old files."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from .store import REFUSED_REASONS

#: the attempt log is rotated when it reaches this size ...
LOG_MAX_BYTES = 8 * 1024 * 1024


#: ... keeping this many older files (attempts.jsonl.1 ...), so at most about 32 MiB in all
LOG_KEEP = 3


class AttemptLog:
    """Judged attempts as JSON lines in ``path``, for the instructor; rotated so that it stays under a size cap.

    When the file passes ``max_bytes`` it becomes ``attempts.jsonl.1`` (the older ones move
    up to ``.2`` ... ``.<keep>``, the oldest is deleted), so the log with its rotations never
    holds much more than ``(keep + 1) * max_bytes``. The limit and the statistics are not
    read from here (see :mod:`.store`), so a rotation loses neither.
    """

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES, keep: int = LOG_KEEP):
        if max_bytes < 1 or keep < 0:
            raise ValueError(f"expected max_bytes >= 1 and keep >= 0, got {max_bytes} and {keep}")
        self.path = Path(path)
        self.max_bytes = int(max_bytes)
        self.keep = int(keep)
        self._lock = threading.Lock()

    def files(self) -> list[Path]:
        """The log's files that exist, oldest first (the rotations, then the current file)."""
        rotated = [self.path.with_name(f"{self.path.name}.{n}") for n in range(self.keep, 0, -1)]
        return [path for path in [*rotated, self.path] if path.exists()]

    def iter_records(self, files: list[Path] | None = None):
        """Every logged attempt, oldest first (a damaged line is skipped), one at a time."""
        for path in self.files() if files is None else files:
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and {"student", "id", "epoch"} <= set(record):
                        yield record

    def records(self) -> list[dict]:
        """Every logged attempt still kept, oldest first."""
        return list(self.iter_records())

    def append(self, record: dict) -> None:
        line = json.dumps(record) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                size = handle.tell()
            if size >= self.max_bytes:
                self._rotate()

    def _rotate(self) -> None:
        if self.keep == 0:
            self.path.unlink()
            return
        for n in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{n + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))

    def drop_refused(self) -> None:
        """Rewrite the current file without the refused-check lines an older service appended (see :mod:`.store`)."""
        if not self.path.exists():
            return
        with self._lock:
            partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.partial")
            with self.path.open(encoding="utf-8") as source, partial.open("w", encoding="utf-8") as target:
                for line in source:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and record.get("refused") not in REFUSED_REASONS:
                        target.write(line)
            partial.replace(self.path)
            if self.path.stat().st_size >= self.max_bytes:
                self._rotate()
