"""Step: intake, the exchange. The newest entry of each student is collected, its owner checked, its time received.

:func:`collect` replaces ``nbgrader collect``: it lists the exchange's inbound
folder, refuses entries whose name, type or Unix owner does not fit the student
they name, takes the newest acceptable one through the walker of :mod:`.files`,
and writes its time into the receipt of :mod:`.times`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import os
import pwd
import shutil
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..report import event
from ..student_ids import id_problem
from .files import DIR_FLAGS, FLOOD_FACTOR, Walker, is_link, make_dest
from .limits import TIMESTAMP_FILE, Intake, Limits, name_problem, show_name
from .times import MISMATCH_SECONDS, format_time, keep_claim, parse_time, read_receipt, receipt_path, write_receipt


def parse_entry(name: str, assignment: str, limits: Limits = Limits()):
    """``(student, timestamp string, parsed UTC datetime)`` of an inbound entry name, or None.

    nbgrader's submit names entries ``{student}+{assignment}+{timestamp}`` or
    ``{student}+{assignment}+{timestamp}+{random}``; the timestamp is read by
    :func:`parse_time`. The student id must be acceptable to
    :func:`rbtutor.grading.student_ids.id_problem` (no ``+``, so the split is unambiguous).
    """
    parts = name.split("+")
    if len(parts) not in (3, 4) or parts[1] != assignment:
        return None
    student, stamp = parts[0], parts[2]
    if id_problem(student) or name_problem(name, limits):
        return None
    try:
        when = parse_time(stamp)
    except ValueError:
        return None
    return student, stamp, when


@dataclass(frozen=True)
class _Exchange:
    """What every entry of one collection is taken with."""

    inbound_fd: int
    submitted: Path
    assignment: str
    sources: dict
    limits: Limits
    check_owner: bool


def collect(inbound: Path, submitted: Path, assignment: str, *, sources: dict[str, dict] | None = None,
            limits: Limits = Limits(), check_owner: bool = True) -> list[tuple[str, Intake]]:
    """Take in the newest submission of ``assignment`` of every student in the exchange.

    The safe replacement of ``nbgrader collect``. Entries of ``inbound`` named
    ``{student}+{assignment}+{timestamp}[+{random}]`` are grouped by student and
    tried newest first (by the time in the name, as nbgrader does). An entry is
    refused, with an event, and the next newest tried when it is a link or not a
    folder, or (owner check) when the folder or anything in it belongs to another
    Unix account than the student it names. The chosen entry goes through
    :func:`take_in` into a temporary sibling of ``submitted/<student>/<assignment>``,
    which replaces the old folder only once everything was taken in.

    Who handed in: the owner check is made whenever ``check_owner`` is true and the
    student id is a Unix account (:func:`pwd.getpwnam`); ``wrong_owner`` names the
    account that owns the entry. Ids that are not acceptable
    (:mod:`rbtutor.grading.student_ids`) are never collected (``bad_name``).

    When: the submission time is the moment the entry appeared, the newest status
    change time (ctime, which no user can set back) of the entry folder and of
    everything read from it, and never earlier than the time in the entry's name. It
    is written once into the receipt ``submitted/<student>/.<assignment>.receipt.json``
    (:func:`read_receipt`), which a later collect of the same, unchanged entry keeps.
    ``timestamp.txt`` is kept as the student's claim only: ``timestamp_mismatch`` when
    it differs from the receipt by more than :data:`MISMATCH_SECONDS`, ``bad_timestamp``
    (and it is not kept) when it is missing, large or not a date from 1970 on.

    Parameters
    ----------
    inbound : Path
        The exchange's ``<exchange>/<course>/inbound`` folder.
    submitted : Path
        The course's ``submitted`` folder (created if missing).
    assignment : str
        The assignment id; it must obey the name rules.
    sources : dict of str to dict, optional
        As for :func:`take_in`.
    limits : Limits
    check_owner : bool
        False for exchanges where every entry belongs to one service account.

    Returns
    -------
    list of (str, Intake)
        One pair per claimed student id (also refused ids, with their ``bad_name``
        event and nothing taken), sorted by id. Events of refused entries (newer ones,
        and older ones that another account owns) come first in that student's events.

    Raises
    ------
    ValueError
        A bad assignment id, or more than ``limits.max_inbound_entries`` entries in
        ``inbound``.
    """
    problem = name_problem(assignment, limits)
    if problem or "+" in assignment:
        raise ValueError(f"expected an assignment id usable as a folder name, got {assignment!r}")
    inbound_fd = os.open(inbound, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        candidates, bad = _list_inbound(inbound_fd, inbound, assignment, limits)
        Path(submitted).mkdir(parents=True, exist_ok=True)
        exchange = _Exchange(inbound_fd, Path(submitted), assignment, sources or {}, limits, check_owner)
        results = []
        for student in sorted(set(candidates) | set(bad)):
            entries = sorted(candidates.get(student, []), key=lambda c: (c[0], c[1]), reverse=True)
            result = _collect_one(exchange, student, entries)
            result.events[:0] = bad.get(student, [])
            results.append((student, result))
        return results
    finally:
        os.close(inbound_fd)


def _list_inbound(inbound_fd: int, inbound: Path, assignment: str, limits: Limits):
    """``(candidates, bad)``: the entries of ``assignment`` by student, and bad_name events by claimed id."""
    candidates: dict[str, list] = {}
    bad: dict[str, list[dict]] = {}
    with os.scandir(inbound_fd) as it:
        for count, entry in enumerate(it, 1):
            if count > limits.max_inbound_entries:
                raise ValueError(f"expected at most {limits.max_inbound_entries} entries in {inbound}, "
                                 "got more: clean the exchange before collecting")
            if f"+{assignment}+" not in entry.name:
                continue
            parsed = parse_entry(entry.name, assignment, limits)
            if parsed is not None:
                candidates.setdefault(parsed[0], []).append((parsed[2], entry.name, parsed[1]))
                continue
            student = entry.name.split("+", 1)[0]
            why = id_problem(student)
            reason = (f"names a student id that {why}" if why else
                      "is not named student+assignment+timestamp[+random] with a time from 1970 on")
            bad.setdefault(student, []).append(event(
                "bad_name", f"The exchange entry {show_name(entry.name)} {reason}; it was not collected.",
                path=show_name(entry.name)))
    return candidates, bad


def _collect_one(exchange: _Exchange, student: str, entries) -> Intake:
    """The newest acceptable entry of ``student`` taken in; every older entry's owners checked too.

    The entries older than the one taken are not collected, but an entry planted under this
    student's name stays evidence while it is in the exchange, whatever the student hands in
    later: each is checked for owners (:func:`_foreign_owners`) and a ``wrong_owner`` event
    names it on every collect.
    """
    refused: list[dict] = []
    uid = _account_uid(student) if exchange.check_owner else None
    result = None
    for named_time, name, _ in entries:
        if result is None:
            result = _take_entry(exchange, student, uid, name, named_time, refused)
        elif uid is not None:
            foreign = _foreign_owners(exchange, name, uid)
            if foreign:
                refused.append(_wrong_owner(name, student, foreign))
    result = result or Intake()
    result.events[:0] = refused
    return result


def _foreign_owners(exchange: _Exchange, name: str, uid: int) -> list[tuple[str, int]]:
    """``(path, uid)`` of what in the entry ``name`` (the entry itself is ``"."``) ``uid`` does not own.

    Owners only: no file is opened or copied. The walk follows no link and is bounded as the
    walker's listing is (``FLOOD_FACTOR * max_files`` entries, ``max_depth`` folders deep).
    """
    try:
        top_fd = os.open(name, DIR_FLAGS, dir_fd=exchange.inbound_fd)
    except OSError:
        return []  # a link or not a folder: refused by name when it is the newest, holds nothing
    foreign: list[tuple[str, int]] = []
    budget = FLOOD_FACTOR * exchange.limits.max_files
    folders = [(top_fd, ".", 0)]
    try:
        top = os.fstat(top_fd)
        if top.st_uid != uid:
            foreign.append((".", top.st_uid))
        while folders and budget > 0:
            fd, path, depth = folders.pop()
            try:
                with os.scandir(fd) as listing:
                    for entry in listing:
                        budget -= 1
                        if budget < 0:
                            break
                        rel = entry.name if path == "." else f"{path}/{entry.name}"
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if st.st_uid != uid:
                            foreign.append((rel, st.st_uid))
                        if stat.S_ISDIR(st.st_mode) and depth < exchange.limits.max_depth:
                            with contextlib.suppress(OSError):
                                folders.append((os.open(entry.name, DIR_FLAGS, dir_fd=fd), rel, depth + 1))
            finally:
                if fd != top_fd:
                    os.close(fd)
    finally:
        for fd, _, _ in folders:
            if fd != top_fd:
                os.close(fd)
        os.close(top_fd)
    return foreign


def _account_uid(student: str) -> int | None:
    """The uid of the Unix account named ``student``, or None when there is none."""
    try:
        return pwd.getpwnam(student).pw_uid
    except (KeyError, ValueError):
        return None


def _account_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _open_entry(exchange: _Exchange, name: str, refused: list[dict]) -> int | None:
    shown = show_name(name)
    try:
        return os.open(name, DIR_FLAGS, dir_fd=exchange.inbound_fd)
    except OSError as exc:
        if is_link(exc, name, exchange.inbound_fd):
            refused.append(event("link_refused", f"The exchange entry {shown} is a symbolic link; "
                                 "it was not collected.", path=name))
        elif exc.errno == errno.ENOTDIR:
            refused.append(event("not_a_folder", f"The exchange entry {shown} is not a folder; "
                                 "it was not collected.", path=name))
        else:
            refused.append(event("file_unreadable", f"The exchange entry {shown} could not be opened "
                                 f"({exc.strerror}); it was not collected.", path=name))
        return None


def _wrong_owner(name: str, student: str, foreign: list[tuple[str, int]]) -> dict:
    owners = sorted({_account_name(uid) for _, uid in foreign})
    paths = [path for path, _ in foreign[:5]]
    what = "the folder" if paths == ["."] else f"{len(foreign)} of its entries ({', '.join(map(show_name, paths))})"
    return event("wrong_owner", f"The exchange entry {show_name(name)} names {show_name(student)}, but {what} "
                 f"belong(s) to {', '.join(map(show_name, owners))}; it was not collected.",
                 path=show_name(name), owner=owners, paths=paths)


def _take_entry(exchange: _Exchange, student: str, uid: int | None, name: str, named_time: dt.datetime,
                refused: list[dict]) -> Intake | None:
    """The entry ``name`` taken into ``submitted/<student>/<assignment>``, or None (refused, event added)."""
    entry_fd = _open_entry(exchange, name, refused)
    if entry_fd is None:
        return None
    try:
        top = os.fstat(entry_fd)
        if uid is not None and top.st_uid != uid:
            refused.append(_wrong_owner(name, student, [(".", top.st_uid)]))
            return None
        student_dir = exchange.submitted / student
        student_dir.mkdir(exist_ok=True)
        if student_dir.is_symlink() or not student_dir.is_dir():
            raise ValueError(f"expected {student_dir} to be a folder, got a link or a file")
        temp = student_dir / f".{exchange.assignment}.intake-{uuid.uuid4().hex}"
        try:
            result = Intake()
            walker = Walker(exchange.limits, exchange.sources, result)
            walker.owner_uid = uid
            walker.seen(top, ".")
            dest_fd = make_dest(temp)
            try:
                walker.run(entry_fd, dest_fd)
            finally:
                os.close(dest_fd)
            walker.newest_ctime = max(walker.newest_ctime, os.fstat(entry_fd).st_ctime)
            if walker.foreign:
                refused.append(_wrong_owner(name, student, walker.foreign))
                shutil.rmtree(temp)
                return None
            claim = keep_claim(temp, result, name)
            appeared = max(named_time, dt.datetime.fromtimestamp(walker.newest_ctime, dt.UTC))
            receipt = _receipt(exchange, student, name, appeared, _digest(temp, result.taken), claim, result)
            result.timestamp = receipt["received"]
            result.claimed = format_time(claim) if claim else None
            write_receipt(receipt_path(exchange.submitted, student, exchange.assignment), receipt)
            _replace(temp, student_dir / exchange.assignment)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
    finally:
        os.close(entry_fd)
    return result


def _digest(folder: Path, taken: list[str]) -> str:
    """A SHA-256 over the names and contents of the files taken into ``folder``."""
    total = hashlib.sha256()
    for rel in sorted(taken):
        total.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        total.update(hashlib.sha256((folder / rel).read_bytes()).digest())
    return total.hexdigest()


def _receipt(exchange: _Exchange, student: str, name: str, appeared: dt.datetime, digest: str,
             claim: dt.datetime | None, result: Intake) -> dict:
    """The receipt of the entry ``name``: the old one while the entry is unchanged, else a new one."""
    try:
        old = read_receipt(exchange.submitted, student, exchange.assignment)
    except ValueError as exc:
        result.events.append(event("bad_timestamp", f"The grader's receipt of {show_name(student)}'s earlier "
                                   f"collection could not be read ({exc}); a new one was written.",
                                   path=show_name(name)))
        old = None
    received = format_time(appeared)
    if old and old["entry"] == name:
        if old["digest"] == digest:
            received = old["received"]
        else:
            result.events.append(event("entry_changed", f"The exchange entry {show_name(name)} changed after it was "
                                       f"first collected (then received {old['received']}); its time is now "
                                       f"{received}.", path=show_name(name), before=old["received"], after=received))
    claimed = format_time(claim) if claim else None
    if claim is not None and abs((claim - parse_time(received)).total_seconds()) > MISMATCH_SECONDS:
        result.events.append(event("timestamp_mismatch", f"{TIMESTAMP_FILE} of {show_name(name)} claims {claimed}, "
                                   f"but the entry appeared at {received}; lateness is counted from {received}.",
                                   path=TIMESTAMP_FILE, claimed=claimed, received=received))
    first_seen = old["first_seen"] if old and old["entry"] == name and old["digest"] == digest else None
    return {"entry": name, "received": received, "claimed": claimed, "digest": digest,
            "first_seen": first_seen or format_time(dt.datetime.now(dt.UTC))}


def _replace(temp: Path, final: Path) -> None:
    """Put the folder ``temp`` at ``final``, removing the old ``final`` only after the new one is in place."""
    if not os.path.lexists(final):
        os.rename(temp, final)
        return
    old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex}")
    os.rename(final, old)
    try:
        os.rename(temp, final)
    except BaseException:
        os.rename(old, final)
        raise
    if old.is_symlink() or not old.is_dir():
        old.unlink()
    else:
        shutil.rmtree(old)
