"""Step: feedback, the page. One self-contained feedback page per notebook: no script, no remote resource.

:func:`render_feedback` builds the page from the templates ``feedback.html`` and
``feedback_cell.html`` of :mod:`.pages` (inline CSS, no script, no URL that leaves the
page, a Content-Security-Policy that forbids both), with the points of each graded part,
the grader's verdicts as sentences, and hidden tests left out. What a student wrote and
what their kernel printed is rendered and cleaned by the layers below it
(:mod:`.allowlist`, :mod:`.mathml`); the grader's notes (:mod:`.grader_notes`) are left
out. :func:`render_bounded` keeps a page within :data:`PAGE_TIME_LIMIT` and
:data:`PAGE_MAX_BYTES`, and :func:`write_feedback` writes it without following links.
The notebook sanitiser and the grader's notes live in :mod:`.sanitize`, :mod:`.mathml` and
:mod:`.grader_notes`.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import stat
import time
from pathlib import Path

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from .allowlist import clean_fragment
from .config import GRADING
from .grader_notes import is_grader_note, nbgrader_metadata
from .mathml import Remembered, cell_source, markdown_html
from .pages import render
from .protocol import HAND_IN
from .sanitize import C1_CONTROLS, is_base64
from .time_bound import time_bound

__all__ = ["PAGE_MAX_BYTES", "PAGE_TIME_LIMIT", "render_bounded", "render_feedback", "write_feedback"]

# --------------------------------------------------------------------------- the feedback page

# escape sequences, 7-bit (ESC [ ..., ESC ] ...) and 8-bit (CSI U+009B, OSC U+009D ... ST U+009C)
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])"
                   r"|\x9b[0-?]*[ -/]*[@-~]|\x9d[^\x07\x9c]*(?:\x07|\x9c)")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_HIDDEN_BEGIN = re.compile(r"^\s*#+\s*BEGIN HIDDEN TESTS\b", re.I)
_HIDDEN_END = re.compile(r"^\s*#+\s*END HIDDEN TESTS\b", re.I)
_HIDDEN_NOTE = "# (hidden tests: not shown)"
_JUDGE_ERROR = "AnswerNotAccepted"
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif")
# What a display_data / execute_result shows, richest safe type first.
_DISPLAY_ORDER = ("text/html", "text/markdown", "image/svg+xml", "text/latex", *_IMAGE_TYPES, "text/plain")
_WEB_ADDRESS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*)://")

@functools.cache
def _pygments():
    formatter = HtmlFormatter(style="default", nowrap=True)
    css = formatter.get_style_defs(".hl")
    if re.search(r"url\(|https?:", css):  # a style that points outside the page is not used
        css = ""
    return formatter, css


@Remembered
def _highlight(source: str, language: str) -> str:
    try:
        lexer = get_lexer_by_name(language or "python")
    except ClassNotFound:
        lexer = TextLexer()
    return highlight(source, lexer, _pygments()[0])


def _markdown_cell(source: str) -> Markup:
    """A markdown cell's HTML on the page: rendered, math as MathML, sanitised, headings one level down."""
    # Markup: rendered, its math as MathML, and sanitised by .mathml (through .allowlist)
    return Markup(markdown_html(source, "page", demote=1)[0])


def _plain(text) -> str:
    """Output text as a person would have seen it: ANSI codes, carriage-return overwrites and controls gone."""
    text = "".join(text) if isinstance(text, list) else str(text)
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return C1_CONTROLS.sub("", _CONTROL.sub("", text))


def _without_hidden_tests(source: str) -> tuple[str, bool]:
    """``source`` with every hidden-test block replaced by one note (an unclosed block hides the rest)."""
    kept, hidden, hiding = [], False, False
    for line in source.splitlines():
        if not hiding and _HIDDEN_BEGIN.match(line):
            hiding = hidden = True
            indent = line[: len(line) - len(line.lstrip())]
            kept.append(indent + _HIDDEN_NOTE)
        elif hiding:
            if _HIDDEN_END.match(line):
                hiding = False
        else:
            kept.append(line)
    return "\n".join(kept), hidden


def _number(value) -> str:
    return f"{float(value):g}"


def _points_word(maximum) -> str:
    """``point`` after a maximum of exactly 1 (``1 / 1 point``), ``points`` otherwise."""
    return "point" if float(maximum) == 1 else "points"


def _points_text(entry) -> str:
    score, max_score = entry[0], entry[1]
    if score is None:
        return f"awaiting grading / {_number(max_score)} {_points_word(max_score)}"
    return f"{_number(score)} / {_number(max_score)} {_points_word(max_score)}"


