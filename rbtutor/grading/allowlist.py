"""Step: feedback, first layer. What HTML, MathML and SVG may pass, and the nh3 cleaners built from it.

Everything a student controls that reaches a browser (markdown, kernel outputs, MathML made
from their TeX) goes through :func:`clean_fragment` here: ``nh3`` with an explicit list of tags and
attributes, a filter that keeps only in-page links, web links where allowed and ``data:``
images, and no ``style`` that loads or runs something. :class:`_Inventory` names what active
content a fragment held, for the integrity report. The layers above use these cleaners:
:mod:`.mathml` for formulas and markdown, :mod:`.sanitize` for notebooks, :mod:`.feedback`
for the page.

nh3's parser (html5ever) spends time in proportion to the nesting depth for each tag, and
re-opens formatting elements (``<b>``, ``<a>`` ...) that a block closed, copying them at every
later paragraph: 19,800 nested ``<div>`` cost a second in one uninterruptible call, 6,000
``<div><b id=k></div>`` thirty seconds and 126 MB of output. So before nh3 sees a fragment,
:func:`.html_shape.shape_problem` reads it once, in linear time, the way an HTML parser builds its stack of
open elements (scopes, implied ends, formatting elements re-opened), and a fragment deeper than
:data:`.html_shape.MAX_HTML_DEPTH`, larger than :data:`.html_shape.MAX_HTML_CHARS` or that would re-open more than its
own size in elements is not parsed: its text is shown instead (:func:`.html_shape.as_text`), and
:func:`inventory` names why.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from html.parser import HTMLParser

import nh3

from .html_shape import as_text, shape_problem

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


def clean_fragment(fragment: str, kind: str, *, checked: bool = False) -> str:
    """``fragment`` cleaned by nh3 for ``kind``; shown as text (an SVG: dropped) if its shape is refused.

    ``checked`` says the caller has read the shape already (:func:`shape_problem`).
    """
    problem = None if checked else shape_problem(fragment)
    if problem is not None:  # nh3 never sees it: an SVG is dropped, HTML shown as its text
        return "" if kind == "svg" else as_text(fragment, problem)
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


SVG_TAGS = frozenset(tag.lower() for tag in _SVG_ATTRIBUTES)


def inventory(fragment: str, expected: frozenset[str] = frozenset(), *, checked: bool = False) -> list[str]:
    problem = None if checked else shape_problem(fragment)
    if problem is not None:
        what = "dropped" if "svg" in expected else "shown as text"
        return [f"{problem} ({what})"]
    parser = _Inventory(expected)
    try:
        parser.feed(fragment)
        parser.close()
    except Exception:  # noqa: BLE001 - html.parser is lenient; never let a report line stop grading
        parser.found["unparseable HTML"] += 1
    return [f"{what} ({n})" if n > 1 else what for what, n in sorted(parser.found.items())]


def clean_and_inventory(fragment: str, kind: str, expected: frozenset[str] = frozenset()) -> tuple[str, list[str]]:
    """:func:`clean_fragment` and :func:`inventory` of one fragment, its shape read once."""
    problem = shape_problem(fragment)
    if problem is None:
        return clean_fragment(fragment, kind, checked=True), inventory(fragment, expected, checked=True)
    cleaned = "" if kind == "svg" else as_text(fragment, problem)
    return cleaned, [f"{problem} ({'dropped' if kind == 'svg' else 'shown as text'})"]

