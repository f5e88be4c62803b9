"""Step: feedback, the shape of HTML read before nh3 cleans it. A fragment nested too deep, too long,
or with markup whose parse depends on the parser's quirks is refused here and shown as text."""

from __future__ import annotations

import html
import re

from .config import GRADING

#: a fragment whose stack of open elements (with the formatting elements a parser would re-open)
#: would grow deeper than this is not given to nh3
MAX_HTML_DEPTH = GRADING.sanitize_max_html_depth


#: a fragment longer than this is not given to nh3
MAX_HTML_CHARS = GRADING.sanitize_max_html_chars


#: of a fragment not given to nh3, at most this much of its text is shown
TEXT_SHOWN_CHARS = GRADING.sanitize_text_shown_chars


_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})


_VOID = frozenset({"area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "image", "img",
                   "input", "keygen", "link", "meta", "param", "source", "track", "wbr"})


_FORMATTING = frozenset({"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong",
                         "tt", "u"})


_SPECIAL = frozenset({
    "address", "applet", "area", "article", "aside", "base", "basefont", "bgsound", "blockquote", "body", "br",
    "button", "caption", "center", "col", "colgroup", "dd", "details", "dir", "div", "dl", "dt", "embed",
    "fieldset", "figcaption", "figure", "footer", "form", "frame", "frameset", "head", "header", "hgroup", "hr",
    "html", "iframe", "img", "input", "keygen", "li", "link", "listing", "main", "marquee", "menu", "meta", "nav",
    "noembed", "noframes", "noscript", "object", "ol", "p", "param", "plaintext", "pre", "script", "search",
    "section", "select", "source", "style", "summary", "table", "tbody", "td", "template", "textarea", "tfoot",
    "th", "thead", "title", "tr", "track", "ul", "wbr", "xmp", "mi", "mo", "mn", "ms", "mtext", "annotation-xml",
    "foreignobject", "desc", *_HEADINGS,
})


# Elements that end the search for an open element "in scope", by kind of scope (a <select> too: what
# is inside it is parsed apart, so the model never closes anything outside it from inside).
_SCOPE = {"default": frozenset({"applet", "caption", "html", "table", "td", "th", "marquee", "object", "template",
                                "mi", "mo", "mn", "ms", "mtext", "annotation-xml", "foreignobject", "desc",
                                "title", "select"})}
_SCOPE.update(list=_SCOPE["default"] | {"ol", "ul"}, button=_SCOPE["default"] | {"button"},
              table=frozenset({"html", "table", "template", "select"}), special=_SPECIAL)


_MARKER_TAGS = frozenset({"applet", "marquee", "object", "template", "td", "th", "caption"})


# Start tags that close an open <p> first, and that do not re-open formatting elements.
_CLOSES_P = frozenset({"address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div",
                       "dl", "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main", "menu", "nav",
                       "ol", "p", "search", "section", "summary", "ul", "pre", "listing", "form", "plaintext",
                       "table", "hr", "xmp", "li", "dd", "dt", *_HEADINGS})


_TABLE_PARTS = frozenset({"tbody", "thead", "tfoot", "tr", "td", "th", "caption", "colgroup", "col"})


# End tags that close the nearest open element of their name when it is in scope (which scope).
_SCOPED_END = {**{tag: "default" for tag in _CLOSES_P | {"applet", "marquee", "object", "button"}},
               "li": "list", "p": "button", "table": "table", "template": "table",
               **{tag: "table" for tag in _TABLE_PARTS}}


# Elements whose content is text to the tokenizer, up to their own end tag.
_RAW_TEXT = frozenset({"script", "style", "xmp", "iframe", "noembed", "noframes", "noscript", "textarea", "title",
                       "plaintext"})


_RAW_END = {tag: re.compile(rf"</{tag}[\t\n\f\r />]", re.I) for tag in _RAW_TEXT}


_FOREIGN_ROOTS = frozenset({"svg", "math"})


# Foreign elements whose content is HTML again, by namespace.
_INTEGRATION = {"svg": frozenset({"foreignobject", "desc", "title"}),
                "math": frozenset({"mi", "mo", "mn", "ms", "mtext", "annotation-xml"})}


def _children_namespace(parent: str | None, tag: str) -> str | None:
    """The foreign namespace (``svg``, ``math``) an element's children are in, or None for HTML."""
    if parent is None:
        return tag if tag in _FOREIGN_ROOTS else None
    return None if tag in _INTEGRATION[parent] else parent