def _image(mime: str, value, label: str) -> dict | None:
    """An image output as a ``data:`` image (SVG sanitised first), or None when it is not one."""
    text = "".join(value) if isinstance(value, list) else str(value)
    if mime == "image/svg+xml":
        svg = clean_fragment(text if "<svg" in text else "", "svg")
        if not svg:
            return None
        text = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    elif is_base64(text):
        text = "".join(text.split())
    else:
        return None
    return {"kind": "image", "mime": mime, "data": text, "alt": label}


def _display(output, label: str) -> dict | None:
    """What a display_data or execute_result shows: its richest safe type, or None."""
    data = output.get("data")
    if not isinstance(data, dict):
        return None
    for mime in _DISPLAY_ORDER:
        if mime not in data:
            continue
        value = data[mime]
        text = "".join(value) if isinstance(value, list) else str(value)
        # Markup: the HTML below comes out of the allowlist sanitiser (.allowlist) or the markdown
        # renderer, which sanitises too (.mathml); it is safe to put on the page as it is.
        if mime == "text/html":
            return {"kind": "html", "html": Markup(clean_fragment(text, "page"))}
        if mime in ("text/markdown", "text/latex"):
            return {"kind": "markdown", "html": Markup(markdown_html(text, "page", demote=3)[0])}
        if mime.startswith("image/"):
            image = _image(mime, value, label)
            if image:
                return image
            continue
        return {"kind": "text", "text": _plain(text)}
    return None


def _judge_outputs(outputs: list, answer_id: str | None) -> tuple[int | None, str | None]:
    """The index of the grader's verdict among a test cell's outputs, and ``pass``/``fail``."""
    if not answer_id:
        return None, None
    prefix = f"{answer_id}: "
    for k in range(len(outputs) - 1, -1, -1):
        output = outputs[k]
        if not isinstance(output, dict):
            continue
        if output.get("output_type") == "error" and output.get("ename") == _JUDGE_ERROR \
                and str(output.get("evalue", "")).startswith(prefix):
            return k, "fail"
        if output.get("output_type") == "stream" and output.get("name") == "stdout" \
                and _plain(output.get("text", "")).startswith(prefix):
            return k, "pass"
    return None, None


def _verdict(output, verdict: str, answer_id: str) -> dict:
    """The grader's verdict as a sentence: ``fail`` or ``pass`` and its text."""
    raw = output.get("evalue", "") if verdict == "fail" else output.get("text", "")
    sentence = " ".join(_plain(raw)[len(answer_id) + 2:].split())
    if verdict == "pass":
        sentence = re.sub(r"\AAccepted[:.]?\s*", "", sentence)
    return {"kind": "verdict", "verdict": verdict, "text": sentence}


def _outputs(cell, index: int, answer_id: str | None) -> list[dict]:
    """A code cell's outputs as the page shows them, the grader's verdict in place of its output."""
    outputs = [o for o in cell.get("outputs", []) if isinstance(o, dict)]
    judged, verdict = _judge_outputs(outputs, answer_id)
    shown = []
    for k, output in enumerate(outputs):
        kind = output.get("output_type")
        if k == judged:
            shown.append(_verdict(output, verdict, answer_id))
        elif kind == "stream":
            name = "stderr" if output.get("name") == "stderr" else "stdout"
            shown.append({"kind": "stream", "name": name, "text": _plain(output.get("text", ""))})
        elif kind == "error":
            lines = output.get("traceback") or [f'{output.get("ename", "Error")}: {output.get("evalue", "")}']
            shown.append({"kind": "error", "text": "\n".join(_plain(line) for line in lines)})
        elif kind in ("display_data", "execute_result"):
            shown.append(_display(output, f"output {k + 1} of cell {index + 1}"))
    return [item for item in shown if item is not None]


def _comment(comment) -> Markup | None:
    """The grader's comment, markdown rendered and sanitised (None when there is none)."""
    if not comment or not str(comment).strip():
        return None
    # Markup: rendered and sanitised by .mathml, like a student's markdown cell
    return Markup(markdown_html(str(comment), "page", demote=5)[0])


class FeedbackTimeLimit(Exception):
    """Rendering one feedback page went over its hard time limit."""


