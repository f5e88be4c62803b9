"""Step: intake. A submission is checked and copied, trusting nothing in it, before nbgrader sees it.

Everything a student hands in is untrusted: the names, types and sizes of its
files, how many there are and how deep they sit, and the folder itself, which
may change while it is read. :func:`take_in` copies a submission folder into a
fresh folder of the grader's, and :func:`collect` does the same for the newest
submission of each student in nbgrader's exchange (a replacement for
``nbgrader collect``, which dereferences links). Nothing in an exchange entry is
believed about who handed it in or when: its Unix owner must be the student it
names, and its time is when it appeared (its ctime), recorded in a receipt of the
grader's; the student's ``timestamp.txt`` is only compared with it.

How the folder is read
----------------------
* Every folder is opened with ``O_RDONLY | O_DIRECTORY | O_NOFOLLOW`` and listed
  through its file descriptor (``os.scandir(fd)``); each entry is examined with
  ``os.stat(name, dir_fd=fd, follow_symlinks=False)``. No path of the submission
  is ever resolved, so no link is ever followed.
* A file is opened with ``O_RDONLY | O_NOFOLLOW | O_NONBLOCK`` relative to its
  folder's descriptor and checked again on the open descriptor (``os.fstat``):
  it must be a regular file with one link, the same file that was listed. A file
  swapped for a link after the listing fails to open (``O_NOFOLLOW``); one swapped
  for a fifo opens without blocking (``O_NONBLOCK``) and is refused by the check.
* At most the cap plus one byte is read from any file, so a file that grows
  after it was listed is still caught as too large.
* Work is bounded: the listing stops after ``FLOOD_FACTOR * max_files`` entries in
  all (a "flood"), and folders deeper than ``max_depth`` are not listed.

What is refused, and the event kinds
------------------------------------
Each refusal is one event (a dict made by :func:`rbtutor.grading.report.event`:
``kind``, ``message``, and evidence such as ``path``). Messages are sentences
naming what was observed; they never quote the contents of a file.

=========================  ================================================================
kind                       what was observed
=========================  ================================================================
``link_refused``           a symbolic link (also an inbound entry of the exchange)
``hard_link_refused``      a regular file with more than one name (``st_nlink > 1``)
``special_file_refused``   a fifo, socket, or character or block device
``too_many_files``         more than ``max_files`` files; ``flood: True`` when the listing
                           was stopped
``too_deep``               a folder nested deeper than ``max_depth``
``too_large``              a file above its cap, or the submission above ``max_total_bytes``
``bad_name``               a name that is not printable, too long, ``.``/``..``, or (for
                           exchange entries) not ``student+assignment+timestamp[+random]``
                           or naming a student id that :mod:`.student_ids` refuses
``notebook_unreadable``    an ``.ipynb`` that is not JSON or not an nbformat 4 notebook
``cell_cut``               a cell source above ``max_cell_source_bytes`` (it is truncated)
``too_many_cells``         more than ``max_cells`` cells (the rest are dropped)
``source_copy``            the notebook is, or contains, the instructor's source (not taken)
``changed_while_read``     an entry vanished or was replaced between listing and opening
``file_unreadable``        the grading user could not open or read a file (permissions)
``not_a_folder``           an exchange entry that is a regular file, not a folder
``bad_timestamp``          ``timestamp.txt`` missing, too large or not a date from 1970 on (it is
                           not kept; lateness never depends on it)
``wrong_owner``            an exchange entry, or something in it, belonging to another Unix
                           account than the student it names (the owner is named)
``timestamp_mismatch``     ``timestamp.txt`` claims a time more than a minute away from the
                           time the entry appeared
``entry_changed``          an entry changed after an earlier collect took it (it gets a new time)
=========================  ================================================================

Source copies
-------------
A notebook earns nothing, is not written, and is named (``source_copy``) when

* any of its cells holds an nbgrader marker line (``### BEGIN SOLUTION``,
  ``### END SOLUTION``, ``### BEGIN HIDDEN TESTS``, ``### END HIDDEN TESTS``: a
  line starting with ``#`` marks followed by the marker), which only the
  instructor's source has; or
* it contains solution text of the instructor's source verbatim (up to
  whitespace): a solution text *matches* when its lines, with all whitespace
  removed and blank lines dropped, occur as consecutive lines of one submitted
  cell (any cell, whatever its ``grade_id``). A notebook is a copy when one
  *strong* text matches (at least :data:`STRONG_LINES` lines and
  :data:`STRONG_CHARS` non-blank characters, or :data:`PROSE_CHARS` characters: a
  paragraph of the model answer), or at least two *non-trivial* texts match
  (each at least :data:`NONTRIVIAL_LINES` lines and :data:`NONTRIVIAL_CHARS`
  characters). One short line, or a two-line computation that the problem all but
  dictates, never counts on its own: in problem 3 an honest student who writes
  every code answer exactly as the key does is not flagged (one of its three code
  answers is non-trivial, and none is strong); the key's model answers in prose
  are.

Notebooks are parsed from the capped bytes, checked to be nbformat 4 notebooks,
their cells rebuilt from the fields grading needs (outputs cleared, as nbgrader's
``ClearOutput`` does first anyway), cut to the caps, and written with nbformat:
nbgrader reads what intake validated, not the submitted bytes.
"""