# In SVG or MathML, these start tags end the foreign element (the parser goes back to HTML).
_BREAKOUT = frozenset({"b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em",
                       "embed", "head", "hr", "i", "img", "li", "listing", "menu", "meta", "nobr", "ol", "p", "pre",
                       "ruby", "s", "small", "span", "strong", "strike", "sub", "sup", "table", "tt", "u", "ul",
                       "var", *_HEADINGS})


# One tag as the HTML tokenizer reads it: a name, then attributes (a name, and a value after '='
# that may be quoted), up to the '>' outside a quoted value. Possessive, so linear.
_ATTRIBUTES = (r"""(?:[\t\n\f\r /]++|[^\t\n\f\r />][^\t\n\f\r />=]*+"""
               r"""(?:[\t\n\f\r ]*+=[\t\n\f\r ]*+(?:"[^"]*+"|'[^']*+'|[^\t\n\f\r >]*+))?+)*+""")


_TOKEN = re.compile(rf"<(?:(/?)([A-Za-z][^\t\n\f\r />]*+)({_ATTRIBUTES})>|!--|[!?]|/(?![A-Za-z])|(/?)[A-Za-z])")


# A fragment with fewer than a third of MAX_HTML_DEPTH '<' cannot nest deeper (a cell implies at most
# two parents, a re-opened element was opened once); unless it is long, nor re-open much.
_FORMATTING_START = re.compile(r"<(?:a|b|big|code|em|font|i|nobr|s|small|strike|strong|tt|u)[\t\n\f\r />]", re.I)


_KINDS_OF: dict[str, tuple[str, ...]] = {}


_SELF_CLOSING = re.compile(r"""(?:\A|[\t\n\f\r "'])/\Z""")


class _TooDeep(Exception):
    """The shape read so far already breaks a limit (the message says which)."""


