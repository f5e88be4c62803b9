"""Step: feedback, the page. One self-contained feedback page per notebook: no script, no remote resource.

:func:`render_feedback` builds the page (inline CSS, no script, no URL that leaves the
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
import html
import os
import re
import stat
import time
from pathlib import Path

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from .allowlist import _clean
from .config import GRADING
from .grader_notes import _nbgrader, is_grader_note
from .mathml import Remembered, _markdown_html, _source
from .protocol import HAND_IN
from .sanitize import C1_CONTROLS, _is_base64
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
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

_CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #ffffff; color: #1a1a1a; line-height: 1.5;
       font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
header, main, footer { max-width: 52rem; margin: 0 auto; padding: 0 1rem; }
header { padding-top: 1rem; border-bottom: 2px solid #d0d7de; }
h1 { font-size: 1.6rem; margin: 0.5rem 0; }
.total { font-size: 1.25rem; font-weight: 600; margin: 0.25rem 0 0.75rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; max-width: 100%; display: block; overflow-x: auto; }
th, td { border: 1px solid #8c959f; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.25rem; }
a { color: #0b4f9c; }
a:not([href]) { color: inherit; }
.cell { margin: 1.25rem 0; overflow-wrap: anywhere; }
.graded { border-left: 4px solid #57606a; padding-left: 0.75rem; }
.part { font-size: 1.05rem; margin: 0 0 0.5rem; }
.points { font-weight: 600; white-space: nowrap; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0.5rem 0; padding: 0.5rem 0.75rem;
      border-radius: 4px; font: 0.9rem/1.45 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
code { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; overflow-wrap: anywhere; }
pre.source { background: #f6f8fa; color: #1f2328; border: 1px solid #d0d7de; }
pre.stream { background: #ffffff; color: #1a1a1a; border: 1px dashed #8c959f; }
pre.stderr { background: #fff8e6; color: #4d3800; border: 1px solid #d4a72c; }
pre.error { background: #fdf0f0; color: #7a1010; border: 1px solid #cf222e; }
.verdict { margin: 0.5rem 0; padding: 0.5rem 0.75rem; border-radius: 4px; }
.verdict.fail { background: #fdf0f0; color: #7a1010; border: 1px solid #cf222e; }
.verdict.pass { background: #eef8f0; color: #0f4a1e; border: 1px solid #2da44e; }
.comment { background: #f3f0fb; color: #2b1b59; border: 1px solid #8250df; padding: 0.5rem 0.75rem;
           border-radius: 4px; margin: 0.5rem 0; }
.comment-title { margin: 0 0 0.25rem; font-weight: 600; }
.pending { color: #6b4b00; }
img { max-width: 100%; height: auto; }
math { font-size: 1.1em; }
math[display="block"] { margin: 0.5rem 0; overflow-x: auto; max-width: 100%; }
details > summary { cursor: pointer; color: #3d444d; }
footer { color: #3d444d; font-size: 0.9rem; padding-top: 1rem; padding-bottom: 2rem; }
"""


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


def _markdown_cell(source: str) -> str:
    """A markdown cell's HTML on the page: rendered, math as MathML, sanitised, headings one level down."""
    return _markdown_html(source, "page", demote=1)[0]


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


def _points_text(entry) -> str:
    score, max_score = entry[0], entry[1]
    if score is None:
        return f"awaiting grading / {_number(max_score)} points"
    return f"{_number(score)} / {_number(max_score)} points"


def _image(mime: str, value, label: str) -> str:
    text = "".join(value) if isinstance(value, list) else str(value)
    if mime == "image/svg+xml":
        svg = _clean(text if "<svg" in text else "", "svg")
        if not svg:
            return ""
        text = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    elif _is_base64(text):
        text = "".join(text.split())
    else:
        return ""
    return f'<img src="data:{mime};base64,{text}" alt="{html.escape(label)}">'


def _display(output, label: str) -> str:
    data = output.get("data")
    if not isinstance(data, dict):
        return ""
    for mime in _DISPLAY_ORDER:
        if mime not in data:
            continue
        value = data[mime]
        text = "".join(value) if isinstance(value, list) else str(value)
        if mime == "text/html":
            return f'<div class="output html">{_clean(text, "page")}</div>'
        if mime in ("text/markdown", "text/latex"):
            return f'<div class="output markdown">{_markdown_html(text, "page", demote=3)[0]}</div>'
        if mime.startswith("image/"):
            image = _image(mime, value, label)
            if image:
                return f'<div class="output image">{image}</div>'
            continue
        return f'<pre class="stream">{html.escape(_plain(text))}</pre>'
    return ""


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


