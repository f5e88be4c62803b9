"""Step: feedback, third layer. An autograded notebook made safe to render, before it is stored.

:func:`sanitize_notebook` cleans a notebook in place: markdown and raw cells that hold HTML
are rendered and cleaned (:mod:`.allowlist`, :mod:`.mathml`), rich outputs keep only
:data:`SAFE_MIME_TYPES`, and every removal becomes an integrity event. The preprocessor
:class:`SanitizeNotebook` runs it, then :func:`~.mathml.prerender_math`, in the grading
process, after nbgrader has recorded the scores and before ``autograded/`` is written: the
Formgrader renders that file.

Two bounds hold whatever a notebook holds. Time: :func:`sanitize_bounded` runs the cleaning in a
child process (a fork of the grading process, kept for the next notebook) and kills it when one
notebook takes longer than :data:`SANITIZE_TIME_LIMIT` seconds, raising :class:`SanitizeTimeLimit`;
a signal or a watchdog thread cannot stop a call that stays in C code (nh3, for one), a kill can.
Size: the notebook stored holds at most :data:`MAX_STORED_BYTES` of JSON; past that, the largest
cells the student wrote are replaced by a note (:func:`bound_stored_size`), each named in the
integrity report (``stored_size_cut``).

What nbgrader's own pages do, for the record (nbgrader 0.9.6, nbconvert 7.17): the
Formgrader renders ``autograded/<student>/<assignment>/<notebook>.ipynb`` with
nbconvert's ``HTMLExporter`` and its ``formgrade`` template. That template renders
markdown cells with ``markdown2html`` and never ``clean_html`` (``sanitize_html`` does
not reach them); outputs go through nbconvert's classic blocks, which sanitise only
with ``c.HTMLExporter.sanitize_html = True`` and otherwise insert ``text/html`` as is
and ``application/javascript`` inside ``<script>``. Its header calls the ``mathjax()``
macro without an argument, so MathJax 2.7.7 always comes from cdnjs
(``c.HTMLExporter.mathjax_url`` is ignored there), and ``formgrade.js`` uses the
``MathJax`` global without checking that it loaded. nbgrader's feedback template does
the same (``mathjax()`` with no URL) and includes hidden tests.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import html
import json
import os
import re
import select
import signal
import time

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from .allowlist import SVG_TAGS, clean_and_inventory
from .config import GRADING
from .forked import child_of, keep_only, read_message, send_message
from .mathml import cell_source, markdown_html, one_line, prerender_math
from .protocol import HELPERS_ID
from .report import Events

__all__ = ["MAX_STORED_BYTES", "SAFE_MIME_TYPES", "SANITIZE_TIME_LIMIT", "SanitizeError", "SanitizeNotebook",
           "SanitizeTimeLimit", "bound_stored_size", "cleaner_pid", "sanitize_bounded", "sanitize_notebook",
           "start_cleaner", "stop_cleaner"]

#: seconds the whole cleaning of one notebook may take (:func:`sanitize_bounded`)
SANITIZE_TIME_LIMIT = GRADING.sanitize_time_limit
#: bytes of JSON the stored autograded notebook may hold (:func:`bound_stored_size`)
MAX_STORED_BYTES = GRADING.sanitize_max_notebook_bytes

#: output MIME types kept by :func:`sanitize_notebook` (after cleaning); every other is dropped
SAFE_MIME_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg",
                   "image/gif", "image/svg+xml", "application/json")
_RBTUTOR_MIME = "application/vnd.rbtutor."  # the course's own inert payloads (hand_in)

# Markdown that may hold HTML, an image (which would load), an entity or a scheme that runs: rewritten.
#: C1 control characters (U+0080-U+009F): no text a page shows needs one, and U+009B is a terminal's
#: 8-bit CSI; removed from every text of the stored notebook and of the feedback page
C1_CONTROLS = re.compile(r"[\x80-\x9f]")
#: the outputs' text fields and MIME types a page shows as text
_SHOWN_TEXT = ("text", "traceback", "evalue", "ename")
_SHOWN_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex")


def _without_c1(value):
    """``value`` (a string or a list of strings) with its C1 control characters removed."""
    if isinstance(value, str):
        return C1_CONTROLS.sub("", value)
    if isinstance(value, list):
        return [C1_CONTROLS.sub("", v) if isinstance(v, str) else v for v in value]
    return value


def strip_c1(cell) -> None:
    """Remove C1 control characters from a cell's source and its outputs' shown text, in place."""
    if "source" in cell:
        cell["source"] = _without_c1(cell["source"])
    for output in cell.get("outputs", []):
        if not isinstance(output, dict):
            continue
        for key in _SHOWN_TEXT:
            if key in output:
                output[key] = _without_c1(output[key])
        data = output.get("data")
        if isinstance(data, dict):
            for mime in _SHOWN_TYPES:
                if mime in data:
                    data[mime] = _without_c1(data[mime])


_NEEDS_REWRITE = re.compile(r"<[A-Za-z/!?]|!\[|script|data\s*:|&#|&colon|&tab|&newline", re.I)


def _event(message: str, index: int, cell, removed: list[str]) -> dict:
    event = {"kind": "html_sanitised", "message": message, "cell": index}
    meta = cell.get("metadata", {}).get("nbgrader")
    if isinstance(meta, dict) and meta.get("grade_id"):
        event["grade_id"] = meta["grade_id"]
    if removed:
        event["removed"] = removed
    return event


def fold_helpers(nb) -> None:
    """The locked helper cell (``course_helpers``, restored from the released notebook before the
    notebook ran, so never the student's) shown as one comment line, so that a submission opens
    on the student's work in the Formgrader and the feedback page rather than on 150 lines of ours."""
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader") if isinstance(cell, dict) else None
        if isinstance(meta, dict) and meta.get("grade_id") == HELPERS_ID and cell.get("cell_type") == "code":
            lines = len(cell_source(cell).splitlines())
            cell["source"] = (f"# The course's locked helper cell ({lines} lines: check_form, hand_in, check), "
                              "as released; restored before grading, so not the student's.")


def _in_words(item: str) -> str:
    """One item of the sanitiser's inventory as a grader reads it, without the markup itself (the
    stored notebook keeps no handler name or scheme a filter could mistake for the real thing)."""
    count = re.search(r" \((\d+)\)$", item)
    what = item[:count.start()] if count else item
    if what.startswith("<") and what.endswith(">"):
        what = f"{what.strip('<>/').split()[0]} element"
    elif what.endswith(" attribute") and what.lower().startswith("on"):
        what = "event-handler attribute"
    elif " URL" in what:
        what = "link or source that would run or load something"
    return f"{what} ({count.group(1)})" if count else what


def removed_note(removed: list[str]) -> str:
    """The line left where active content was taken out, so that a grader looking at the cell sees
    that something was there (``Removed by the grader before showing: script element, event-handler
    attribute.``)."""
    return (f'<p class="rbtutor-removed"><em>Removed by the grader before showing: '
            f"{html.escape(', '.join(dict.fromkeys(_in_words(item) for item in removed)))}.</em></p>")


def _sanitize_output(output) -> tuple[list[str], list[str]]:
    """Clean one output in place; return the MIME types dropped and the active content removed."""
    data = output.get("data")
    if not isinstance(data, dict):
        return [], []
    dropped = sorted(k for k in data if k not in SAFE_MIME_TYPES and not str(k).startswith(_RBTUTOR_MIME))
    for mime in dropped:
        del data[mime]
    removed = []
    for mime, kind in (("text/html", "html"), ("image/svg+xml", "svg"), ("text/markdown", "markdown")):
        if mime not in data:
            continue
        value = data[mime]
        text = "".join(value) if isinstance(value, list) else str(value)
        if kind == "markdown":
            cleaned, found = markdown_html(text, "notebook")
            data[mime] = one_line(cleaned + (removed_note(found) if found else ""))
        else:
            data[mime], found = clean_and_inventory(text, "svg" if kind == "svg" else "notebook",
                                                     SVG_TAGS if kind == "svg" else frozenset())
            if found and kind == "html":
                data[mime] += removed_note(found)
        removed += [f"{what} in {mime}" for what in found]
    for mime in ("image/png", "image/jpeg", "image/gif"):
        if mime in data and not is_base64(data[mime]):
            del data[mime]
            dropped.append(f"{mime} (not base64)")
    if dropped and not data:
        data["text/plain"] = f"[output removed by the grader: {', '.join(dropped)}]"
    return dropped, removed


def is_base64(value) -> bool:
    text = "".join(value) if isinstance(value, list) else value
    if not isinstance(text, str):
        return False
    try:
        base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def sanitize_notebook(nb) -> list[dict]:
    """Make an autograded notebook safe to render, in place; return what was removed.

    Markdown cells (and raw cells) whose source holds HTML, an entity or a suspicious scheme
    are replaced by their sanitised rendering, one raw HTML line in a
    ``<div class="rbtutor-sanitised tex2jax_ignore">``, with the math as MathML, and where
    something was taken out a line says what (:func:`removed_note`), so the Formgrader never
    shows an empty box without saying why; other
    markdown cells are left as written (markdown images are rewritten too: only
    ``data:`` images stay). Outputs keep only :data:`SAFE_MIME_TYPES` (and the
    course's ``application/vnd.rbtutor.*`` payloads): ``application/javascript``, widget,
    plotting-library and other types a front end would run are dropped, and an output left
    empty says so in ``text/plain``. ``text/html`` and ``image/svg+xml`` are cleaned with
    ``nh3`` against an explicit allow-list: no script, style element, event handler,
    ``style`` attribute that loads or runs something, iframe, object, embed, form or meta;
    links only to ``http``, ``https``, ``mailto`` or ``#``; images only from
    ``data:image/png|jpeg|gif;base64``. ``text/markdown`` outputs are rendered and cleaned
    as markdown cells are, and ``image/png|jpeg|gif`` that is not base64 is dropped.
    Widget state in the notebook metadata is dropped, and C1 control characters are removed from
    every cell's source and its outputs' shown text (:func:`strip_c1`).

    Run it on the notebook the grader stores in ``autograded/`` after the scores are
    recorded (nbgrader's ``SaveAutoGrades`` compares a written answer's source with its
    checksum) and before the notebook is written.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        An autograded notebook (format 4); changed in place.

    Returns
    -------
    list of dict
        One event per cell where active content was removed:
        ``{"kind": "html_sanitised", "message": ..., "cell": index, "grade_id": ...,
        "removed": [...]}`` (``grade_id`` when the cell has one).
    """
    events: list[dict] = []
    metadata = nb.get("metadata", {})
    if isinstance(metadata, dict) and "widgets" in metadata:
        del metadata["widgets"]
        events.append({"kind": "html_sanitised", "message": "notebook: widget state dropped",
                       "cell": None, "removed": ["widget state"]})
    for index, cell in enumerate(nb.get("cells", [])):
        if isinstance(cell, dict):
            strip_c1(cell)
        kind = cell.get("cell_type")
        if kind in ("markdown", "raw"):
            source = cell_source(cell)
            if not _NEEDS_REWRITE.search(source):
                continue
            if kind == "markdown":
                cleaned, removed = markdown_html(source, "notebook")
                cell["source"] = one_line(cleaned + (removed_note(removed) if removed else ""))
            else:
                cell["source"], removed = clean_and_inventory(source, "notebook")
                if removed:
                    cell["source"] += removed_note(removed)
            if removed:
                events.append(_event(f"cell {index}: removed from a {kind} cell: {', '.join(removed)}",
                                     index, cell, removed))
        elif kind == "code":
            dropped, removed = [], []
            for output in cell.get("outputs", []):
                if isinstance(output, dict):
                    more_dropped, more_removed = _sanitize_output(output)
                    dropped += more_dropped
                    removed += more_removed
            if dropped or removed:
                what = ", ".join([f"{m} output dropped" for m in dropped] + removed)
                events.append(_event(f"cell {index}: {what}", index, cell,
                                     removed + [f"{m} output" for m in dropped]))
    return events


class SanitizeNotebook(Events, NbGraderPreprocessor):
    """The autograded notebook made safe to render (:func:`sanitize_notebook`, :func:`prerender_math`).

    Placed after ``SaveAutoGrades`` in ``Autograde.autograde_preprocessors``: the scores
    are recorded from what the student wrote; what is stored in ``autograded/`` (and shown
    by the Formgrader) has no active content and its math as MathML. Each removal is an
    event ``html_sanitised`` of the integrity report, each cell left out for size one
    ``stored_size_cut``. The work runs in a child process (:func:`sanitize_bounded`): past
    :data:`SANITIZE_TIME_LIMIT` it is killed and :class:`SanitizeTimeLimit` is raised (a
    :class:`SanitizeError`, as is a child that failed), so the submission is not graded.
    """

    stage = "sanitise"

    def preprocess(self, nb, resources):
        events = sanitize_bounded(nb, SANITIZE_TIME_LIMIT)
        self._store(resources, events)
        return nb, resources


class SanitizeError(Exception):
    """Sanitising one notebook did not finish: its child process failed (the message says how)."""


class SanitizeTimeLimit(SanitizeError):
    """Sanitising one notebook took longer than its bound; its child process was killed."""


def _clean_all(nb) -> list[dict]:
    events = sanitize_notebook(nb)
    fold_helpers(nb)
    prerender_math(nb)
    return events + bound_stored_size(nb)


def sanitize_bounded(nb, time_limit: float = SANITIZE_TIME_LIMIT) -> list[dict]:
    """:func:`sanitize_notebook`, :func:`fold_helpers`, :func:`~.mathml.prerender_math` and
    :func:`bound_stored_size`, in this process's cleaner (:class:`_Cleaner`), which is killed when one
    notebook takes longer than ``time_limit`` seconds; ``nb`` is changed in place as they would.

    However long one call inside the cleaner runs, nh3's parser included, the cleaner is killed
    with ``SIGKILL`` at the bound and reaped, and nothing of its work is kept; the next notebook
    gets a new cleaner. An error that stops this process meanwhile (a submission's own time
    bound) kills the cleaner too.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        An autograded notebook; replaced in place by its cleaned version.
    time_limit : float
        Seconds, wall time; ``<= 0`` runs the cleaning in this process, unbounded.

    Returns
    -------
    list of dict
        The integrity events of the three steps.

    Raises
    ------
    SanitizeTimeLimit
        The cleaner was still working at ``time_limit`` seconds (it was killed); ``nb`` is left
        as it was.
    SanitizeError
        The cleaner gave no result: the steps raised (the message names the error), or its
        process ended (killed from outside, say).
    """
    if time_limit <= 0:
        return _clean_all(nb)
    request = json.dumps(nb).encode("ascii")
    try:
        reply = _Cleaner.mine().clean(request, time_limit)
    except _EndedIdle:  # it ended for want of work as this notebook came, before reading it: a new one takes it
        reply = _Cleaner.mine().clean(request, time_limit)
    result = json.loads(reply)
    nb.clear()
    nb.update(nbformat.from_dict(result["nb"]))
    return result["events"]


def cleaner_pid() -> int | None:
    """The process id of this process's cleaner (:class:`_Cleaner`), or None while it has none."""
    cleaner = _Cleaner.current
    return cleaner.pid if cleaner is not None and cleaner.owner == os.getpid() else None


def start_cleaner() -> None:
    """Start this process's cleaner now, if it has none running. A grading worker calls this first of
    all: a cleaner forked then shares its pages with the process the worker was forked from, which
    leaves them as they are, so it copies none of the worker's later writes. Forked later, after
    the worker's first notebooks, it kept the old copy of every page the worker wrote again."""
    _Cleaner.mine()


def stop_cleaner() -> None:
    """End this process's cleaner, if it has one; the next notebook starts a new one. The cleaner
    runs the code this process had when it was forked: a test that replaces a step calls this first."""
    cleaner = _Cleaner.current
    if cleaner is not None and cleaner.owner == os.getpid():
        cleaner.stop()


#: seconds a cleaner waits for the next notebook before it ends: longer than the default bound of a
#: whole submission (``run_submission_seconds``, 600 s), so a grading worker keeps its cleaner for the
#: whole run, while a process that lives on between runs (the Formgrader's server, a Dask worker)
#: does not keep one, nor the pages it holds, for long
CLEANER_IDLE_SECONDS = 900.0
_IDLE_EXIT = 3  # the exit status of a cleaner that ended for want of work (it read no request)


class _EndedIdle(Exception):
    """The cleaner had ended for want of work before it read the request (it may be sent again)."""


class _Cleaner:
    """A child process that cleans notebooks (:func:`_clean_all`) one at a time, for as long as the
    process that forked it needs one.

    It is a fork of that process, so it has its code and imports, and it keeps its own caches from
    one notebook to the next: the same instructor's markdown rendered once for the whole class.
    A new child for every notebook cost 37 CPU ms a notebook (the fork, the copied pages, every cache
    filled afresh); a kept one costs 9, 2 in the worker and 7 in the cleaner (class of 10, 2026-12-07).

    Each request is a notebook's JSON, each reply ``0`` and the JSON of the cleaned notebook and its
    events, or ``1`` and the error, each a message of :func:`~.forked.send_message`. The child keeps
    no other file descriptor of the parent's but the standard three (:func:`~.forked.keep_only`),
    ignores Ctrl-C, dies with the thread that forked it (``PR_SET_PDEATHSIG``), exits when its
    requests' pipe closes, and ends when no notebook has come for :data:`CLEANER_IDLE_SECONDS`
    (the next notebook starts a new one; one sent just as it ended is sent to the new one, as the
    ended one read nothing). The parent kills it whenever a request does not end with its reply
    (the time bound, an exception while waiting), so between two requests the cleaner is idle or
    gone, never halfway through a notebook.
    """

    current: _Cleaner | None = None  # this process's, if owner is this process (a fork inherits the global)

    def __init__(self) -> None:
        self.owner = os.getpid()
        requests_read, self.requests = os.pipe()
        self.replies, replies_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: it never returns into the caller's code
            status = 1
            try:
                keep_only(requests_read, replies_write)
                child_of(self.owner)
                status = _serve(requests_read, replies_write)
            finally:
                os._exit(status)
        os.close(requests_read)
        os.close(replies_write)

    @classmethod
    def mine(cls) -> _Cleaner:
        """This process's cleaner, started when it has none or the last one has ended."""
        cleaner = cls.current
        if cleaner is None or cleaner.owner != os.getpid() or not cleaner.alive():
            if cleaner is not None and cleaner.owner == os.getpid():
                cleaner.stop()
            cls.current = cleaner = cls()
        return cleaner

    def alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG) == (0, 0)
        except ChildProcessError:
            return False

    def clean(self, request: bytes, time_limit: float) -> bytes:
        """The reply's JSON to ``request``; raises SanitizeTimeLimit or SanitizeError (the cleaner
        is then stopped)."""
        why = "its replies ended"
        try:
            send_message(self.requests, request)
            reply = read_message(self.replies, time.monotonic() + time_limit)
        except TimeoutError:
            self.stop()
            raise SanitizeTimeLimit(f"sanitising the notebook took longer than {time_limit:g} s; "
                                    f"its process ({self.pid}) was killed") from None
        except OSError as exc:  # a pipe broke: the cleaner had ended
            reply, why = None, exc.strerror or str(exc)
        except BaseException:
            self.stop()
            raise
        if reply is None:
            if self.stop() == _IDLE_EXIT:
                raise _EndedIdle
            raise SanitizeError(f"sanitising the notebook failed: its process ({self.pid}) ended "
                                f"without a result ({why})")
        if reply[:1] != b"0":
            raise SanitizeError(f"sanitising the notebook failed: {reply[1:].decode('utf-8', 'replace')}")
        return reply[1:]

    def stop(self) -> int | None:
        """Kill and reap the cleaner, close its pipes; its exit status (None when it was reaped before)."""
        self.close_pipes()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        status = None
        with contextlib.suppress(ChildProcessError):
            status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        if _Cleaner.current is self:
            _Cleaner.current = None
        return status

    def close_pipes(self) -> None:
        for fd in (self.requests, self.replies):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.requests = self.replies = -1


