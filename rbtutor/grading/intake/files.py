"""Step: intake, files. A submission folder is walked through file descriptors and its acceptable files copied.

:func:`take_in` is the whole intake of one folder: the walker below lists it,
refuses what the caps of :class:`.limits.Limits` and the type checks refuse,
and hands each notebook to :mod:`.notebooks` before writing it.

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
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from ..config import GRADING
from ..report import event
from .copies import solution_texts
from .limits import TIMESTAMP_FILE, Intake, Limits, MiB, join_relative, name_problem, show_name
from .notebooks import NotebookStep

#: the listing stops after this many entries per allowed file (``FLOOD_FACTOR * max_files``)
FLOOD_FACTOR = GRADING.intake_flood_factor

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


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
        notebook is compared with each of them (see :mod:`.copies`); marker
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
        src_fd = os.open(source, DIR_FLAGS)
    except OSError as exc:
        if is_link(exc, source):
            result.events.append(event("link_refused", f"The submission folder {show_name(Path(source).name)} "
                                       "is a symbolic link; nothing was taken.", path="."))
            return result
        raise ValueError(f"expected a submission folder at {source}, got {exc.strerror}") from exc
    try:
        dest_fd = make_dest(Path(dest))
        try:
            Walker(limits, sources or {}, result).run(src_fd, dest_fd)
        finally:
            os.close(dest_fd)
    finally:
        os.close(src_fd)
    return result


def is_link(exc: OSError, name, dir_fd: int | None = None) -> bool:
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


def make_dest(dest: Path) -> int:
    """Create (or accept an empty) ``dest`` with mode 0o700 and return its descriptor."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(dest, 0o700)
    try:
        fd = os.open(dest, DIR_FLAGS)
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


class Walker(NotebookStep):
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
            path = join_relative(rel, name)
            if st is not None:
                self.seen(st, show_name(path))
            problem = name_problem(name, self.limits)
            if problem:
                self.note("bad_name", f"The name {show_name(path)} {problem}; it was not taken.", path=show_name(path))
                continue
            if st is None:
                self.note("changed_while_read", f"{show_name(path)} vanished (or could not be examined) while "
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
            path = join_relative(rel, name)
            if depth + 1 > self.limits.max_depth:
                self.note("too_deep", f"The folder {show_name(path)} is nested deeper than "
                          f"{self.limits.max_depth} levels; it was not read.", path=path,
                          max_depth=self.limits.max_depth)
                continue
            self.descend(fd, dest_fd, name, path, st, depth + 1)

    def acceptable_type(self, st: os.stat_result, path: str, *, opened: bool = False) -> bool:
        """True for a folder or a regular file with one link; otherwise one event and False."""
        mode = st.st_mode
        when = " when it was opened" if opened else ""
        if stat.S_ISLNK(mode):
            self.note("link_refused", f"{show_name(path)} is a symbolic link{when}; it was not taken.", path=path)
            return False
        if stat.S_ISDIR(mode):
            return True
        if not stat.S_ISREG(mode):
            what = {stat.S_IFIFO: "a fifo", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
                    stat.S_IFBLK: "a block device"}.get(stat.S_IFMT(mode), "a special file")
            self.note("special_file_refused", f"{show_name(path)} is {what}{when}; it was not taken.", path=path,
                      type=what.split(" ", 1)[1])
            return False
        if st.st_nlink != 1:
            self.note("hard_link_refused", f"{show_name(path)} has {st.st_nlink} names (a hard link){when}; "
                      "it was not taken.", path=path, links=st.st_nlink)
            return False
        return True

    def descend(self, fd: int, dest_fd: int, name: str, path: str, st: os.stat_result, depth: int) -> None:
        try:
            sub_fd = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            self.refuse_open(exc, path, name, fd)
            return
        try:
            now = os.fstat(sub_fd)
            self.seen(now, path)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                self.note("changed_while_read", f"The folder {show_name(path)} was replaced while the submission "
                          "was read; it was not taken.", path=path)
                return
            os.mkdir(name, 0o755, dir_fd=dest_fd)
            sub_dest = os.open(name, DIR_FLAGS, dir_fd=dest_fd)
            try:
                self.walk(sub_fd, sub_dest, path, depth)
            finally:
                os.close(sub_dest)
        finally:
            os.close(sub_fd)

    def refuse_open(self, exc: OSError, path: str, name: str | None = None, fd: int | None = None) -> None:
        if exc.errno == errno.ELOOP or (name is not None and is_link(exc, name, fd)):
            self.note("link_refused", f"{show_name(path)} is a symbolic link when it was opened; it was not taken.",
                      path=path)
        elif exc.errno in (errno.ENOENT, errno.ENOTDIR):
            self.note("changed_while_read", f"{show_name(path)} vanished or changed type while the submission "
                      "was read; it was not taken.", path=path)
        else:
            self.note("file_unreadable", f"{show_name(path)} could not be opened ({exc.strerror}); it was not taken.",
                      path=path)

    # -- files

    def cap_for(self, name: str) -> int:
        lim = self.limits
        return lim.max_notebook_bytes if name.endswith(".ipynb") else lim.max_file_bytes

    def too_large(self, path: str, size: int | None, cap: int, *, total: bool = False) -> None:
        if total:
            message = (f"{show_name(path)} would bring the submission above {self.limits.max_total_bytes} bytes; "
                       "it was not taken.")
        elif size is None:
            message = f"{show_name(path)} is larger than {cap} bytes; it was not taken."
        else:
            message = f"{show_name(path)} has {size} bytes, more than the cap of {cap}; it was not taken."
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
            file_fd = os.open(name, FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            self.refuse_open(exc, path)
            return None
        try:
            now = os.fstat(file_fd)
            self.seen(now, path)
            if not self.acceptable_type(now, path, opened=True) or stat.S_ISDIR(now.st_mode):
                if stat.S_ISDIR(now.st_mode):
                    self.note("changed_while_read", f"{show_name(path)} became a folder while the submission "
                              "was read; it was not taken.", path=path)
                return None
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                self.note("changed_while_read", f"{show_name(path)} was replaced while the submission was read; "
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
            self.note("file_unreadable", f"{show_name(path)} could not be read ({exc.strerror}); it was not taken.",
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