from __future__ import annotations

import bisect
import datetime as dt
import errno
import hashlib
import json
import os
import pwd
import re
import shutil
import stat
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .report import event
from .student_ids import id_problem

MiB = 1024 * 1024

#: the listing stops after this many entries per allowed file (``FLOOD_FACTOR * max_files``)
FLOOD_FACTOR = 4
#: a strong match: this many lines and characters, or PROSE_CHARS characters in any number of lines
STRONG_LINES, STRONG_CHARS, PROSE_CHARS = 3, 120, 240
#: a non-trivial match: two of these make a copy
NONTRIVIAL_LINES, NONTRIVIAL_CHARS = 2, 60
#: nbgrader's marker lines (as in its ClearSolutions and ClearHiddenTests)
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
_MARKER_LINE = re.compile(r"^[ \t]*#+[ \t]*(" + "|".join(MARKERS) + r")\b", re.M)
_SOLUTION_REGION = re.compile(r"^[ \t]*#+[ \t]*BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*#+[ \t]*END SOLUTION",
                              re.M | re.S)
_CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: the file nbgrader's submit writes into every submission, and its size cap
TIMESTAMP_FILE, TIMESTAMP_BYTES = "timestamp.txt", 100
#: the student's claimed time and the time the entry appeared may differ this much unnamed
MISMATCH_SECONDS = 60.0
#: no submission time (in an entry's name or a claim) is earlier than this
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: the receipt of a collected submission: ``submitted/<student>/.<assignment>.receipt.json``
RECEIPT_SUFFIX, RECEIPT_BYTES = ".receipt.json", 64 * 1024
_STAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))? ?"
                    r"(UTC|Z|[+-]\d{2}:?\d{2})?")

KINDS = ("link_refused", "hard_link_refused", "special_file_refused", "too_many_files", "too_deep",
         "too_large", "bad_name", "notebook_unreadable", "cell_cut", "too_many_cells", "source_copy",
         "changed_while_read", "file_unreadable", "not_a_folder", "bad_timestamp", "wrong_owner",
         "timestamp_mismatch", "entry_changed")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Limits:
    """Caps on what one submission may hold; everything above them is refused or cut.

    Attributes
    ----------
    max_files : int
        Files taken from one submission (default 64); the listing stops after
        ``FLOOD_FACTOR`` (4) times as many entries.
    max_depth : int
        Folders below the submission folder (default 4): ``a/b/c/d/file`` is taken,
        ``a/b/c/d/e/`` is not listed.
    max_file_bytes : int
        Size of a file that is not a notebook (default 16 MiB).
    max_total_bytes : int
        Size of everything taken from one submission (default 64 MiB).
    max_notebook_bytes : int
        Size of an ``.ipynb`` file (default 16 MiB); it is parsed from at most this many bytes.
    max_cells : int
        Cells kept in one notebook (default 1000).
    max_cell_source_bytes : int
        UTF-8 bytes of one cell's source (default 100 000); longer sources are cut
        at a character boundary.
    max_name_bytes : int
        Bytes of one file or folder name (default 255). Names must also be printable
        and must not be ``.`` or ``..`` (``/`` and NUL cannot occur in a listed name).
    max_inbound_entries : int
        Entries of the exchange's inbound folder that :func:`collect` lists
        (default 100 000); more is an error, not a silent partial collection.
    """

    max_files: int = 64
    max_depth: int = 4
    max_file_bytes: int = 16 * MiB
    max_total_bytes: int = 64 * MiB
    max_notebook_bytes: int = 16 * MiB
    max_cells: int = 1000
    max_cell_source_bytes: int = 100_000
    max_name_bytes: int = 255
    max_inbound_entries: int = 100_000

    def __post_init__(self):
        for name in ("max_files", "max_depth", "max_file_bytes", "max_total_bytes", "max_notebook_bytes",
                     "max_cells", "max_cell_source_bytes", "max_name_bytes", "max_inbound_entries"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"expected {name} to be a non-negative int, got {value!r}")