def _verdict(output, verdict: str, answer_id: str) -> str:
    raw = output.get("evalue", "") if verdict == "fail" else output.get("text", "")
    sentence = " ".join(_plain(raw)[len(answer_id) + 2:].split())
    if verdict == "fail":
        return (f'<p class="verdict fail"><strong>Not accepted:</strong> {html.escape(sentence)}</p>')
    sentence = re.sub(r"\AAccepted[:.]?\s*", "", sentence)
    tail = f" {html.escape(sentence)}" if sentence else ""
    return f'<p class="verdict pass"><strong>Accepted:</strong>{tail}</p>'


def _outputs_html(cell, index: int, answer_id: str | None) -> str:
    outputs = [o for o in cell.get("outputs", []) if isinstance(o, dict)]
    judged, verdict = _judge_outputs(outputs, answer_id)
    parts = []
    for k, output in enumerate(outputs):
        kind = output.get("output_type")
        if k == judged:
            parts.append(_verdict(output, verdict, answer_id))
        elif kind == "stream":
            name = "stderr" if output.get("name") == "stderr" else "stdout"
            parts.append(f'<pre class="stream {name}">{html.escape(_plain(output.get("text", "")))}</pre>')
        elif kind == "error":
            lines = output.get("traceback") or [f'{output.get("ename", "Error")}: {output.get("evalue", "")}']
            text = "\n".join(_plain(line) for line in lines)
            parts.append(f'<pre class="error">{html.escape(text)}</pre>')
        elif kind in ("display_data", "execute_result"):
            parts.append(_display(output, f"output {k + 1} of cell {index + 1}"))
    return "".join(parts)


def _comment_html(comment) -> str:
    if not comment or not str(comment).strip():
        return ""
    body, _ = _markdown_html(str(comment), "page", demote=5)
    return f'<div class="comment"><p class="comment-title">Grader\'s comment</p>{body}</div>'


def _scores_table(rows: list[tuple[str, str, str]]) -> str:
    if not rows:
        return ""
    body = "".join(f'<tr><td><a href="#{anchor}">{html.escape(gid)}</a></td><td>{html.escape(points)}</td></tr>'
                   for gid, anchor, points in rows)
    return ('<table><caption>Points by part</caption><thead><tr><th scope="col">Part</th>'
            f'<th scope="col">Points</th></tr></thead><tbody>{body}</tbody></table>')


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
    pygments_css = _pygments()[1]
    language = ((nb.get("metadata", {}).get("language_info") or {}).get("name")
                or (nb.get("metadata", {}).get("kernelspec") or {}).get("language") or "python")
    cells_html, rows, seen = [], [], set()
    level = 1  # of the last heading on the page: a graded part's heading goes one below it
    started, size, stop, left_out = time.monotonic(), 0, None, 0
    for index, cell in enumerate(nb.get("cells", [])):
        if is_grader_note(cell):
            continue  # model answers and rubrics are for the grader
        if stop is None and time_limit is not None and time.monotonic() - started > time_limit:
            stop = f"the page's time limit of {time_limit:g} s"
        if stop is None and max_bytes is not None and size > max_bytes:
            stop = f"the page's size limit of {max_bytes} bytes"
        if stop is not None:
            left_out += cell.get("cell_type") in ("markdown", "code")
            continue
        meta = _nbgrader(cell)
        grade_id = meta.get("grade_id") if isinstance(meta.get("grade_id"), str) else None
        graded = bool(grade_id and (meta.get("grade") or meta.get("task") or grade_id in scores))
        anchor = f"cell-{index + 1}"
        parts = []
        if graded:
            entry = scores.get(grade_id, (None, meta.get("points", 0), None))
            points = _points_text(entry)
            rows.append((grade_id, anchor, points))
            seen.add(grade_id)
            pending = " pending" if entry[0] is None else ""
            tag = f"h{min(level + 1, 6)}"
            parts.append(f'<{tag} class="part" id="{anchor}-h">{html.escape(grade_id)} '
                         f'<span class="points{pending}">{html.escape(points)}</span></{tag}>')
        kind = cell.get("cell_type")
        if kind == "markdown":
            rendered = _markdown_cell(_source(cell))
            parts.append(rendered)
            headings = re.findall(r"<h([1-6])\b", rendered)
            level = int(headings[-1]) if headings else level
        elif kind == "code":
            parts.extend(_code_cell_html(cell, index, meta, graded, grade_id, language))
        else:
            continue
        if graded:
            parts.append(_comment_html(scores.get(grade_id, (None, None, None))[2]))
        labelled = f' aria-labelledby="{anchor}-h"' if graded else ""
        cells_html.append(f'<section class="cell {kind}{" graded" if graded else ""}" id="{anchor}"{labelled}>'
                          + "".join(parts) + "</section>")
        size += len(cells_html[-1])
    if stop is not None:
        reason = f"{left_out} cells not shown: {stop} was reached"
        cells_html.append(f'<section class="cell note"><p>{html.escape(reason)}; the points above count '
                          "every part.</p></section>")
        if cuts is not None:
            cuts.append(reason)
    for gid in sorted(set(scores) - seen):
        rows.append((gid, "summary", _points_text(scores[gid])))
    return _page(title, scores, rows, cells_html, pygments_css)