class _Shape:
    """The stack of open elements and the list of formatting elements an HTML parser would keep.

    A model of the HTML tree builder's bookkeeping, precise enough to bound what it costs and
    cautious where it is not: where the builder might keep an element open, the model keeps it
    open too. Each structure is indexed so that every tag costs a constant amount of work.
    """

    def __init__(self, size: int):
        self.stack: list[tuple[str, list | None, str | None]] = []  # (tag, formatting entry, children's namespace)
        self.where: dict[str, list[int]] = {}  # tag -> its positions in the stack
        self.bounds: dict[str, list[int]] = {kind: [] for kind in _SCOPE}  # scope kind -> boundary positions
        self.entries: list[list] = []  # formatting elements: [tag, on the stack, characters]; markers: [None]
        self.by_tag: dict[str, list[list]] = {}
        self.off = 0  # formatting entries no longer on the stack (a parser re-opens them)
        self.reopened, self.reopen_budget = 0, max(size, 4096)

    # ---- the stack
    def depth_check(self) -> None:
        if len(self.stack) + self.off > MAX_HTML_DEPTH:
            raise _TooDeep(f"HTML nested deeper than {MAX_HTML_DEPTH} levels")

    def foreign(self) -> bool:
        return bool(self.stack) and self.stack[-1][2] is not None

    def push(self, tag: str, entry: list | None = None) -> None:
        children_foreign = _children_namespace(self.stack[-1][2] if self.stack else None, tag)
        position = len(self.stack)
        self.stack.append((tag, entry, children_foreign))
        self.where.setdefault(tag, []).append(position)
        kinds = _KINDS_OF.get(tag)
        if kinds is None:
            kinds = _KINDS_OF.setdefault(tag, tuple(kind for kind, tags in _SCOPE.items() if tag in tags))
        for kind in kinds:
            self.bounds[kind].append(position)
        if tag in _MARKER_TAGS:
            self.entries.append([None])
        self.depth_check()

    def pop(self) -> None:
        tag, entry, _ = self.stack.pop()
        self.where[tag].pop()
        for kind in _KINDS_OF.get(tag, ()):
            self.bounds[kind].pop()
        if entry is not None and entry[1]:
            entry[1] = False
            self.off += 1
        if tag in _MARKER_TAGS:  # the list is cleared back to this element's marker
            while self.entries:
                last = self.entries.pop()
                if last[0] is None:
                    break
                self.forget(last, remove=False)

    def pop_to(self, position: int) -> None:
        while len(self.stack) > position:
            self.pop()

    def top(self, tags) -> int:
        """The stack position of the topmost element named in ``tags``, or -1."""
        if len(tags) == 1:
            found = self.where.get(tags[0])
            return found[-1] if found else -1
        return max((self.where[t][-1] for t in tags if self.where.get(t)), default=-1)

    def in_scope(self, tags, kind: str) -> int:
        """The position of the topmost element named in ``tags`` if no boundary of ``kind`` is above it, else -1."""
        position = self.top(tags)
        bounds = self.bounds[kind]
        return position if position >= 0 and not (bounds and bounds[-1] > position) else -1

    # ---- the list of formatting elements
    def forget(self, entry: list, *, remove: bool = True) -> None:
        if remove:
            self.entries.remove(entry)
        self.by_tag[entry[0]].remove(entry)
        if not entry[1]:
            self.off -= 1

    def entry(self, tag: str) -> list | None:
        """The last entry for ``tag`` after the last marker, or None."""
        found = self.by_tag.get(tag)
        if not found:
            return None
        candidate = found[-1]
        for item in reversed(self.entries):  # short: stops at the candidate or at a marker
            if item is candidate:
                return candidate
            if item[0] is None:
                return None
        return None

    def reopen(self) -> None:
        """What a parser does before text and most start tags: open again the elements a block closed."""
        if not self.off or not self.entries or self.entries[-1][0] is None or self.entries[-1][1]:
            return
        k = len(self.entries)
        while k > 0 and self.entries[k - 1][0] is not None and not self.entries[k - 1][1]:
            k -= 1
        for item in self.entries[k:]:
            item[1] = True
            self.off -= 1
            self.reopened += item[2]
            if self.reopened > self.reopen_budget:
                raise _TooDeep("HTML that re-opens more formatting elements than it holds")
            tag = item[0]
            self.stack.append((tag, item, _children_namespace(self.stack[-1][2] if self.stack else None, tag)))
            self.where.setdefault(tag, []).append(len(self.stack) - 1)
            self.depth_check()

    # ---- tags
    def start(self, tag: str, self_closing: bool, chars: int) -> None:
        if self.foreign() and tag in _BREAKOUT:
            while self.foreign():
                self.pop()
        if self.foreign():
            if not self_closing:
                self.push(tag)
            return
        if tag in _CLOSES_P:
            position = self.in_scope(("p",), "button")
            if position >= 0:
                self.pop_to(position)
        else:
            self.reopen()
        if tag in ("li", "dd", "dt"):
            names = ("li",) if tag == "li" else ("dd", "dt")
            position = self.top(names)
            specials = [p for p in self.bounds["special"] if p > position and self.stack[p][0] not in
                        ("address", "div", "p")]
            if position >= 0 and not specials:
                self.pop_to(position)
        elif tag in _HEADINGS and self.stack and self.stack[-1][0] in _HEADINGS:
            self.pop()
        elif tag in _TABLE_PARTS:
            if not self.where.get("table"):
                return  # outside a table a parser ignores it
            self.table_part(tag)
        elif tag in ("button", "option", "optgroup", "a", "nobr"):
            self.close_same(tag)
        if tag in _VOID:
            return
        if tag in _FORMATTING:
            item = [tag, True, chars]
            self.entries.append(item)
            self.by_tag.setdefault(tag, []).append(item)
            self.push(tag, item)
        else:
            self.push(tag)

    def table_part(self, tag: str) -> None:
        """A cell, row or row group closes the one open before it, and implies the parents it lacks."""
        if tag not in ("td", "th", "tr", "tbody", "thead", "tfoot"):
            return
        closes = {"td": ("td", "th"), "th": ("td", "th"), "tr": ("tr",)}.get(tag, ("tbody", "thead", "tfoot"))
        position = self.in_scope(closes, "table")
        if position >= 0:
            self.pop_to(position)
        parent = self.stack[-1][0] if self.stack else "html"
        if tag in ("td", "th") and parent == "table":
            self.push("tbody")
            self.push("tr")
        elif tag in ("td", "th") and parent in ("tbody", "thead", "tfoot"):
            self.push("tr")
        elif tag == "tr" and parent == "table":
            self.push("tbody")

    def close_same(self, tag: str) -> None:
        if tag in ("a", "nobr"):
            if self.entry(tag) is not None:
                self.end(tag)
        elif tag == "button":
            position = self.in_scope(("button",), "default")
            if position >= 0:
                self.pop_to(position)
        elif self.stack and self.stack[-1][0] == "option":
            self.pop()

    def end(self, tag: str) -> None:
        if tag == "br":
            self.reopen()
            return
        if tag in _FORMATTING:
            item = self.entry(tag)
            if item is not None:
                if not item[1]:
                    self.forget(item)
                    return
                position = self.where[tag][-1]
                for p in range(position + 1, len(self.stack)):  # short: the stack is bounded
                    if self.stack[p][0] in _SPECIAL:
                        return  # the parser moves elements about here; the model keeps them all open
                self.pop_to(position)
                if item in self.entries:
                    self.forget(item)
                return
        kind = _SCOPED_END.get(tag)
        if kind is not None:
            position = self.in_scope(_HEADINGS if tag in _HEADINGS else (tag,), kind)
        else:
            position = self.top((tag,))
            specials = self.bounds["special"]
            if specials and specials[-1] > position:
                position = -1
        if position >= 0:
            self.pop_to(position)


