"""Step: feedback, second layer. TeX in markdown turned into sanitised MathML, no MathJax needed.

- :func:`math_to_mathml` converts ``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``
  and ``\\begin{equation|align}...`` in markdown text to MathML (``latex2mathml``),
  leaving code spans and code blocks alone; what does not convert is shown as TeX in a
  ``<code>`` element. Every formula is cleaned by :mod:`.allowlist`.
- ``markdown_html`` renders a markdown text with its math converted and cleans the result;
  :mod:`.sanitize`, :mod:`.feedback` and :mod:`.grader_notes` all render markdown through it.
  It remembers its renderings (:class:`Remembered`): an assignment's own cells recur in every
  student's notebook and feedback page.
- :func:`prerender_math` rewrites every markdown cell of an autograded notebook as that HTML,
  so the Formgrader (whose page asks a CDN for MathJax 2 and gets nothing offline) shows the
  formulas anyway.

What the renderer is given is bounded first, since markdown-it's inline rules cost more than
linear time on runs of marks (80,000 ``[`` take seconds) and a reference link is copied into
every place that uses it (85 kB of markdown rendered as 100 MB): a text longer than
:data:`MAX_MARKDOWN_CHARS` is shown as text, a paragraph with more than
:data:`MAX_INLINE_MARKS` marks is shown literally, and a rendering whose tokens would write more
than :data:`~.html_shape.MAX_HTML_CHARS` characters is not written. Each such cut is named in
what ``markdown_html`` reports as removed.
"""

from __future__ import annotations

import html
import re
import threading
from collections import OrderedDict
from functools import lru_cache, update_wrapper

import latex2mathml.converter
from markdown_it import MarkdownIt

from .allowlist import clean_fragment, inventory
from .config import GRADING
from .html_shape import MAX_HTML_CHARS, as_text, shape_problem

__all__ = ["math_to_mathml", "prerender_math"]

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
        cleaned = clean_fragment(mathml, "page")
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
    return _MathScanner(text).scan()


class _MathScanner:
    """One pass over a markdown text: code is copied as it is, formulas are cut out (see ``_scan_math``)."""

    def __init__(self, text: str):
        self.text, self.n = text, len(text)
        self.out: list[str] = []
        self.formulas: list[str] = []
        self.regions = _code_regions(text)
        self.misses: dict[str, int] = {}

    def emit(self, raw: str, tex: str, display: bool) -> None:
        html_ = (f"<code>{html.escape(raw)}</code>" if len(self.formulas) >= _MAX_FORMULAS
                 else _tex_to_mathml(tex, display))
        self.out.append(_PLACEHOLDER.format(len(self.formulas)))
        self.formulas.append(html_)

    def scan(self) -> tuple[str, list[str]]:
        text, n, out, i = self.text, self.n, self.out, 0
        regions, r = self.regions, 0  # in document order: r is the first region not yet passed
        while i < n:
            while r < len(regions) and regions[r][1] <= i and regions[r][0] < i:
                r += 1
            if r < len(regions) and regions[r][0] <= i < regions[r][1]:
                out.append(text[i:regions[r][1]])
                i = regions[r][1]
                continue
            stop = min((s for s, _ in regions[r:r + 2] if s >= i), default=n)
            ch = text[i]
            if ch == "`":
                i = self.code_span(i, stop)
            elif ch == "\\" and i + 1 < n:
                i = self.backslash(i, stop)
            elif ch == "$":
                i = self.dollar(i, stop)
            else:
                j = i + 1
                while j < stop and text[j] not in "`\\$":
                    j += 1
                out.append(text[i:j])
                i = j
        return "".join(out), self.formulas

    def code_span(self, i: int, stop: int) -> int:
        """A code span copied as it is; returns where scanning goes on."""
        text = self.text
        run = len(text[i:]) - len(text[i:].lstrip("`"))
        close = re.compile(r"(?<!`)" + "`" * run + r"(?!`)").search(text, i + run, stop)
        j = close.end() if close else i + run
        self.out.append(text[i:j])
        return j

    def backslash(self, i: int, stop: int) -> int:
        """``\\(...\\)``, ``\\[...\\]``, a math environment, or an escaped character."""
        text, misses = self.text, self.misses
        nxt = text[i + 1]
        if nxt in "([":
            closing = "\\)" if nxt == "(" else "\\]"
            j = _find_closing(text, closing, i + 2, stop, misses)
            if j > i + 2:
                self.emit(text[i:j + 2], text[i + 2:j], nxt == "[")
                return j + 2
        env = re.compile(r"\\begin\{([a-z]+\*?)\}").match(text, i)
        if env and env.group(1) in _MATH_ENVIRONMENTS:
            end_tag = f"\\end{{{env.group(1)}}}"
            j = -1 if misses.get(end_tag) == stop else text.find(end_tag, env.end(), stop)
            if j < 0:
                misses[end_tag] = stop
            if j >= 0:
                raw = text[i:j + len(end_tag)]
                self.emit(raw, raw, True)
                return j + len(end_tag)
        self.out.append(text[i:i + 2])  # an escaped character, \$ included
        return i + 2

    def dollar(self, i: int, stop: int) -> int:
        """``$$...$$`` or ``$...$``, or a dollar sign that opens no formula."""
        text, n, misses = self.text, self.n, self.misses
        if text.startswith("$$", i):
            j = _find_closing(text, "$$", i + 2, stop, misses)
            if j > i + 2 and text[i + 2:j].strip():
                self.emit(text[i:j + 2], text[i + 2:j], True)
                return j + 2
            self.out.append("$$")
            return i + 2
        j = _find_closing(text, "$", i + 1, stop, misses)
        body = text[i + 1:j] if j > i + 1 else ""
        if (body and not body[0].isspace() and not body[-1].isspace() and "\n\n" not in body
                and "`" not in body and not (j + 1 < n and text[j + 1].isdigit())):
            self.emit(text[i:j + 1], body, False)
            return j + 1
        self.out.append("$")
        return i + 1


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