def _forget_parents_cleaner() -> None:
    """In a child forked from a process with a cleaner: the parent's pipes closed here, so that the
    cleaner sees its requests end when the parent does, and the child starts its own when it needs one."""
    cleaner, _Cleaner.current = _Cleaner.current, None
    if cleaner is not None:
        cleaner.close_pipes()


os.register_at_fork(after_in_child=_forget_parents_cleaner)


def _serve(requests: int, replies: int) -> int:
    """The cleaner's loop: a notebook in, its cleaned JSON and events out, until the requests end
    (returns 0) or none has come for :data:`CLEANER_IDLE_SECONDS` (returns :data:`_IDLE_EXIT`)."""
    while True:
        if not select.select([requests], [], [], CLEANER_IDLE_SECONDS)[0]:
            return _IDLE_EXIT
        body = read_message(requests)
        if body is None:
            return 0
        try:
            nb = nbformat.from_dict(json.loads(body))
            reply = b"0" + json.dumps({"nb": nb, "events": _clean_all(nb)}).encode("ascii")
        except Exception as exc:  # noqa: BLE001 - sent to the parent, which raises SanitizeError
            reply = b"1" + f"{type(exc).__name__}: {exc}"[:2000].encode("utf-8", "replace")
        send_message(replies, reply)