def _check_arguments(title, scores) -> None:
    """``ValueError`` unless ``title`` is text and ``scores`` maps grade ids to ``(score, max_score, comment)``."""
    if not isinstance(title, str):
        raise ValueError(f"expected title to be str, got {type(title).__name__}")
    if not isinstance(scores, dict):
        raise ValueError(f"expected scores to be a dict, got {type(scores).__name__}")
    for gid, entry in scores.items():
        if not (isinstance(entry, (tuple, list)) and len(entry) == 3):
            raise ValueError(f"expected scores[{gid!r}] = (score, max_score, comment), got {entry!r}")


def _code_cell_html(cell, index: int, meta: dict, graded: bool, grade_id: str | None,
                    language: str) -> list[str]:
    """A code cell's source (hidden tests replaced by a note, locked cells folded) and its outputs."""
    source, _ = _without_hidden_tests(_source(cell))
    if meta.get("hidden"):
        source = _HIDDEN_NOTE
    code = f'<pre class="source hl"><code>{_highlight(source, language)}</code></pre>'
    if meta.get("locked") and not graded and not meta.get("solution"):
        code = f"<details><summary>Locked cell {html.escape(grade_id or '')}</summary>{code}</details>"
    match = HAND_IN.search(source) if graded else None
    return [code, _outputs_html(cell, index, match.group(1) if match else None)]


def _page(title: str, scores: dict, rows: list, cells_html: list[str], pygments_css: str) -> str:
    """The whole page around the rendered cells: head, total, the table of parts, footer."""
    total = sum(float(e[0]) for e in scores.values() if e[0] is not None)
    maximum = sum(float(e[1]) for e in scores.values() if e[1] is not None)
    pending = sum(1 for e in scores.values() if e[0] is None)
    pending_note = (f' <span class="pending">({pending} part{"s" if pending != 1 else ""} '
                    "awaiting hand grading)</span>") if pending else ""
    head = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            '<meta name="referrer" content="no-referrer">\n'
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}\n{pygments_css}\n</style>\n</head>\n")
    header = (f'<header id="summary">\n<h1>{html.escape(title)}</h1>\n'
              f'<p class="total">Total: {_number(total)} / {_number(maximum)} points{pending_note}</p>\n'
              f"{_scores_table(rows)}\n</header>\n")
    footer = ("<footer><p>Written by the course's grader. Values are judged after submission; "
              "hidden tests are not shown.</p></footer>\n")
    body = header + '<main id="content">\n' + "\n".join(cells_html) + "\n</main>\n" + footer
    # A web address a student printed or wrote stays readable text, never a link (hrefs outside the
    # page are removed above); its "//" is written as an entity so the page holds no URL to follow.
    body = _WEB_ADDRESS.sub(lambda m: m.group(1) + ":/&#47;", body)
    # C1 controls wherever they came from (markdown, HTML and text outputs, comments) are left out
    return C1_CONTROLS.sub("", head + "<body>\n" + body + "</body>\n</html>\n")


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