#: a markdown text longer than this is shown as text, not rendered
MAX_MARKDOWN_CHARS = GRADING.sanitize_max_markdown_chars
#: a paragraph with more marks than this is shown literally (its marks escaped), not parsed inline
MAX_INLINE_MARKS = GRADING.sanitize_max_inline_marks
_MARKS = re.compile(r"[*_\[\]!<`~]")
_LITERALS = "rbtutor_literals"
_LITERAL = "rbtutorliteral{}z"
_LITERAL_RE = re.compile(r"rbtutorliteral(\d+)z")


def _literal_paragraphs(state) -> None:
    """A core rule before ``inline``: a paragraph with too many marks is set aside, to be shown as text.

    Its text is replaced by a placeholder the inline parser reads in no time, and kept in the
    environment; :func:`_rendered_markdown` puts it back, escaped, after rendering.
    """
    for token in state.tokens:
        if token.type == "inline" and len(_MARKS.findall(token.content)) > MAX_INLINE_MARKS:
            literals = state.env.setdefault(_LITERALS, [])
            literals.append(token.content)
            token.content = _LITERAL.format(len(literals) - 1)


_MARKDOWN.core.ruler.before("inline", "rbtutor_literal_paragraphs", _literal_paragraphs)


def _written_size(tokens) -> int:
    """About how many characters rendering ``tokens`` writes (contents and attributes, tags aside)."""
    size = 0
    for token in tokens:
        size += len(token.content) + sum(len(str(v)) for v in token.attrs.values()) + 8
        if token.children:
            size += _written_size(token.children)
    return size


class Remembered:
    """``render(text, *options)``, remembered in this process: the most recent renderings are kept
    while the texts and results kept hold at most :attr:`BUDGET` characters in all, and one
    rendering over a 64th of that is not kept, so whatever students write, a cache holds 4 to 16 MB
    of text at most (CPython stores 1 to 4 bytes a character). ``render`` must be pure and return
    text, or a tuple of texts and tuples."""

    BUDGET = 4_000_000

    def __init__(self, render) -> None:
        update_wrapper(self, render)
        self.render, self.kept, self.size = render, OrderedDict(), 0
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    def __call__(self, text: str, *options):
        key = (text, *options)
        with self._lock:
            if key in self.kept:
                self.kept.move_to_end(key)
                self.hits += 1
                return self.kept[key][0]
            self.misses += 1
        result = self.render(text, *options)
        size = len(text) + _characters(result)
        if size <= self.BUDGET // 64:
            with self._lock:
                if key not in self.kept:
                    self.kept[key] = (result, size)
                    self.size += size
                while self.size > self.BUDGET:
                    self.size -= self.kept.popitem(last=False)[1][1]
        return result


def _characters(result) -> int:
    return len(result) if isinstance(result, str) else sum(map(_characters, result))


def markdown_html(source: str, kind: str, *, demote: int = 0) -> tuple[str, list[str]]:
    """Markdown rendered, math converted, sanitised; and what active content was removed."""
    rendered, removed = _rendered_markdown(source, kind, demote)
    return rendered, list(removed)


@Remembered
def _rendered_markdown(source: str, kind: str, demote: int) -> tuple[str, tuple[str, ...]]:
    if len(source) > MAX_MARKDOWN_CHARS:
        problem = f"markdown longer than {MAX_MARKDOWN_CHARS} characters"
        return as_text(source, problem), (f"{problem} (shown as text)",)
    masked, formulas = _scan_math(source)
    env: dict = {}
    tokens = _MARKDOWN.parse(masked, env)
    if _written_size(tokens) > MAX_HTML_CHARS:  # links to one long reference, copied at each use
        problem = f"markdown that renders to more than {MAX_HTML_CHARS} characters"
        return as_text(source, problem), (f"{problem} (shown as text)",)
    if demote:
        for token in tokens:
            if token.type in ("heading_open", "heading_close"):
                token.tag = f"h{min(int(token.tag[1]) + demote, 6)}"
    rendered = _MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {})
    literals = env.get(_LITERALS, [])
    cuts = [f"{len(literals)} paragraph(s) with more than {MAX_INLINE_MARKS} marks (shown literally)"] \
        if literals else []
    if literals:
        rendered = _LITERAL_RE.sub(lambda m: html.escape(literals[int(m.group(1))], quote=False)
                                   if int(m.group(1)) < len(literals) else m.group(0), rendered)
    # The formulas are MathML already cleaned and read one by one: the shape read here is the rest.
    problem = shape_problem(rendered)
    if problem is not None:
        return as_text(source, problem), (*cuts, f"{problem} (shown as text)")
    rendered = _PLACEHOLDER_RE.sub(lambda m: _formula(formulas, m), rendered)
    return clean_fragment(rendered, kind, checked=True), (*cuts, *inventory(rendered, checked=True))


_WRAPPER = '<div class="rbtutor-sanitised tex2jax_ignore">{}</div>'


def one_line(fragment: str) -> str:
    """HTML that a markdown renderer passes through as one raw block (no line to split on)."""
    return _WRAPPER.format(fragment.replace("\r", "&#13;").replace("\n", "&#10;"))


def cell_source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


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
                data["text/html"] = _WRAPPER.format(markdown_html(latex, "notebook")[0])
        source = cell_source(cell)
        if cell.get("cell_type") != "markdown" or source.startswith(_WRAPPER.split("{}")[0]):
            continue
        cleaned, _ = markdown_html(source, "notebook")
        cell["source"] = one_line(cleaned)
        count += 1
    return count
