"""Step: intake, its caps and names. What one submission may hold, what an intake returns, which names pass.

Every other module of :mod:`rbtutor.grading.intake` reads its caps from
:class:`Limits`, reports into an :class:`Intake`, and checks names with
:func:`name_problem`; this module imports nothing of the others.

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
                           or naming a student id that :mod:`rbtutor.grading.student_ids` refuses
``notebook_unreadable``    an ``.ipynb`` that is not JSON or not an nbformat 4 notebook
``cell_cut``               a cell source above ``max_cell_source_bytes`` (it is truncated)
``too_many_cells``         more than ``max_cells`` cells (the rest are dropped)
``attachments_cut``        a cell's attachments above ``max_attachment_bytes`` (all of them dropped)
``metadata_cut``           a cell's metadata above ``max_cell_metadata_bytes``, or the notebook's above
                           ``max_notebook_metadata_bytes`` (only the keys grading reads are kept)
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
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..config import GRADING

MiB = 1024 * 1024
#: the file nbgrader's submit writes into every submission, and its size cap
TIMESTAMP_FILE, TIMESTAMP_BYTES = "timestamp.txt", GRADING.intake_timestamp_bytes

KINDS = ("link_refused", "hard_link_refused", "special_file_refused", "too_many_files", "too_deep",
         "too_large", "bad_name", "notebook_unreadable", "cell_cut", "too_many_cells", "source_copy",
         "changed_while_read", "file_unreadable", "not_a_folder", "bad_timestamp", "wrong_owner",
         "timestamp_mismatch", "entry_changed", "attachments_cut", "metadata_cut")


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
    max_attachment_bytes : int
        JSON bytes of one markdown or raw cell's attachments (default 1 MiB); above it, the
        cell's attachments are dropped.
    max_cell_metadata_bytes : int
        JSON bytes of one cell's metadata (default 16 KiB); above it, only its ``nbgrader``
        entry is kept (with nbgrader's own keys only, if that entry alone is larger).
    max_notebook_metadata_bytes : int
        JSON bytes of the notebook's metadata (default 64 KiB); above it, only ``kernelspec``,
        ``language_info`` and ``nbgrader`` are kept, each if it alone fits.
    max_name_bytes : int
        Bytes of one file or folder name (default 255). Names must also be printable
        and must not be ``.`` or ``..`` (``/`` and NUL cannot occur in a listed name).
    max_inbound_entries : int
        Entries of the exchange's inbound folder that :func:`collect` lists
        (default 100 000); more is an error, not a silent partial collection.
    """

    max_files: int = GRADING.intake_max_files
    max_depth: int = GRADING.intake_max_depth
    max_file_bytes: int = GRADING.intake_max_file_bytes
    max_total_bytes: int = GRADING.intake_max_total_bytes
    max_notebook_bytes: int = GRADING.intake_max_notebook_bytes
    max_cells: int = GRADING.intake_max_cells
    max_cell_source_bytes: int = GRADING.intake_max_cell_source_bytes
    max_attachment_bytes: int = GRADING.intake_max_attachment_bytes
    max_cell_metadata_bytes: int = GRADING.intake_max_cell_metadata_bytes
    max_notebook_metadata_bytes: int = GRADING.intake_max_notebook_metadata_bytes
    max_name_bytes: int = GRADING.intake_max_name_bytes
    max_inbound_entries: int = GRADING.intake_max_inbound_entries

    def __post_init__(self):
        for name in ("max_files", "max_depth", "max_file_bytes", "max_total_bytes", "max_notebook_bytes",
                     "max_cells", "max_cell_source_bytes", "max_attachment_bytes", "max_cell_metadata_bytes",
                     "max_notebook_metadata_bytes", "max_name_bytes", "max_inbound_entries"):
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


def show_name(name: str) -> str:
    """A name as it may appear in a message: printable and short."""
    shown = name if name.isprintable() else ascii(name)[1:-1]
    return shown if len(shown) <= 80 else shown[:77] + "..."


def join_relative(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name
