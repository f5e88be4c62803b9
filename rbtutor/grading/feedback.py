"""Step: feedback. Pages a student and a grader can open safely: no script, no remote resource.

What a student wrote (markdown, HTML) and what their kernel printed (HTML, SVG,
markdown, JavaScript outputs) is untrusted. This module makes it inert before
anyone's browser sees it, and renders math without MathJax:

- :func:`sanitize_notebook` cleans an autograded notebook in place (markdown and raw
  cells, rich outputs) with ``nh3`` and an explicit allow-list, and drops output MIME
  types that a front end would execute. Run it on the notebook the grader stores in
  ``autograded/``: the Formgrader renders that file.
- :func:`prerender_math` rewrites every markdown cell of such a notebook as the same
  sanitised HTML with its math already converted to MathML, so the Formgrader (whose
  page asks a CDN for MathJax 2 and gets nothing offline) shows the formulas anyway.
- :func:`math_to_mathml` converts ``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``
  and ``\\begin{equation|align}...`` in markdown text to MathML (``latex2mathml``),
  leaving code spans and code blocks alone; what does not convert is shown as TeX in a
  ``<code>`` element.
- :func:`render_feedback` builds one self-contained feedback page (inline CSS, no
  script, no URL that leaves the page, a Content-Security-Policy that forbids both),
  with the points of each graded part, the grader's verdicts as sentences, and hidden
  tests left out.
- :func:`write_feedback` writes such a page without following links.
- :class:`GraderNotes` puts the model answer and rubric of each part graded by hand beside the
  student's answer in the notebook the Formgrader shows (never on a feedback page).

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
import html
import os
import re
import stat
import time
from collections import Counter
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

import latex2mathml.converter
import nh3
from markdown_it import MarkdownIt
from traitlets import Unicode

from .protocol import HAND_IN
from .time_bound import time_bound

__all__ = [
    "math_to_mathml",
    "prerender_math",
    "render_feedback",
    "sanitize_notebook",
    "write_feedback",
]

# --------------------------------------------------------------------------- allow-lists

_HTML_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del",
    "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small",
    "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
    "u", "ul", "var", "wbr",
})
_HTML_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "img": {"src", "alt", "title", "width", "height"},
    "ol": {"start", "type"},
    "li": {"value"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    "col": {"span"},
    "colgroup": {"span"},
    "details": {"open"},
}
# MathML as latex2mathml writes it; no href (Firefox makes links of it), no annotation-xml.
_MATHML_ATTRIBUTES = {
    "math": {"display"},
    "mi": {"mathvariant"},
    "mn": {"mathvariant"},
    "mtext": {"mathvariant"},
    "ms": set(),
    "mo": {"stretchy", "fence", "form", "minsize", "maxsize", "movablelimits", "separator", "lspace",
           "rspace", "largeop", "accent", "symmetric"},
    "mrow": set(), "msub": set(), "msup": set(), "msubsup": set(), "msqrt": set(), "mroot": set(),
    "mphantom": set(), "merror": set(), "semantics": set(), "mmultiscripts": set(),
    "mprescripts": set(), "none": set(),
    "mfrac": {"linethickness"},
    "mover": {"accent"},
    "munder": {"accentunder"},
    "munderover": {"accent", "accentunder"},
    "mspace": {"width", "height", "depth", "linebreak"},
    "mstyle": {"displaystyle", "scriptlevel", "mathcolor", "mathvariant"},
    "mpadded": {"width", "height", "depth", "lspace", "voffset"},
    "menclose": {"notation"},
    "mtable": {"displaystyle", "rowspacing", "columnspacing", "columnalign", "rowalign", "columnlines",
               "rowlines", "frame"},
    "mtr": {"columnalign", "rowalign"},
    "mtd": {"columnalign", "rowalign", "columnspan", "rowspan"},
    "annotation": {"encoding"},
}
# What a plotting library writes; <use>/href only to fragments of the same image.
_SVG_PRESENTATION = {
    "id", "transform", "fill", "fill-opacity", "fill-rule", "stroke", "stroke-width", "stroke-linecap",
    "stroke-linejoin", "stroke-dasharray", "stroke-dashoffset", "stroke-opacity", "stroke-miterlimit",
    "opacity", "clip-path", "clip-rule", "mask", "style", "font-family", "font-size", "font-weight",
    "font-style", "text-anchor", "dominant-baseline", "visibility", "display", "color",
}
_SVG_ATTRIBUTES = {
    "svg": {"width", "height", "viewBox", "preserveAspectRatio", "version"},
    "g": set(), "defs": set(), "title": set(), "desc": set(), "symbol": {"viewBox"},
    "path": {"d"}, "rect": {"x", "y", "width", "height", "rx", "ry"},
    "circle": {"cx", "cy", "r"}, "ellipse": {"cx", "cy", "rx", "ry"},
    "line": {"x1", "y1", "x2", "y2"}, "polyline": {"points"}, "polygon": {"points"},
    "text": {"x", "y", "dx", "dy", "rotate", "textLength"}, "tspan": {"x", "y", "dx", "dy"},
    "use": {"href", "x", "y", "width", "height"},
    "clipPath": {"clipPathUnits"}, "mask": {"x", "y", "width", "height", "maskUnits"},
    "linearGradient": {"x1", "y1", "x2", "y2", "gradientUnits", "gradientTransform"},
    "radialGradient": {"cx", "cy", "r", "fx", "fy", "gradientUnits", "gradientTransform"},
    "stop": {"offset", "stop-color", "stop-opacity"},
    "marker": {"markerWidth", "markerHeight", "refX", "refY", "orient", "viewBox", "markerUnits"},
    "pattern": {"x", "y", "width", "height", "patternUnits", "patternTransform", "viewBox"},
}
# Removed with everything inside them.
_DROP_WITH_CONTENT = frozenset({
    "script", "style", "template", "iframe", "frame", "frameset", "object", "embed", "applet",
    "noscript", "noembed", "noframes", "textarea", "select", "xmp", "plaintext", "head", "title",
})
# Worth an integrity event when found (beyond on* attributes and bad URLs); other unknown
# tags (<font>, <center>) are dropped silently.
_ACTIVE_TAGS = frozenset({
    *_DROP_WITH_CONTENT, "form", "input", "button", "link", "meta", "base", "audio", "video", "source",
    "track", "svg", "portal", "dialog", "foreignobject", "annotation-xml", "image", "feimage",
    "animate", "set", "animatetransform", "animatemotion", "handler", "listener",
})
_URL_ATTRIBUTES = frozenset({"href", "src", "xlink:href", "action", "formaction", "srcset", "background",
                             "poster", "data", "cite", "longdesc", "lowsrc", "dynsrc", "ping", "manifest"})

#: output MIME types kept by :func:`sanitize_notebook` (after cleaning); every other is dropped
SAFE_MIME_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg",
                   "image/gif", "image/svg+xml", "application/json")
_RBTUTOR_MIME = "application/vnd.rbtutor."  # the course's own inert payloads (hand_in)

_DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif);base64,[A-Za-z0-9+/=]*\Z", re.I)
_WEB_LINK = re.compile(r"(?:https?|mailto):", re.I)
_SPACES = re.compile(r"[\x00-\x20\x7f]+")
_BAD_STYLE = re.compile(r"\\|expression|@import|behavior|binding|javascript|url\s*\(\s*['\"]?\s*[^#'\"\s)]",
                        re.I)


def _squeeze(value: str) -> str:
    """A URL as a browser reads its scheme: control characters and spaces dropped, lower case."""
    return _SPACES.sub("", html.unescape(value)).lower()


def _url_allowed(tag: str, attr: str, value: str, *, web_links: bool) -> bool:
    url = _squeeze(value)
    if tag == "img" and attr == "src":
        return bool(_DATA_IMAGE.match(url))
    if attr == "href":
        if url.startswith("#"):
            return True
        return tag == "a" and web_links and bool(_WEB_LINK.match(url))
    return False


def _make_filter(web_links: bool):
    def keep(tag: str, attr: str, value: str) -> str | None:
        if attr in ("href", "src"):
            return value if _url_allowed(tag, attr, value, web_links=web_links) else None
        if attr == "style" or "url(" in value.lower():
            return None if _BAD_STYLE.search(value) else value
        return value

    return keep


def _attributes(*maps: dict) -> dict[str, set[str]]:
    merged: dict[str, set[str]] = {}
    for mapping in maps:
        for tag, names in mapping.items():
            merged.setdefault(tag, set()).update(names)
    return merged


def _cleaner(kind: str) -> nh3.Cleaner:
    """``page`` (feedback: links only within the page), ``notebook`` (Formgrader: web links kept), ``svg``."""
    if kind == "svg":
        svg_attrs = {tag: names | _SVG_PRESENTATION for tag, names in _SVG_ATTRIBUTES.items()}
        return nh3.Cleaner(
            tags=set(_SVG_ATTRIBUTES), attributes=svg_attrs, url_schemes=set(),
            clean_content_tags=set(_DROP_WITH_CONTENT - set(_SVG_ATTRIBUTES)),
            attribute_filter=_make_filter(web_links=False), link_rel=None,
            set_tag_attribute_values={"svg": {"xmlns": "http://www.w3.org/2000/svg"}},
        )
    tags = set(_HTML_TAGS | set(_MATHML_ATTRIBUTES))
    return nh3.Cleaner(
        tags=tags, attributes=_attributes(_HTML_ATTRIBUTES, _MATHML_ATTRIBUTES),
        url_schemes={"http", "https", "mailto", "data"},
        clean_content_tags=set(_DROP_WITH_CONTENT - tags),
        attribute_filter=_make_filter(web_links=kind == "notebook"),
        link_rel="noopener noreferrer nofollow",
    )


_CLEANERS = {kind: _cleaner(kind) for kind in ("page", "notebook", "svg")}


# nh3's serialiser writes attributes as name="value" with " escaped, so this matches one whole <img>.
_IMG = re.compile(r'<img((?:\s[a-zA-Z:-]+="[^"]*")*)\s*/?>')


def _img_with_source(match: re.Match) -> str:
    attrs = match.group(1)
    if ' src="' not in attrs:
        return ""  # nothing to show; an empty <img> would only be a screen-reader puzzle
    return match.group(0) if ' alt="' in attrs else f'<img{attrs} alt="">'


def _clean(fragment: str, kind: str) -> str:
    cleaned = _CLEANERS[kind].clean(fragment)
    if kind != "svg":
        cleaned = _IMG.sub(_img_with_source, cleaned)
    if kind == "svg":  # an SVG image is an XML document: one namespace for links, XML entities only
        cleaned = re.sub(r"(<use\b[^>]*?\s)xlink:href=", r"\1href=", cleaned).replace("&nbsp;", "&#160;")
    return cleaned


class _Inventory(HTMLParser):
    """What active content a fragment holds, as short descriptions (for integrity events).

    Reported: elements that run or load something, ``on*`` attributes, ``style`` that loads
    or runs something, and URLs that would run (a scheme other than http, https or mailto)
    or load (any image not from a ``data:image`` URL). Harmless markup the allow-list also
    drops (``<font>``, a relative link) is not reported.
    """

    def __init__(self, expected: frozenset[str]):
        super().__init__(convert_charrefs=True)
        self.expected = expected
        self.found: Counter[str] = Counter()

    def handle_starttag(self, tag, attrs):
        active = tag in _ACTIVE_TAGS and tag not in self.expected
        if active:
            self.found[f"<{tag}>"] += 1
        for name, value in attrs:
            name = name.lower()
            url = _squeeze(value or "")
            scheme = re.match(r"([a-z][a-z0-9+.-]*):", url)
            if name.startswith("on"):
                self.found[f"{name} attribute"] += 1
            elif name == "style" and _BAD_STYLE.search(value or ""):
                self.found["style that loads or runs something"] += 1
            elif active or name not in _URL_ATTRIBUTES or not url:
                continue
            elif name in ("href", "xlink:href") and not url.startswith("#"):
                if scheme and scheme.group(1) not in ("http", "https", "mailto"):
                    self.found[f"{scheme.group(1)}: URL in {name}"] += 1
            elif not (name == "src" and tag == "img" and _DATA_IMAGE.match(url)) and not url.startswith("#"):
                what = f"{scheme.group(1)}: URL" if scheme else "relative URL"
                self.found[f"{what} in {name}"] += 1

    handle_startendtag = handle_starttag


_SVG_TAGS = frozenset(tag.lower() for tag in _SVG_ATTRIBUTES)


def _inventory(fragment: str, expected: frozenset[str] = frozenset()) -> list[str]:
    parser = _Inventory(expected)
    try:
        parser.feed(fragment)
        parser.close()
    except Exception:  # noqa: BLE001 - html.parser is lenient; never let a report line stop grading
        parser.found["unparseable HTML"] += 1
    return [f"{what} ({n})" if n > 1 else what for what, n in sorted(parser.found.items())]


# --------------------------------------------------------------------------- math

_MATH_ENVIRONMENTS = ("equation", "equation*", "align", "align*", "gather", "gather*", "multline",
                      "multline*", "eqnarray", "eqnarray*")
_LABEL = re.compile(r"\\(?:label|tag)\s*\{[^{}]*\}|\\(?:nonumber|notag)\b")
_MAX_FORMULA_CHARS = 5000
_MAX_FORMULAS = 2000  # per text; beyond it, formulas are shown as TeX
_PLACEHOLDER = "rbtutormath{}z"
_PLACEHOLDER_RE = re.compile(r"rbtutormath(\d+)z")


@lru_cache(maxsize=4096)
def _tex_to_mathml(tex: str, display: bool) -> str:
    """One formula as sanitised MathML, or its TeX escaped in ``<code>`` when it does not convert."""
    body = _LABEL.sub("", tex).strip()
    try:
        if not body or len(body) > _MAX_FORMULA_CHARS:
            raise ValueError("empty or too long")
        if body.startswith("\\begin{equation"):  # latex2mathml knows align, not equation
            body = re.sub(r"\A\\begin\{equation\*?\}|\\end\{equation\*?\}\Z", "", body).strip()
        mathml = latex2mathml.converter.convert(body, display="block" if display else "inline")
        if re.search(r"<mi>\\[A-Za-z]", mathml):  # a command latex2mathml did not know
            raise ValueError("unknown command")
        cleaned = _clean(mathml, "page")
        if not cleaned.startswith("<math"):
            raise ValueError("no math element")
        return cleaned
    except Exception:  # noqa: BLE001 - any failure of the converter shows the TeX instead
        return f"<code>{html.escape(tex)}</code>"


# Block structure only (no inline pass): which lines are code.
_BLOCKS = MarkdownIt("commonmark").disable(["inline", "text_join"], ignoreInvalid=True)


def _code_regions(text: str) -> list[tuple[int, int]]:
    """Character ranges of fenced and indented code blocks (markdown-it's reading of ``text``)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    try:
        tokens = _BLOCKS.parse(text)
    except Exception:  # noqa: BLE001 - then no block is code; spans are still skipped
        return []
    regions = []
    for token in tokens:
        if token.type in ("fence", "code_block") and token.map:
            first, last = token.map
            regions.append((starts[min(first, len(starts) - 1)], starts[min(last, len(starts) - 1)]))
    return regions


def _find_closing(text: str, token: str, start: int, end: int, misses: dict[str, int]) -> int:
    """Index of the first ``token`` in ``text[start:end]`` that no backslash escapes, or -1.

    ``misses`` remembers, per token, an ``end`` up to which a search already failed, so that
    a thousand unclosed openers cost one scan, not a thousand.
    """
    if misses.get(token) == end:
        return -1
    i = start
    while True:
        i = text.find(token, i, end)
        if i < 0:
            misses[token] = end
            return -1
        k = i
        while k > 0 and text[k - 1] == "\\":
            k -= 1
        if (i - k) % 2 == 0:
            return i
        i += 1


def _scan_math(text: str) -> tuple[str, list[str]]:
    """``text`` with each formula replaced by a placeholder, and the formulas as HTML."""
    out: list[str] = []
    formulas: list[str] = []
    regions = _code_regions(text)
    misses: dict[str, int] = {}
    i, n = 0, len(text)

    def limit_after(pos: int) -> int:
        return min([s for s, _ in regions if s >= pos], default=n)

    def emit(raw: str, tex: str, display: bool) -> None:
        if len(formulas) >= _MAX_FORMULAS:
            html_ = f"<code>{html.escape(raw)}</code>"
        else:
            html_ = _tex_to_mathml(tex, display)
        out.append(_PLACEHOLDER.format(len(formulas)))
        formulas.append(html_)

    while i < n:
        region = next(((s, e) for s, e in regions if s <= i < e), None)
        if region:
            out.append(text[i:region[1]])
            i = region[1]
            continue
        stop = limit_after(i)
        ch = text[i]
        if ch == "`":
            run = len(text[i:]) - len(text[i:].lstrip("`"))
            close = re.compile(r"(?<!`)" + "`" * run + r"(?!`)").search(text, i + run, stop)
            j = close.end() if close else i + run
            out.append(text[i:j])
            i = j
            continue
        if ch == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "([":
                closing = "\\)" if nxt == "(" else "\\]"
                j = _find_closing(text, closing, i + 2, stop, misses)
                if j > i + 2:
                    emit(text[i:j + 2], text[i + 2:j], nxt == "[")
                    i = j + 2
                    continue
            env = re.compile(r"\\begin\{([a-z]+\*?)\}").match(text, i)
            if env and env.group(1) in _MATH_ENVIRONMENTS:
                end_tag = f"\\end{{{env.group(1)}}}"
                j = -1 if misses.get(end_tag) == stop else text.find(end_tag, env.end(), stop)
                if j < 0:
                    misses[end_tag] = stop
                if j >= 0:
                    raw = text[i:j + len(end_tag)]
                    emit(raw, raw, True)
                    i = j + len(end_tag)
                    continue
            out.append(text[i:i + 2])  # an escaped character, \$ included
            i += 2
            continue
        if ch == "$":
            if text.startswith("$$", i):
                j = _find_closing(text, "$$", i + 2, stop, misses)
                if j > i + 2 and text[i + 2:j].strip():
                    emit(text[i:j + 2], text[i + 2:j], True)
                    i = j + 2
                    continue
                out.append("$$")
                i += 2
                continue
            j = _find_closing(text, "$", i + 1, stop, misses)
            body = text[i + 1:j] if j > i + 1 else ""
            if (body and not body[0].isspace() and not body[-1].isspace() and "\n\n" not in body
                    and "`" not in body and not (j + 1 < n and text[j + 1].isdigit())):
                emit(text[i:j + 1], body, False)
                i = j + 1
                continue
            out.append("$")
            i += 1
            continue
        j = i + 1
        while j < stop and text[j] not in "`\\$":
            j += 1
        out.append(text[i:j])
        i = j
    return "".join(out), formulas


def math_to_mathml(text: str) -> str:
    """Markdown ``text`` with its math converted to MathML elements.

    Inline math ``$...$`` and ``\\(...\\)`` becomes ``<math display="inline">``; display math
    ``$$...$$``, ``\\[...\\]`` and ``\\begin{equation}`` / ``align`` / ``gather`` (starred or
    not) becomes ``<math display="block">``. Code spans and fenced or indented code blocks are
    left alone, ``\\$`` is a dollar sign, and a ``$`` counts as an opening delimiter only when
    a non-space follows it and a closing one only when a non-space precedes it and no digit
    follows (so ``$5 and $10`` stays text). A formula that ``latex2mathml`` cannot convert is
    kept as escaped TeX in ``<code>``. Each MathML element is sanitised; the rest of ``text``
    is returned as it was (render and sanitise it as markdown afterwards).

    Parameters
    ----------
    text : str
        Markdown, as in a notebook's markdown cell.

    Returns
    -------
    str
        ``text`` with every formula replaced by its MathML (or ``<code>`` fallback).

    Examples
    --------
    >>> math_to_mathml("costs $5, not `$x$`, and $a_1$")
    'costs $5, not `$x$`, and <math display="inline"><mrow><msub><mi>a</mi><mn>1</mn></msub></mrow></math>'
    """
    if not isinstance(text, str):
        raise TypeError(f"expected text to be str, got {type(text).__name__}")
    masked, formulas = _scan_math(text)
    return _PLACEHOLDER_RE.sub(lambda m: _formula(formulas, m), masked)


def _formula(formulas: list[str], match: re.Match) -> str:
    k = int(match.group(1))
    return formulas[k] if k < len(formulas) else match.group(0)


# --------------------------------------------------------------------------- markdown

_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _markdown_html(source: str, kind: str, *, demote: int = 0) -> tuple[str, list[str]]:
    """Markdown rendered, math converted, sanitised; and what active content was removed."""
    masked, formulas = _scan_math(source)
    tokens = _MARKDOWN.parse(masked)
    if demote:
        for token in tokens:
            if token.type in ("heading_open", "heading_close"):
                token.tag = f"h{min(int(token.tag[1]) + demote, 6)}"
    rendered = _MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {})
    rendered = _PLACEHOLDER_RE.sub(lambda m: _formula(formulas, m), rendered)
    removed = _inventory(rendered)
    return _clean(rendered, kind), removed