def render_feedback(nb, scores: dict, *, title: str, time_limit: float | None = None,
                    max_bytes: int | None = None, cuts: list[str] | None = None) -> str:
    """One autograded notebook as a self-contained feedback page (HTML, no script, no URL).

    The page has the total and a table of parts at the top, then every cell in order:
    markdown rendered with its math as MathML and sanitised; code with its source (hidden
    tests replaced by a note) and its outputs (stream text escaped, errors as plain text
    without ANSI codes, images as ``data:`` URLs, HTML sanitised); for each graded cell its
    points, the grader's comment and the verdict of :class:`rbtutor.grading.judge.JudgeAnswers`
    as a sentence ("Not accepted: ...", "Accepted: ..."). CSS is inline, a
    Content-Security-Policy forbids scripts and every remote load, and nothing on the page
    points outside it; long lines wrap and the layout fits a phone.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        The autograded notebook (read only).
    scores : dict
        ``grade_id -> (score, max_score, comment)``; ``score`` None while a part awaits
        hand grading, ``comment`` None or markdown.
    title : str
        The page title, for example ``"problem03: feedback for student s01"``.
    time_limit, max_bytes : float or int, optional
        Once rendering has taken ``time_limit`` seconds, or the cells rendered hold ``max_bytes``
        bytes of HTML, the remaining cells are left out: a note on the page says how many and why,
        and the reason is appended to ``cuts``. The scores table is always complete.
    cuts : list of str, optional
        Receives the reason when the page was cut.

    Returns
    -------
    str
        The HTML page.

    Raises
    ------
    ValueError
        If ``scores`` is not a mapping of grade ids to ``(score, max_score, comment)``.
    """
    _check_arguments(title, scores)
    language = ((nb.get("metadata", {}).get("language_info") or {}).get("name")
                or (nb.get("metadata", {}).get("kernelspec") or {}).get("language") or "python")
    cells, rows, seen = [], [], set()
    level = 1  # of the last heading on the page: a graded part's heading goes one below it
    started, size, stop, left_out = time.monotonic(), 0, None, 0
    for index, cell in enumerate(nb.get("cells", [])):
        if is_grader_note(cell):
            continue  # model answers and rubrics are for the grader
        stop = stop or _limit_reached(time.monotonic() - started, size, time_limit, max_bytes)
        if stop is not None:
            left_out += cell.get("cell_type") in ("markdown", "code")
            continue
        shown, level, row = _cell(cell, index, scores, level, language)
        if row is not None:
            rows.append(row)
            seen.add(row[0])
        if shown is not None:
            cells.append(shown)
            size += len(shown)
    cut = f"{left_out} cells not shown: {stop} was reached" if stop is not None else ""
    if cut and cuts is not None:
        cuts.append(cut)
    rows += [(gid, "summary", _points_text(scores[gid])) for gid in sorted(set(scores) - seen)]
    return _page(title, scores, rows, cells, cut)


def _limit_reached(seconds: float, size: int, time_limit: float | None, max_bytes: int | None) -> str | None:
    """Which bound of the page rendering has passed (None: neither)."""
    if time_limit is not None and seconds > time_limit:
        return f"the page's time limit of {time_limit:g} s"
    if max_bytes is not None and size > max_bytes:
        return f"the page's size limit of {max_bytes} bytes"
    return None


def _cell(cell, index: int, scores: dict, level: int, language: str) -> tuple[Markup | None, int, tuple | None]:
    """One cell's section of the page (None for a cell that is neither markdown nor code), the level of the
    last heading after it, and its row of the table of parts when it is graded."""
    meta = nbgrader_metadata(cell)
    grade_id = meta.get("grade_id") if isinstance(meta.get("grade_id"), str) else None
    graded = bool(grade_id and (meta.get("grade") or meta.get("task") or grade_id in scores))
    anchor = f"cell-{index + 1}"
    heading = row = None
    if graded:
        entry = scores.get(grade_id, (None, meta.get("points", 0), None))
        row = (grade_id, anchor, _points_text(entry))
        heading = {"level": min(level + 1, 6), "grade_id": grade_id, "points": row[2], "pending": entry[0] is None}
    kind = cell.get("cell_type")
    if kind not in ("markdown", "code"):
        return None, level, row
    markdown, code, outputs = None, None, []
    if kind == "markdown":
        markdown = _markdown_cell(cell_source(cell))
        headings = re.findall(r"<h([1-6])\b", markdown)
        level = int(headings[-1]) if headings else level
    else:
        code, outputs = _code_cell(cell, index, meta, graded, grade_id, language)
    comment = _comment(scores.get(grade_id, (None, None, None))[2]) if graded else None
    # Markup: rendered by our own template, every value in it escaped or already Markup
    return Markup(render("feedback_cell.html", kind=kind, anchor=anchor, heading=heading, markdown=markdown,
                         code=code, outputs=outputs, comment=comment)), level, row


def _check_arguments(title, scores) -> None:
    """``ValueError`` unless ``title`` is text and ``scores`` maps grade ids to ``(score, max_score, comment)``."""
    if not isinstance(title, str):
        raise ValueError(f"expected title to be str, got {type(title).__name__}")
    if not isinstance(scores, dict):
        raise ValueError(f"expected scores to be a dict, got {type(scores).__name__}")
    for gid, entry in scores.items():
        if not (isinstance(entry, (tuple, list)) and len(entry) == 3):
            raise ValueError(f"expected scores[{gid!r}] = (score, max_score, comment), got {entry!r}")