def shape_problem(fragment: str) -> str | None:
    """Why ``fragment`` must not be given to nh3 (too large, too deep, too much re-opened), or None.

    One pass, linear in the length of ``fragment``: tags are read as an HTML tokenizer reads
    them (comments, quoted attribute values, raw-text elements such as ``<script>``), and
    :class:`_Shape` keeps the stack of open elements.
    """
    if len(fragment) > MAX_HTML_CHARS:
        return f"HTML larger than {MAX_HTML_CHARS} characters"
    if 3 * fragment.count("<") <= MAX_HTML_DEPTH and (len(fragment) <= 4096
                                                      or not _FORMATTING_START.search(fragment)):
        return None
    shape, pos, n = _Shape(len(fragment)), 0, len(fragment)
    stack = shape.stack
    try:
        while pos < n:
            match = _TOKEN.search(fragment, pos)
            if match is None:
                return None
            if match.start() > pos:
                shape.reopen()  # text
            tag = match.group(2)
            if tag is not None:
                pos = match.end()
                tag = tag.lower()
                if match.group(1):
                    if stack and stack[-1][0] == tag and stack[-1][1] is None and tag not in _MARKER_TAGS \
                            and tag not in _SCOPED_END:
                        shape.pop()  # the common case: the element just opened is closed
                    else:
                        shape.end(tag)
                    continue
                attrs = match.group(3)
                shape.start(tag, attrs.endswith("/") and bool(_SELF_CLOSING.search(attrs)), pos - match.start())
                if tag in _RAW_TEXT and stack and stack[-1][0] == tag and not shape.foreign():
                    if tag == "plaintext":
                        return None
                    end = _RAW_END[tag].search(fragment, pos)
                    if end is None:
                        return None
                    pos = end.start()
            else:
                pos = _past_markup(fragment, match)
                if pos < 0:
                    return None  # the rest of the fragment is inside a tag or comment that never ends
    except _TooDeep as exc:
        return str(exc)
    return None


def _past_markup(fragment: str, match: re.Match) -> int:
    """Where reading goes on after a comment, a ``<!...>`` or ``<?...>``; -1 if it never ends.

    A tag that never ends (``match`` group 4) also gives -1.
    """
    if match.group(4) is not None:
        return -1
    if fragment.startswith("<!--", match.start()):
        end = fragment.find("-->", match.start() + 2)
        return -1 if end < 0 else end + 3
    end = fragment.find(">", match.start())
    return -1 if end < 0 else end + 1


_ANY_TAG = re.compile(r"<[^<>]*>")


def as_text(fragment: str, problem: str) -> str:
    """What is shown of a fragment nh3 was not given: a note, then its text (tags removed) escaped."""
    text = html.unescape(_ANY_TAG.sub(" ", fragment[: MAX_HTML_CHARS]))
    text = " ".join(text.split())
    more = len(text) - TEXT_SHOWN_CHARS
    if more > 0:
        text = text[:TEXT_SHOWN_CHARS]
    note = f"[{problem}: not rendered; its text follows" + (f", {more} more characters left out]" if more > 0
                                                              else "]")
    return f'<p class="rbtutor-cut"><em>{html.escape(note)}</em></p><pre>{html.escape(text)}</pre>'