# --------------------------------------------------------------------------- notebook

# Markdown that may hold HTML, an image (which would load), an entity or a scheme that runs: rewritten.
_NEEDS_REWRITE = re.compile(r"<[A-Za-z/!?]|!\[|script|data\s*:|&#|&colon|&tab|&newline", re.I)
_WRAPPER = '<div class="rbtutor-sanitised tex2jax_ignore">{}</div>'


def _one_line(fragment: str) -> str:
    """HTML that a markdown renderer passes through as one raw block (no line to split on)."""
    return _WRAPPER.format(fragment.replace("\r", "&#13;").replace("\n", "&#10;"))


def _event(message: str, index: int, cell, removed: list[str]) -> dict:
    event = {"kind": "html_sanitised", "message": message, "cell": index}
    meta = cell.get("metadata", {}).get("nbgrader")
    if isinstance(meta, dict) and meta.get("grade_id"):
        event["grade_id"] = meta["grade_id"]
    if removed:
        event["removed"] = removed
    return event


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


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


def prerender_math(nb) -> int:
    """Rewrite every markdown cell as sanitised HTML with its math as MathML; return how many.

    For the Formgrader, whose page loads MathJax from a CDN only: after this, formulas in
    markdown cells show without MathJax (MathML is rendered by current browsers), and the
    ``tex2jax_ignore`` class keeps MathJax off them when it does load. An output that has
    ``text/latex`` (SymPy's) and no ``text/html`` gets a ``text/html`` with the MathML,
    which nbconvert prefers to the TeX. Cells already
    rewritten by :func:`sanitize_notebook` are left as they are. Run it after
    :func:`sanitize_notebook`, on the same notebook, at the same point of grading.

    Parameters
    ----------
    nb : nbformat.NotebookNode
        An autograded notebook; changed in place.

    Returns
    -------
    int
        The number of markdown cells rewritten.
    """
    count = 0
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = output.get("data") if isinstance(output, dict) else None
            if isinstance(data, dict) and "text/latex" in data and "text/html" not in data:
                latex = data["text/latex"]
                latex = "".join(latex) if isinstance(latex, list) else str(latex)
                data["text/html"] = _WRAPPER.format(_markdown_html(latex, "notebook")[0])
        source = _source(cell)
        if cell.get("cell_type") != "markdown" or source.startswith(_WRAPPER.split("{}")[0]):
            continue
        cleaned, _ = _markdown_html(source, "notebook")
        cell["source"] = _one_line(cleaned)
        count += 1
    return count