def _code_cell(cell, index: int, meta: dict, graded: bool, grade_id: str | None,
               language: str) -> tuple[dict, list[dict]]:
    """A code cell's source (hidden tests replaced by a note, locked cells folded) and its outputs."""
    source, _ = _without_hidden_tests(cell_source(cell))
    if meta.get("hidden"):
        source = _HIDDEN_NOTE
    locked = grade_id or "" if meta.get("locked") and not graded and not meta.get("solution") else None
    match = HAND_IN.search(source) if graded else None
    # Markup: pygments escapes the source it highlights
    code = {"source": Markup(_highlight(source, language)), "locked": locked}
    return code, _outputs(cell, index, match.group(1) if match else None)


def _page(title: str, scores: dict, rows: list, cells: list[Markup], cut: str) -> str:
    """The whole page around the rendered cells: head, total, the table of parts, the cut note, footer."""
    total = sum(float(e[0]) for e in scores.values() if e[0] is not None)
    maximum = sum(float(e[1]) for e in scores.values() if e[1] is not None)
    pending = sum(1 for e in scores.values() if e[0] is None)
    # Markup: pygments' own style sheet, from which any url() was removed (_pygments)
    page = render("feedback.html", title=title, total=_number(total), maximum=_number(maximum), pending=pending,
                  rows=rows, cells=cells, cut=cut, pygments_css=Markup(_pygments()[1]))
    # A web address a student printed or wrote stays readable text, never a link (hrefs outside the
    # page are removed above); its "//" is written as an entity so the page holds no URL to follow.
    page = _WEB_ADDRESS.sub(lambda m: m.group(1) + ":/&#47;", page)
    # C1 controls wherever they came from (markdown, HTML and text outputs, comments) are left out
    return C1_CONTROLS.sub("", page)


#: Bounds of one feedback page: after this many seconds, or this many bytes of rendered cells, the
#: remaining cells are left out (named on the page); at HARD_TIME_FACTOR times the time, rendering is
#: stopped wherever it is and a page with the scores only is written.
PAGE_TIME_LIMIT = GRADING.feedback_time_limit
PAGE_MAX_BYTES = GRADING.feedback_max_bytes
HARD_TIME_FACTOR = GRADING.feedback_hard_time_factor


def render_bounded(nb, scores: dict, *, title: str, time_limit: float = PAGE_TIME_LIMIT,
                   max_bytes: int = PAGE_MAX_BYTES) -> tuple[str, list[str]]:
    """:func:`render_feedback` within its time and size bounds; returns the page and why it was cut
    (empty when it was not). Past the hard limit the page holds the title and the scores only.

    The hard limit (:func:`~.time_bound.time_bound`) stops rendering between Python instructions
    only, never inside a call to C; what keeps every such call short is that no fragment reaches
    nh3 or markdown-it unless its depth, size and marks are within the bounds of
    :mod:`.allowlist` and :mod:`.mathml` (beyond them it is shown as its text)."""
    cuts: list[str] = []
    try:
        hard = time_limit * HARD_TIME_FACTOR
        with time_bound(hard, FeedbackTimeLimit(f"rendering took more than {hard:g} s")):
            page = render_feedback(nb, scores, title=title, time_limit=time_limit, max_bytes=max_bytes, cuts=cuts)
    except FeedbackTimeLimit as exc:
        cuts.append(f"every cell left out: {exc}")
        empty = {"cells": [], "metadata": nb.get("metadata", {})}
        page = render_feedback(empty, scores, title=title, cuts=cuts)
    return page, cuts


def write_feedback(path: Path, html: str) -> None:
    """Write a feedback page to ``path`` without following a link or truncating a shared file.

    ``path``'s folder must be one the caller created. The file is opened with
    ``O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK`` (a fifo or a link fails to open), checked
    to be a regular file with one link, and only then truncated and written
    (``O_TRUNC`` done by ``ftruncate`` after the check, so a hard link to another file is
    never emptied).

    Parameters
    ----------
    path : pathlib.Path
        Where the page goes, for example ``feedback/<student>/<assignment>/<notebook>.html``.
    html : str
        The page, as returned by :func:`render_feedback`.

    Raises
    ------
    ValueError
        If ``path`` is a symbolic link, or exists as something other than a regular file
        with a single link.
    """
    path = Path(path)
    if not isinstance(html, str):
        raise ValueError(f"expected html to be str, got {type(html).__name__}")
    if path.is_symlink():
        raise ValueError(f"refusing to write feedback through a symbolic link: {path}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if path.is_symlink():
            raise ValueError(f"refusing to write feedback through a symbolic link: {path}") from exc
        if path.exists() and not path.is_file():
            raise ValueError(f"refusing to write feedback over a special file: {path}") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"refusing to write feedback over a special file: {path}")
        if info.st_nlink != 1:
            raise ValueError(f"refusing to write feedback over a file with {info.st_nlink} links: {path}")
        os.ftruncate(fd, 0)
        data = html.encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)