_CUT_NOTE = "[not stored by the grader: this cell held {size} bytes and the notebook was over {cap} bytes]"


def _size(value) -> int:
    return len(json.dumps(value))


def bound_stored_size(nb, max_bytes: int | None = None) -> list[dict]:
    """Keep the stored notebook within ``max_bytes`` of JSON: the largest cells a student wrote give way.

    While the notebook is larger, the largest cell that nbgrader does not lock (a locked cell
    is the instructor's, restored from the source) is replaced by a note: a markdown or raw
    cell's source and attachments, a code cell's source and outputs. The cell's metadata (its
    nbgrader ``grade_id`` and points) stays, and so does the notebook's (intake has cut what a
    student may put there).

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The cleaned notebook; changed in place.
    max_bytes : int, optional
        Default :data:`MAX_STORED_BYTES`.

    Returns
    -------
    list of dict
        One ``stored_size_cut`` event per cell replaced, with its index, ``grade_id`` and ``bytes``.
    """
    cap = MAX_STORED_BYTES if max_bytes is None else max_bytes
    cells = nb.get("cells", [])
    total = _size(nb)
    if total <= cap:
        return []
    sizes = [_size(cell) for cell in cells]
    events: list[dict] = []
    for index in sorted(range(len(cells)), key=lambda k: sizes[k], reverse=True):
        if total <= cap:
            break
        cell = cells[index]
        meta = cell.get("metadata", {}).get("nbgrader")
        if isinstance(meta, dict) and meta.get("locked"):
            continue
        note = _CUT_NOTE.format(size=sizes[index], cap=cap)
        if cell.get("cell_type") == "code":
            cell["source"], cell["outputs"] = f"# {note}", []
        else:
            cell["source"] = note
            cell.pop("attachments", None)
        total += _size(cell) - sizes[index]
        event = _event(f"cell {index}: {sizes[index]} bytes not stored (the stored notebook is capped at "
                       f"{cap} bytes)", index, cell, [])
        event.update(kind="stored_size_cut", bytes=sizes[index])
        events.append(event)
    return events
