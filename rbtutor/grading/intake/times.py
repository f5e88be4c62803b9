"""Step: intake, times. Submission times read and written, the student's claim checked, the grader's receipt kept.

The time of a submission is the grader's, never the student's: :mod:`.exchange`
decides it and writes it into a receipt (:func:`receipt_path`,
:func:`read_receipt`); the ``timestamp.txt`` a student hands in is only read as a
claim (:func:`keep_claim`) and compared with it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from ..config import GRADING
from ..report import event
from .files import DIR_FLAGS, FILE_FLAGS
from .limits import TIMESTAMP_BYTES, TIMESTAMP_FILE, Intake, show_name

#: the student's claimed time and the time the entry appeared may differ this much unnamed
MISMATCH_SECONDS = GRADING.intake_timestamp_mismatch
#: no submission time (in an entry's name or a claim) is earlier than this
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: the receipt of a collected submission: ``submitted/<student>/.<assignment>.receipt.json``
RECEIPT_SUFFIX, RECEIPT_BYTES = ".receipt.json", 64 * 1024
_STAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))? ?"
                    r"(UTC|Z|[+-]\d{2}:?\d{2})?")


def parse_time(text: str) -> dt.datetime:
    """A submission time as nbgrader's ``submit`` writes it, as a timezone-aware UTC datetime.

    Accepted: ``YYYY-MM-DD HH:MM:SS[.ffffff] [UTC|Z|+HHMM|+HH:MM]`` (no zone means UTC), from
    1970 on. Nothing else is parsed (no time zone names looked up, no free-form dates), so a
    course whose nbgrader ``Exchange.timezone`` is a named region rather than UTC (nbgrader's
    default) would see its entries refused as ``bad_name`` (nbgrader's own ``parse_utc`` reads
    some abbreviations, ``CET``, through the system's zone files and others, ``CEST``, as UTC).

    Raises
    ------
    ValueError
        Anything else, including dates that do not exist or overflow when put into UTC.

    Examples
    --------
    >>> parse_time("2024-03-01 10:00:00.000000 UTC").isoformat()
    '2024-03-01T10:00:00+00:00'
    >>> parse_time("0001-01-01 00:00:00 UTC")
    Traceback (most recent call last):
    ...
    ValueError: expected a time from 1970 on, got year 1
    """
    match = _STAMP.fullmatch(text) if isinstance(text, str) and len(text) <= TIMESTAMP_BYTES else None
    if match is None:
        raise ValueError("expected a time like 2024-03-01 10:00:00.000000 UTC")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    micro = int((match.group(7) or "0").ljust(6, "0"))
    zone = match.group(8) or "UTC"
    minutes = 0
    if zone not in ("UTC", "Z"):
        digits = zone[1:].replace(":", "")
        minutes = (int(digits[:2]) * 60 + int(digits[2:])) * (1 if zone[0] == "+" else -1)
        if abs(minutes) > 14 * 60:
            raise ValueError(f"expected a time zone offset of at most 14 hours, got {zone}")
    try:
        local = dt.datetime(year, month, day, hour, minute, second, micro,
                            tzinfo=dt.timezone(dt.timedelta(minutes=minutes)))
        when = local.astimezone(dt.UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"expected a date that exists, got {exc}") from None
    if when < EARLIEST:
        raise ValueError(f"expected a time from 1970 on, got year {when.year}")
    return when


def format_time(when: dt.datetime) -> str:
    """``when`` as nbgrader writes submission times (``2024-03-01 10:00:00.000000 UTC``)."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def receipt_path(submitted: Path, student: str, assignment: str) -> Path:
    """Where :func:`collect` keeps the receipt of ``student``'s ``assignment`` (beside the copy, hidden)."""
    return Path(submitted) / student / f".{assignment}{RECEIPT_SUFFIX}"


def read_receipt(submitted: Path, student: str, assignment: str) -> dict | None:
    """The receipt :func:`collect` wrote for this submission, or None when there is none.

    Returns
    -------
    dict or None
        ``entry`` (the exchange entry's name), ``received`` (the submission time, as
        :func:`format_time` writes it), ``claimed`` (the student's ``timestamp.txt``, or
        None), ``digest`` (of the files taken), ``first_seen`` (when collect first took it).

    Raises
    ------
    ValueError
        A receipt exists but is not one (the grader's own file was damaged).
    """
    path = receipt_path(submitted, student, assignment)
    try:
        fd = os.open(path, FILE_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"expected a receipt at {path}, got {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(RECEIPT_BYTES + 1)
    try:
        receipt = json.loads(data) if len(data) <= RECEIPT_BYTES else None
        parse_time(receipt["received"])
        if not all(isinstance(receipt.get(k), str) for k in ("entry", "digest", "first_seen")):
            raise TypeError("a field is missing")
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"expected a receipt of rbtutor's collect at {path}, got something else ({exc})") from None
    return receipt


def write_receipt(path: Path, receipt: dict) -> None:
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".receipt-", suffix=".tmp")
    with os.fdopen(handle, "w") as out:
        json.dump(receipt, out, indent=1)
    os.replace(tmp, path)


def keep_claim(folder: Path, result: Intake, entry: str) -> dt.datetime | None:
    """The student's claimed time (``timestamp.txt`` of the copy), or None with ``bad_timestamp``.

    A claim that is missing, not a regular file, above :data:`TIMESTAMP_BYTES` or not a date
    of :func:`parse_time` is named and removed from the copy; lateness never depends on it.
    """
    fd = os.open(folder, DIR_FLAGS)
    try:
        problem, when = None, None
        try:
            st = os.stat(TIMESTAMP_FILE, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            st, problem = None, "is missing"
        if st is not None and not stat.S_ISREG(st.st_mode):
            problem = "is not a file"
        elif st is not None:
            file_fd = os.open(TIMESTAMP_FILE, FILE_FLAGS, dir_fd=fd)
            try:
                data = os.read(file_fd, TIMESTAMP_BYTES + 1)
            finally:
                os.close(file_fd)
            if len(data) > TIMESTAMP_BYTES:
                problem = f"is larger than {TIMESTAMP_BYTES} bytes"
            else:
                try:
                    when = parse_time(data.decode("ascii").strip())
                except (ValueError, UnicodeDecodeError):
                    problem = "is not a date from 1970 on"
        if problem is None:
            return when
        result.events.append(event("bad_timestamp", f"{TIMESTAMP_FILE} of {show_name(entry)} {problem}; it was not "
                                   "kept (lateness is counted from the time the entry appeared).",
                                   path=TIMESTAMP_FILE))
        if st is not None and stat.S_ISDIR(st.st_mode):
            shutil.rmtree(folder / TIMESTAMP_FILE)
        elif st is not None:
            os.unlink(TIMESTAMP_FILE, dir_fd=fd)
        result.taken = [p for p in result.taken if p.split("/", 1)[0] != TIMESTAMP_FILE]
        return None
    finally:
        os.close(fd)
