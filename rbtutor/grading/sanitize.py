"""Step: feedback, third layer. An autograded notebook made safe to render, before it is stored.

:func:`sanitize_notebook` cleans a notebook in place: markdown and raw cells that hold HTML
are rendered and cleaned (:mod:`.allowlist`, :mod:`.mathml`), rich outputs keep only
:data:`SAFE_MIME_TYPES`, and every removal becomes an integrity event. The preprocessor
:class:`SanitizeNotebook` runs it, then :func:`~.mathml.prerender_math`, in the grading
process, after nbgrader has recorded the scores and before ``autograded/`` is written: the
Formgrader renders that file.

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
import re

from nbgrader.preprocessors import NbGraderPreprocessor

from .allowlist import _SVG_TAGS, _clean, _inventory
from .mathml import _markdown_html, _one_line, _source, prerender_math
from .report import Events

__all__ = ["SAFE_MIME_TYPES", "SanitizeNotebook", "sanitize_notebook"]

#: output MIME types kept by :func:`sanitize_notebook` (after cleaning); every other is dropped
SAFE_MIME_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg",
                   "image/gif", "image/svg+xml", "application/json")
_RBTUTOR_MIME = "application/vnd.rbtutor."  # the course's own inert payloads (hand_in)

# Markdown that may hold HTML, an image (which would load), an entity or a scheme that runs: rewritten.
_NEEDS_REWRITE = re.compile(r"<[A-Za-z/!?]|!\[|script|data\s*:|&#|&colon|&tab|&newline", re.I)


def _event(message: str, index: int, cell, removed: list[str]) -> dict:
    event = {"kind": "html_sanitised", "message": message, "cell": index}
    meta = cell.get("metadata", {}).get("nbgrader")
    if isinstance(meta, dict) and meta.get("grade_id"):
        event["grade_id"] = meta["grade_id"]
    if removed:
        event["removed"] = removed
    return event


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
            cleaned, found = _markdown_html(text, "notebook")
            data[mime] = _one_line(cleaned)
        else:
            found = _inventory(text, _SVG_TAGS if kind == "svg" else frozenset())
            data[mime] = _clean(text, "svg" if kind == "svg" else "notebook")
        removed += [f"{what} in {mime}" for what in found]
    for mime in ("image/png", "image/jpeg", "image/gif"):
        if mime in data and not _is_base64(data[mime]):
            del data[mime]
            dropped.append(f"{mime} (not base64)")
    if dropped and not data:
        data["text/plain"] = f"[output removed by the grader: {', '.join(dropped)}]"
    return dropped, removed


def _is_base64(value) -> bool:
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
    ``<div class="rbtutor-sanitised tex2jax_ignore">``, with the math as MathML; other
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
    Widget state in the notebook metadata is dropped.

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
        kind = cell.get("cell_type")
        if kind in ("markdown", "raw"):
            source = _source(cell)
            if not _NEEDS_REWRITE.search(source):
                continue
            if kind == "markdown":
                cleaned, removed = _markdown_html(source, "notebook")
                cell["source"] = _one_line(cleaned)
            else:
                removed = _inventory(source)
                cell["source"] = _clean(source, "notebook")
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
    event ``html_sanitised`` of the integrity report.
    """

    stage = "sanitise"

    def preprocess(self, nb, resources):
        events = sanitize_notebook(nb)
        prerender_math(nb)
        self._store(resources, events)
        return nb, resources