# --------------------------------------------------------------------------- the feedback page

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
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


def _pygments():
    from pygments.formatters import HtmlFormatter

    formatter = HtmlFormatter(style="default", nowrap=True)
    css = formatter.get_style_defs(".hl")
    if re.search(r"url\(|https?:", css):  # a style that points outside the page is not used
        css = ""
    return formatter, css


def _highlight(source: str, language: str, formatter) -> str:
    from pygments import highlight
    from pygments.lexers import TextLexer, get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(language or "python")
    except ClassNotFound:
        lexer = TextLexer()
    return highlight(source, lexer, formatter)


def _plain(text) -> str:
    """Output text as a person would have seen it: ANSI codes, carriage-return overwrites and controls gone."""
    text = "".join(text) if isinstance(text, list) else str(text)
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    text = "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))
    return _CONTROL.sub("", text)


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


def _nbgrader(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


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
    points, the grader's comment and the verdict of :class:`rbtutor.autograde.JudgeAnswers`
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
    if not isinstance(title, str):
        raise ValueError(f"expected title to be str, got {type(title).__name__}")
    if not isinstance(scores, dict):
        raise ValueError(f"expected scores to be a dict, got {type(scores).__name__}")
    for gid, entry in scores.items():
        if not (isinstance(entry, (tuple, list)) and len(entry) == 3):
            raise ValueError(f"expected scores[{gid!r}] = (score, max_score, comment), got {entry!r}")
    formatter, pygments_css = _pygments()
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
            rendered = _markdown_html(_source(cell), "page", demote=1)[0]
            parts.append(rendered)
            headings = re.findall(r"<h([1-6])\b", rendered)
            level = int(headings[-1]) if headings else level
        elif kind == "code":
            source, _ = _without_hidden_tests(_source(cell))
            if meta.get("hidden"):
                source = _HIDDEN_NOTE
            code = f'<pre class="source hl"><code>{_highlight(source, language, formatter)}</code></pre>'
            if meta.get("locked") and not graded and not meta.get("solution"):
                code = f"<details><summary>Locked cell {html.escape(grade_id or '')}</summary>{code}</details>"
            parts.append(code)
            match = HAND_IN.search(source) if graded else None
            parts.append(_outputs_html(cell, index, match.group(1) if match else None))
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
    return head + "<body>\n" + body + "</body>\n</html>\n"


#: Bounds of one feedback page: after this many seconds, or this many bytes of rendered cells, the
#: remaining cells are left out (named on the page); at HARD_TIME_FACTOR times the time, rendering is
#: stopped wherever it is and a page with the scores only is written.
PAGE_TIME_LIMIT = 20.0
PAGE_MAX_BYTES = 4_000_000
HARD_TIME_FACTOR = 1.5


def render_bounded(nb, scores: dict, *, title: str, time_limit: float = PAGE_TIME_LIMIT,
                   max_bytes: int = PAGE_MAX_BYTES) -> tuple[str, list[str]]:
    """:func:`render_feedback` within its time and size bounds; returns the page and why it was cut
    (empty when it was not). Past the hard limit the page holds the title and the scores only."""
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


def write_feedback(path: Path, html: str) -> None:  # noqa: A002 - the name the callers use
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


# --------------------------------------------------------------------------- in the grading process


def _preprocessor_base():
    from nbgrader.preprocessors import NbGraderPreprocessor

    from .report import Events

    return Events, NbGraderPreprocessor


_Events, _NbGraderPreprocessor = _preprocessor_base()


class SanitizeNotebook(_Events, _NbGraderPreprocessor):
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


#: ``cell.metadata.rbtutor.grader_note``: a cell for the grader only (model answer and rubric), never
#: on a feedback page
GRADER_NOTE = "grader_note"
# The note's frame: an inline style, which the sanitiser removes from anything a student wrote, so
# that a student's cell cannot pass itself off as the grader's note.
_NOTE_FRAME = ('<div class="rbtutor-grader-note" role="note" aria-label="For the grader" style="border-left: '
               '6px solid #9a4d00; background: #fff3e0; padding: 0.3em 1em; margin: 0.4em 0 1em">{}</div>')


def solution_text(source: str) -> str:
    """What the instructor wrote between ``BEGIN SOLUTION`` and ``END SOLUTION`` (the whole cell
    when it has no such markers, as nbgrader then hides the whole cell from students)."""
    kept, inside, marked = [], False, False
    for line in source.splitlines():
        if "BEGIN SOLUTION" in line:
            inside = marked = True
        elif "END SOLUTION" in line:
            inside = False
        elif inside:
            kept.append(line)
    return "\n".join(kept).strip() if marked else source.strip()


def grader_note(cell, grade_id: str, language: str = "python"):
    """A cell that shows the grader the source ``cell``'s solution region (for a written part: the
    model answer and the rubric): sanitised HTML with MathML in an inline-styled frame, marked
    ``metadata.rbtutor.grader_note`` so that feedback pages leave it out."""
    from nbformat.v4 import new_markdown_cell

    html_source = _note_html(_source(cell), cell.get("cell_type"), grade_id, language)
    return new_markdown_cell(html_source, metadata={"rbtutor": {GRADER_NOTE: True}})


@lru_cache(maxsize=512)
def _note_html(source: str, kind: str, grade_id: str, language: str) -> str:
    """The note's HTML, made once per source cell (every student's notebook gets the same)."""
    from nbformat.v4 import new_markdown_cell, new_notebook

    text = solution_text(source)
    if kind == "code":
        text = f"```{language}\n{text}\n```"
    note = new_markdown_cell(f"**For the grader, {grade_id}** (from the source notebook; students do not "
                             f"see this):\n\n{text}")
    prerender_math(new_notebook(cells=[note]))
    return _NOTE_FRAME.format(note.source)


def is_grader_note(cell) -> bool:
    meta = cell.get("metadata", {}).get("rbtutor")
    return isinstance(meta, dict) and meta.get(GRADER_NOTE) is True


class GraderNotes(_NbGraderPreprocessor):
    """The model answer and rubric in view where a part is graded by hand (the Formgrader).

    Placed after :class:`SanitizeNotebook`: after each part graded by hand (a cell nbgrader marks
    both solution and graded, such as a written answer), a cell from the instructor's source
    notebook ``<source_directory>/<assignment>/<notebook>.ipynb`` with what lies between its
    solution markers (:func:`grader_note`). A marker a student put on a cell of theirs is removed
    first, so only these notes carry it. The notebook stored in ``autograded/`` holds them;
    :func:`render_feedback` leaves them out of every feedback page.
    """

    source_directory = Unicode("", help="the instructor's source folder (CourseDirectory's "
                               "source_directory under its root); empty: no notes").tag(config=True)

    def preprocess(self, nb, resources):
        import nbformat

        for cell in nb.cells:  # the submission's own cells: never notes, whatever their metadata says
            meta = cell.get("metadata", {}).get("rbtutor")
            if isinstance(meta, dict):
                meta.pop(GRADER_NOTE, None)
        if not self.source_directory:
            return nb, resources
        info = resources.get("nbgrader", {})
        path = Path(self.source_directory) / str(info.get("assignment")) / f"{info.get('notebook')}.ipynb"
        if not path.is_file():
            return nb, resources
        source = {_nbgrader(c).get("grade_id"): c for c in nbformat.read(path, as_version=4).cells
                  if _nbgrader(c).get("grade_id")}
        cells = []
        for cell in nb.cells:
            cells.append(cell)
            meta = _nbgrader(cell)
            original = source.get(meta.get("grade_id"))
            if meta.get("grade") and meta.get("solution") and original is not None:
                cells.append(grader_note(original, meta["grade_id"]))
        nb.cells = cells
        return nb, resources


class DropGraderNotes(_NbGraderPreprocessor):
    """The grader's notes taken out: for nbgrader's own ``generate_feedback`` (the Formgrader's
    "Generate Feedback" button), so that not even that path shows them to students."""

    def preprocess(self, nb, resources):
        nb.cells = [cell for cell in nb.cells if not is_grader_note(cell)]
        return nb, resources