@dataclass
class Intake:
    """What :func:`take_in` (or :func:`collect`) did with one submission.

    Attributes
    ----------
    taken : list of str
        Relative paths (``/``-separated) of the files written into the destination.
    events : list of dict
        One event per refusal or cut (see the module docstring for the kinds).
    timestamp : str or None
        The submission time of the receipt: when the exchange entry appeared (set by
        :func:`collect` only).
    claimed : str or None
        The time the student's ``timestamp.txt`` claims, when it is a date (set by
        :func:`collect` only); never used for lateness.
    """

    taken: list[str] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    timestamp: str | None = None
    claimed: str | None = None

    def kinds(self) -> list[str]:
        """The kinds of :attr:`events`, in order."""
        return [e["kind"] for e in self.events]


# --------------------------------------------------------------------------- names


def name_problem(name: str, limits: Limits = Limits()) -> str | None:
    """Why ``name`` is not acceptable as one file, folder or student name, or None if it is."""
    if name in ("", ".", ".."):
        return "is empty, '.' or '..'"
    if "/" in name or "\0" in name:
        return "contains '/' or a NUL character"
    if not name.isprintable():
        return "contains characters that are not printable"
    if len(os.fsencode(name)) > limits.max_name_bytes:
        return f"is longer than {limits.max_name_bytes} bytes"
    return None


def _show(name: str) -> str:
    """A name as it may appear in a message: printable and short."""
    shown = name if name.isprintable() else ascii(name)[1:-1]
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


# --------------------------------------------------------------------------- take_in


def take_in(source: Path, dest: Path, *, sources: dict[str, dict] | None = None,
            limits: Limits = Limits()) -> Intake:
    """Copy the acceptable files of the submission folder ``source`` into ``dest``.

    Parameters
    ----------
    source : Path
        The submission folder. Its last component must not be a link (it is
        opened with ``O_NOFOLLOW``); its parents are the caller's and trusted.
    dest : Path
        Created by intake with mode 0o700; it must not exist or be an empty folder
        (not a link). Sub-folders are created 0o755 and files 0o644 (so that a
        confined kernel user can read the copy nbgrader makes of them).
    sources : dict of str to dict, optional
        The instructor's source notebooks (nbformat dicts, read by the caller from
        ``exercises/``), keyed by notebook name (``"problem03"``). Every submitted
        notebook is compared with each of them (see the module docstring); marker
        lines are refused with or without them.
    limits : Limits

    Returns
    -------
    Intake
        The files written and one event per refusal or cut.

    Raises
    ------
    ValueError
        ``dest`` exists and is not an empty folder, or ``source`` is not a folder
        (a link there is an event ``link_refused``, not an error).

    Examples
    --------
    >>> import shutil, tempfile
    >>> tmp = Path(tempfile.mkdtemp())
    >>> (tmp / "sub").mkdir()
    >>> (tmp / "sub" / "data.csv").write_text("1,2")
    3
    >>> (tmp / "sub" / "key.yaml").symlink_to("/etc/passwd")
    >>> result = take_in(tmp / "sub", tmp / "copy")
    >>> result.taken, result.kinds()
    (['data.csv'], ['link_refused'])
    >>> shutil.rmtree(tmp)
    """
    result = Intake()
    try:
        src_fd = os.open(source, _DIR_FLAGS)
    except OSError as exc:
        if _is_link(exc, source):
            result.events.append(event("link_refused", f"The submission folder {_show(Path(source).name)} "
                                       "is a symbolic link; nothing was taken.", path="."))
            return result
        raise ValueError(f"expected a submission folder at {source}, got {exc.strerror}") from exc
    try:
        dest_fd = _make_dest(Path(dest))
        try:
            _Walker(limits, sources or {}, result).run(src_fd, dest_fd)
        finally:
            os.close(dest_fd)
    finally:
        os.close(src_fd)
    return result


def _is_link(exc: OSError, name, dir_fd: int | None = None) -> bool:
    """Whether opening ``name`` as a folder failed because it is a symbolic link.

    With ``O_DIRECTORY | O_NOFOLLOW``, Linux reports a link as ``ENOTDIR`` (or
    ``ELOOP``), like a regular file, so the entry itself is examined (never followed).
    """
    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
        return False
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return exc.errno == errno.ELOOP


