"""Fair comparisons on a shared machine: every contender measured several times, in turn, in one run.

A machine shared with other work runs faster or slower from one minute to the next. Measured one
after another (A A A, then B B B), two contenders would meet different machines; measured in
turn (A B C, A B C, ...), each meets every phase of the load about as often as the others. Each
measurement also notes the machine's one-minute load average when it started, so that a reader
can see what it met. A comparison then uses each contender's median, with the lowest and
highest values beside it (the spread).
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path

REPEAT_DEFAULT = 3


def in_turn(labels: list[str], repeat: int) -> list[tuple[int, str]]:
    """The order of the measurements: (round, label), every label once a round, rounds one after another.

    >>> in_turn(["A", "B", "C"], 2)
    [(0, 'A'), (0, 'B'), (0, 'C'), (1, 'A'), (1, 'B'), (1, 'C')]
    """
    if repeat < 1 or not labels:
        raise ValueError(f"expected at least one round and one contender, got {repeat} and {labels}")
    return [(k, label) for k in range(repeat) for label in labels]


@dataclass(frozen=True)
class Spread:
    """The median of some measurements, and their lowest and highest."""

    median: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.median:.2f} ({self.low:.2f}-{self.high:.2f})"


def spread(values: list[float]) -> Spread:
    """The median and the range of ``values``.

    >>> str(spread([0.5, 0.31, 0.42, 0.4]))
    '0.41 (0.31-0.50)'
    """
    if not values:
        raise ValueError("expected at least one measurement, got none")
    return Spread(statistics.median(values), min(values), max(values))


def load_average() -> float:
    """The machine's load average over the last minute (``/proc/loadavg``; ``os.getloadavg`` elsewhere)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except FileNotFoundError:
        return os.getloadavg()[0]


def repeat_count(text: str | None) -> int:
    """``BENCH_REPEAT``: how many times each contender is measured (default 3).

    >>> repeat_count(None), repeat_count("5")
    (3, 5)
    """
    if text is None or not text.strip():
        return REPEAT_DEFAULT
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"BENCH_REPEAT: expected a count of measurements such as 3, got {text!r}")
    return int(text)