def _make_dest(dest: Path) -> int:
    """Create (or accept an empty) ``dest`` with mode 0o700 and return its descriptor."""
    try:
        os.mkdir(dest, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(dest, _DIR_FLAGS)
    except OSError as exc:
        raise ValueError(f"expected dest {dest} to be a new or empty folder, got {exc.strerror}") from exc
    try:
        with os.scandir(fd) as entries:
            if next(entries, None) is not None:
                raise ValueError(f"expected dest {dest} to be a new or empty folder, got a folder with files")
        os.fchmod(fd, 0o700)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True


class _Walker:
    """One walk over one submission: the bounded listing, the checks and the copies."""

    def __init__(self, limits: Limits, sources: dict, result: Intake):
        self.limits, self.result = limits, result
        self.solutions = {name: solution_texts(nb) for name, nb in sources.items()}
        self.entries = 0          # entries listed so far, in all folders
        self.files = 0            # files accepted so far (the cap is max_files)
        self.extra_files = 0      # regular files refused because the cap was reached
        self.total = 0            # bytes taken so far
        self.flood = False
        self.owner_uid: int | None = None   # when set, every entry seen must belong to this uid
        self.foreign: list[tuple[str, int]] = []  # (path, uid) of entries owned by someone else
        self.newest_ctime = 0.0   # the latest status change of anything seen (a user cannot set it back)

    def seen(self, st: os.stat_result, path: str) -> None:
        """Note the owner and status-change time of one entry the walk examined."""
        self.newest_ctime = max(self.newest_ctime, st.st_ctime)
        if self.owner_uid is not None and st.st_uid != self.owner_uid:
            self.foreign.append((path, st.st_uid))

    def note(self, kind: str, message: str, **evidence) -> None:
        self.result.events.append(event(kind, message, **evidence))

    def run(self, src_fd: int, dest_fd: int) -> None:
        self.walk(src_fd, dest_fd, "", 0)
        if self.flood or self.extra_files:
            cap = self.limits.max_files
            if self.flood:
                message = (f"The submission holds more than {FLOOD_FACTOR * cap} entries; listing stopped "
                           f"there and at most {cap} files were taken.")
            else:
                message = f"The submission holds more than {cap} files; {self.extra_files} of them were not taken."
            self.note("too_many_files", message, path=".", max_files=cap, refused=self.extra_files,
                      flood=self.flood)

    # -- listing

    def listing(self, fd: int, expected: tuple[str, ...] = ()) -> list[tuple[str, os.stat_result | None]]:
        """The entries of one folder (bounded by the flood limit), notebooks first, then by name.

        ``expected`` names (the assignment's notebooks and nbgrader's own files, in the top
        folder) are looked up directly, so that a flood of other files cannot hide them.
        """
        found = [name for name in expected if _exists(fd, name)]
        flood_at = FLOOD_FACTOR * self.limits.max_files
        with os.scandir(fd) as it:
            for entry in it:
                if self.entries >= flood_at:
                    self.flood = True
                    break
                self.entries += 1
                if entry.name not in found:
                    found.append(entry.name)
        out = []
        for name in sorted(found, key=lambda n: (not n.endswith(".ipynb"), n)):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                st = None
            out.append((name, st))
        return out

    def walk(self, fd: int, dest_fd: int, rel: str, depth: int) -> None:
        folders = []
        expected = () if depth else (*(f"{name}.ipynb" for name in self.solutions), TIMESTAMP_FILE,
                                     "submission_secret.txt")
        for name, st in self.listing(fd, expected):
            path = _join(rel, name)
            if st is not None:
                self.seen(st, _show(path))
            problem = name_problem(name, self.limits)
            if problem:
                self.note("bad_name", f"The name {_show(path)} {problem}; it was not taken.", path=_show(path))
                continue
            if st is None:
                self.note("changed_while_read", f"{_show(path)} vanished (or could not be examined) while "
                          "the submission was read; it was not taken.", path=path)
                continue
            if not self.acceptable_type(st, path):
                continue
            if stat.S_ISDIR(st.st_mode):
                folders.append((name, st))
            else:
                self.take_file(fd, dest_fd, name, path, st)
        for name, st in folders:
            if self.flood:
                return
            path = _join(rel, name)
            if depth + 1 > self.limits.max_depth:
                self.note("too_deep", f"The folder {_show(path)} is nested deeper than "
                          f"{self.limits.max_depth} levels; it was not read.", path=path,
                          max_depth=self.limits.max_depth)
                continue
            self.descend(fd, dest_fd, name, path, st, depth + 1)

    def acceptable_type(self, st: os.stat_result, path: str, *, opened: bool = False) -> bool:
        """True for a folder or a regular file with one link; otherwise one event and False."""
        mode = st.st_mode
        when = " when it was opened" if opened else ""
        if stat.S_ISLNK(mode):
            self.note("link_refused", f"{_show(path)} is a symbolic link{when}; it was not taken.", path=path)
            return False
        if stat.S_ISDIR(mode):
            return True
        if not stat.S_ISREG(mode):
            what = {stat.S_IFIFO: "a fifo", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
                    stat.S_IFBLK: "a block device"}.get(stat.S_IFMT(mode), "a special file")
            self.note("special_file_refused", f"{_show(path)} is {what}{when}; it was not taken.", path=path,
                      type=what.split(" ", 1)[1])
            return False
        if st.st_nlink != 1:
            self.note("hard_link_refused", f"{_show(path)} has {st.st_nlink} names (a hard link){when}; "
                      "it was not taken.", path=path, links=st.st_nlink)
            return False
        return True

    def descend(self, fd: int, dest_fd: int, name: str, path: str, st: os.stat_result, depth: int) -> None:
        try:
            sub_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            self.refuse_open(exc, path, name, fd)
            return
        try:
            now = os.fstat(sub_fd)
            self.seen(now, path)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                self.note("changed_while_read", f"The folder {_show(path)} was replaced while the submission "
                          "was read; it was not taken.", path=path)
                return
            os.mkdir(name, 0o755, dir_fd=dest_fd)
            sub_dest = os.open(name, _DIR_FLAGS, dir_fd=dest_fd)
            try:
                self.walk(sub_fd, sub_dest, path, depth)
            finally:
                os.close(sub_dest)
        finally:
            os.close(sub_fd)

    def refuse_open(self, exc: OSError, path: str, name: str | None = None, fd: int | None = None) -> None:
        if exc.errno == errno.ELOOP or (name is not None and _is_link(exc, name, fd)):
            self.note("link_refused", f"{_show(path)} is a symbolic link when it was opened; it was not taken.",
                      path=path)
        elif exc.errno in (errno.ENOENT, errno.ENOTDIR):
            self.note("changed_while_read", f"{_show(path)} vanished or changed type while the submission "
                      "was read; it was not taken.", path=path)
        else:
            self.note("file_unreadable", f"{_show(path)} could not be opened ({exc.strerror}); it was not taken.",
                      path=path)

    # -- files

    def cap_for(self, name: str) -> int:
        lim = self.limits
        return lim.max_notebook_bytes if name.endswith(".ipynb") else lim.max_file_bytes

    def too_large(self, path: str, size: int | None, cap: int, *, total: bool = False) -> None:
        if total:
            message = (f"{_show(path)} would bring the submission above {self.limits.max_total_bytes} bytes; "
                       "it was not taken.")
        elif size is None:
            message = f"{_show(path)} is larger than {cap} bytes; it was not taken."
        else:
            message = f"{_show(path)} has {size} bytes, more than the cap of {cap}; it was not taken."
        self.note("too_large", message, path=path, bytes=size, cap=self.limits.max_total_bytes if total else cap)

    def take_file(self, fd: int, dest_fd: int, name: str, path: str, st: os.stat_result) -> None:
        if self.files >= self.limits.max_files:
            self.extra_files += 1
            return
        cap = self.cap_for(name)
        if st.st_size > cap:
            self.too_large(path, st.st_size, cap)
            return
        if self.total + st.st_size > self.limits.max_total_bytes:
            self.too_large(path, st.st_size, cap, total=True)
            return
        data = self.read(fd, name, path, st, cap)
        if data is None:
            return
        if self.total + len(data) > self.limits.max_total_bytes:
            self.too_large(path, len(data), cap, total=True)
            return
        if name.endswith(".ipynb"):
            data = self.notebook(data, path)
            if data is None:
                return
        self.write(dest_fd, name, data)
        self.files += 1
        self.total += len(data)
        self.result.taken.append(path)

    def read(self, fd: int, name: str, path: str, st: os.stat_result, cap: int) -> bytes | None:
        """At most ``cap`` bytes of a regular single-link file, or None (with an event)."""
        try:
            file_fd = os.open(name, _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            self.refuse_open(exc, path)
            return None
        try:
            now = os.fstat(file_fd)
            self.seen(now, path)
            if not self.acceptable_type(now, path, opened=True) or stat.S_ISDIR(now.st_mode):
                if stat.S_ISDIR(now.st_mode):
                    self.note("changed_while_read", f"{_show(path)} became a folder while the submission "
                              "was read; it was not taken.", path=path)
                return None
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                self.note("changed_while_read", f"{_show(path)} was replaced while the submission was read; "
                          "it was not taken.", path=path)
                return None
            chunks, got = [], 0
            while got <= cap:
                chunk = os.read(file_fd, min(cap + 1 - got, MiB))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
            # a change made while the file was read moves its ctime: the entry's time follows it
            self.newest_ctime = max(self.newest_ctime, os.fstat(file_fd).st_ctime)
        except OSError as exc:
            self.note("file_unreadable", f"{_show(path)} could not be read ({exc.strerror}); it was not taken.",
                      path=path)
            return None
        finally:
            os.close(file_fd)
        if got > cap:
            self.too_large(path, None, cap)
            return None
        return b"".join(chunks)

    def write(self, dest_fd: int, name: str, data: bytes) -> None:
        out = os.open(name, _NEW_FLAGS, 0o644, dir_fd=dest_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
        finally:
            os.close(out)

    # -- notebooks

    def notebook(self, data: bytes, path: str) -> bytes | None:
        """The validated, cut and rewritten notebook, or None (with an event) if it is refused."""
        try:
            raw = json.loads(data)
        except (ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else "not valid JSON"
            self.note("notebook_unreadable", f"{_show(path)} is {reason}; it was not taken.", path=path)
            return None
        nb, problem = self.rebuild(raw, path)
        if nb is None:
            self.note("notebook_unreadable", f"{_show(path)} is not an nbformat 4 notebook ({problem}); "
                      "it was not taken.", path=path)
            return None
        found = _Submitted(nb).copy_of(self.solutions)
        if found:
            name, evidence = found
            stem = path.rsplit("/", 1)[-1][: -len(".ipynb")]
            name = name if name is not None else (stem if stem in self.solutions else None)
            self.note("source_copy", _copy_message(path, name, evidence), path=path, source=name, **evidence)
            return None
        try:
            text = nbformat.writes(nb, version=4)
            return text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates (valid JSON escapes, not UTF-8): keep them escaped
            return nbformat.writes(nb, version=4, ensure_ascii=True).encode("ascii")

    def rebuild(self, raw, path: str):
        """An nbformat 4 notebook holding only the fields grading needs, cut to the caps."""
        if not isinstance(raw, dict):
            return None, "not a JSON object"
        if raw.get("nbformat") != 4:
            return None, "nbformat is not 4"
        minor = raw.get("nbformat_minor", 0)
        if not isinstance(minor, int) or isinstance(minor, bool) or minor < 0:
            return None, "nbformat_minor is not a number"
        minor = min(minor, 5)
        cells, meta = raw.get("cells"), raw.get("metadata", {})
        if not isinstance(cells, list):
            return None, "no list of cells"
        if not isinstance(meta, dict):
            return None, "metadata is not an object"
        lim = self.limits
        if len(cells) > lim.max_cells:
            self.note("too_many_cells", f"{_show(path)} has {len(cells)} cells; only the first {lim.max_cells} "
                      "were kept.", path=path, cells=len(cells), cap=lim.max_cells)
            cells = cells[:lim.max_cells]
        out, ids = [], set()
        for index, cell in enumerate(cells):
            if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
                return None, f"cell {index} has no known cell_type"
            source = cell.get("source", "")
            if isinstance(source, list) and all(isinstance(s, str) for s in source):
                source = "".join(source)
            if not isinstance(source, str):
                return None, f"cell {index} has a source that is not text"
            cell_meta = cell.get("metadata", {})
            if not isinstance(cell_meta, dict):
                return None, f"cell {index} has metadata that is not an object"
            size = len(source.encode("utf-8", "surrogatepass"))
            if size > lim.max_cell_source_bytes:
                source = cut_text(source, lim.max_cell_source_bytes)
                grade = cell_meta.get("nbgrader")
                grade_id = grade.get("grade_id") if isinstance(grade, dict) else None
                self.note("cell_cut", f"Cell {index} of {_show(path)} has a source of {size} bytes; it was cut "
                          f"to {lim.max_cell_source_bytes}.", path=path, cell=index,
                          grade_id=grade_id if isinstance(grade_id, str) else None, bytes=size,
                          cap=lim.max_cell_source_bytes)
            new = {"cell_type": cell["cell_type"], "metadata": cell_meta, "source": source}
            if cell["cell_type"] == "code":
                new.update(outputs=[], execution_count=None)
            elif isinstance(cell.get("attachments"), dict):
                new["attachments"] = cell["attachments"]
            if minor >= 5:
                cid = cell.get("id")
                if not (isinstance(cid, str) and _CELL_ID.match(cid)) or cid in ids:
                    cid = uuid.uuid4().hex[:16]
                ids.add(cid)
                new["id"] = cid
            out.append(new)
        nb = nbformat.from_dict({"nbformat": 4, "nbformat_minor": minor, "metadata": meta, "cells": out})
        try:
            nbformat.validate(nb)
        except nbformat.ValidationError as exc:
            where = "/".join(str(p) for p in list(exc.absolute_path)[:6]) or "top level"
            return None, f"schema check failed at {where}"
        return nb, None


def cut_text(text: str, cap: int) -> str:
    """``text`` cut to at most ``cap`` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return text
    end = cap
    while end > 0 and (data[end] & 0xC0) == 0x80:  # data[end] continues a character: back off
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------- source copies


def _cell_text(cell) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _squeeze(text: str) -> list[str]:
    """The lines of ``text`` with all whitespace removed, blank lines dropped."""
    lines = ("".join(line.split()) for line in text.splitlines())
    return [line for line in lines if line]


def solution_texts(source_nb: dict) -> list[tuple[str, list[str]]]:
    """``(grade_id, squeezed lines)`` of each solution cell of an instructor's source notebook.

    The text of a cell is what lies between its ``BEGIN SOLUTION`` and ``END
    SOLUTION`` lines (all such regions), or the whole cell when it has no markers
    (nbgrader then replaces the whole cell in the release).
    """
    out = []
    for index, cell in enumerate(source_nb.get("cells", []) if isinstance(source_nb, dict) else []):
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        if not isinstance(meta, dict) or not meta.get("solution"):
            continue
        text = _cell_text(cell)
        regions = _SOLUTION_REGION.findall(text)
        lines = _squeeze("\n".join(regions) if regions else text)
        if lines:
            out.append((str(meta.get("grade_id", f"cell {index}")), lines))
    return out


def source_copy(nb: dict, source_nb: dict) -> dict | None:
    """Evidence that ``nb`` is or contains ``source_nb``'s solutions, or None (see the module docstring).

    Returns
    -------
    dict or None
        ``{"markers": [{"cell": i, "marker": "BEGIN SOLUTION"}, ...]}`` when marker
        lines were found, else ``{"cells": [{"grade_id", "cell", "lines", "chars"}, ...]}``
        for the matching solution texts, when they make a copy by the rule.
    """
    found = _Submitted(nb).copy_of({"source": solution_texts(source_nb)})
    return found[1] if found else None


class _Submitted:
    """A submitted notebook prepared once for comparison with any number of sources."""

    def __init__(self, nb: dict):
        cells = [_cell_text(c) for c in nb.get("cells", [])]
        self.markers = [{"cell": i, "marker": m.group(1)} for i, text in enumerate(cells)
                        for m in _MARKER_LINE.finditer(text)][:20]
        # one string, cells separated by a NUL line that no needle holds: one search per solution text
        parts, self.starts, at = [], [], 0
        for text in cells:
            part = "\n" + "\n".join(_squeeze(text)) + "\n\0"
            self.starts.append(at)
            parts.append(part)
            at += len(part)
        self.haystack = "".join(parts)

    def copy_of(self, solutions: dict[str, list[tuple[str, list[str]]]]) -> tuple[str | None, dict] | None:
        """``(source name, evidence)`` for the first source this notebook copies, or None.

        ``solutions`` maps a source name to its :func:`solution_texts`. Marker lines
        make a copy whatever the sources (the name is then None).
        """
        if self.markers:
            return None, {"markers": self.markers}
        for name, texts in solutions.items():
            strong, nontrivial = [], []
            for grade_id, lines in texts:
                needle = "\n" + "\n".join(lines) + "\n"
                found_at = self.haystack.find(needle) if "\0" not in needle else -1
                if found_at < 0:
                    continue
                where = bisect.bisect_right(self.starts, found_at) - 1
                chars = sum(len(line) for line in lines)
                match = {"grade_id": grade_id, "cell": where, "lines": len(lines), "chars": chars}
                if (len(lines) >= STRONG_LINES and chars >= STRONG_CHARS) or chars >= PROSE_CHARS:
                    strong.append(match)
                elif len(lines) >= NONTRIVIAL_LINES and chars >= NONTRIVIAL_CHARS:
                    nontrivial.append(match)
            if strong or len(nontrivial) >= 2:
                return name, {"cells": strong + nontrivial}
        return None


def _copy_message(path: str, source: str | None, found: dict) -> str:
    if "markers" in found:
        first = found["markers"][0]
        return (f"{_show(path)} contains the instructor's marker line '### {first['marker']}' (cell "
                f"{first['cell']}), which only a source notebook has; it was not taken.")
    ids = ", ".join(m["grade_id"] for m in found["cells"])
    return (f"{_show(path)} contains the instructor's solution to {_show(source)} verbatim ({ids}); "
            "it was not taken.")


# --------------------------------------------------------------------------- collect


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
        event and nothing taken), sorted by id. Events of refused newer entries come
        first in that student's events.

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
                "bad_name", f"The exchange entry {_show(entry.name)} {reason}; it was not collected.",
                path=_show(entry.name)))
    return candidates, bad


def _collect_one(exchange: _Exchange, student: str, entries) -> Intake:
    refused: list[dict] = []
    uid = _account_uid(student) if exchange.check_owner else None
    for named_time, name, _ in entries:
        result = _take_entry(exchange, student, uid, name, named_time, refused)
        if result is not None:
            result.events[:0] = refused
            return result
    return Intake(events=refused)


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
    shown = _show(name)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=exchange.inbound_fd)
    except OSError as exc:
        if _is_link(exc, name, exchange.inbound_fd):
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
    what = "the folder" if paths == ["."] else f"{len(foreign)} of its entries ({', '.join(map(_show, paths))})"
    return event("wrong_owner", f"The exchange entry {_show(name)} names {_show(student)}, but {what} "
                 f"belong(s) to {', '.join(map(_show, owners))}; it was not collected.",
                 path=_show(name), owner=owners, paths=paths)


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
            walker = _Walker(exchange.limits, exchange.sources, result)
            walker.owner_uid = uid
            walker.seen(top, ".")
            dest_fd = _make_dest(temp)
            try:
                walker.run(entry_fd, dest_fd)
            finally:
                os.close(dest_fd)
            walker.newest_ctime = max(walker.newest_ctime, os.fstat(entry_fd).st_ctime)
            if walker.foreign:
                refused.append(_wrong_owner(name, student, walker.foreign))
                shutil.rmtree(temp)
                return None
            claim = _keep_claim(temp, result, name)
            appeared = max(named_time, dt.datetime.fromtimestamp(walker.newest_ctime, dt.UTC))
            receipt = _receipt(exchange, student, name, appeared, _digest(temp, result.taken), claim, result)
            result.timestamp = receipt["received"]
            result.claimed = format_time(claim) if claim else None
            _write_receipt(receipt_path(exchange.submitted, student, exchange.assignment), receipt)
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
        fd = os.open(path, _FILE_FLAGS)
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


def _receipt(exchange: _Exchange, student: str, name: str, appeared: dt.datetime, digest: str,
             claim: dt.datetime | None, result: Intake) -> dict:
    """The receipt of the entry ``name``: the old one while the entry is unchanged, else a new one."""
    try:
        old = read_receipt(exchange.submitted, student, exchange.assignment)
    except ValueError as exc:
        result.events.append(event("bad_timestamp", f"The grader's receipt of {_show(student)}'s earlier "
                                   f"collection could not be read ({exc}); a new one was written.",
                                   path=_show(name)))
        old = None
    received = format_time(appeared)
    if old and old["entry"] == name:
        if old["digest"] == digest:
            received = old["received"]
        else:
            result.events.append(event("entry_changed", f"The exchange entry {_show(name)} changed after it was "
                                       f"first collected (then received {old['received']}); its time is now "
                                       f"{received}.", path=_show(name), before=old["received"], after=received))
    claimed = format_time(claim) if claim else None
    if claim is not None and abs((claim - parse_time(received)).total_seconds()) > MISMATCH_SECONDS:
        result.events.append(event("timestamp_mismatch", f"{TIMESTAMP_FILE} of {_show(name)} claims {claimed}, "
                                   f"but the entry appeared at {received}; lateness is counted from {received}.",
                                   path=TIMESTAMP_FILE, claimed=claimed, received=received))
    first_seen = old["first_seen"] if old and old["entry"] == name and old["digest"] == digest else None
    return {"entry": name, "received": received, "claimed": claimed, "digest": digest,
            "first_seen": first_seen or format_time(dt.datetime.now(dt.UTC))}


def _write_receipt(path: Path, receipt: dict) -> None:
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".receipt-", suffix=".tmp")
    with os.fdopen(handle, "w") as out:
        json.dump(receipt, out, indent=1)
    os.replace(tmp, path)


def _keep_claim(folder: Path, result: Intake, entry: str) -> dt.datetime | None:
    """The student's claimed time (``timestamp.txt`` of the copy), or None with ``bad_timestamp``.

    A claim that is missing, not a regular file, above :data:`TIMESTAMP_BYTES` or not a date
    of :func:`parse_time` is named and removed from the copy; lateness never depends on it.
    """
    fd = os.open(folder, _DIR_FLAGS)
    try:
        problem, when = None, None
        try:
            st = os.stat(TIMESTAMP_FILE, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            st, problem = None, "is missing"
        if st is not None and not stat.S_ISREG(st.st_mode):
            problem = "is not a file"
        elif st is not None:
            file_fd = os.open(TIMESTAMP_FILE, _FILE_FLAGS, dir_fd=fd)
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
        result.events.append(event("bad_timestamp", f"{TIMESTAMP_FILE} of {_show(entry)} {problem}; it was not "
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
