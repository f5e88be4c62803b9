"""Sphinx extension: a reveal.js slide deck for each chapter page, made from the built page.

Loaded from _config.yml (``sphinx.local_extensions``). When the HTML builder has
rendered a page named by ``slides_pages`` (shell patterns of page names), this reads
the page's rendered body (the same HTML the reader gets, so the equation numbers,
the figures the page's cells drew at build time and the SymPy results are the
page's own, never typed twice) and writes ``slides/<page>.html`` next to the site:

* a title slide (the page's numbered title) and a slide of its learning objectives;
* an outline of the page's sections, each linking to its slide;
* for each section (and subsection) the labelled equations, with their numbers,
  and the figures, with their captions and alt text, a few to a slide; a section
  with neither shows its opening paragraph instead;
* a last slide linking back to the page, with the book's licence line.

Authors steer the choice with two classes: ``no-slide`` on a ``{math}`` block or a
figure leaves it out; ``slide`` on any block (an admonition, a ``{div}``) puts the
block on its section's slide, and the cell tag ``slide`` puts a code cell's output
(a SymPy result, a plot) there. Anything folded away on the page (worked answers,
hidden cells) stays off the slides.

The deck runs reveal.js from the npm registry (``.node/slides``, installed by
``make book``, pinned in the Makefile), copied into ``_static/reveal`` when the
build finishes, and typesets with the MathJax the book already serves from
``_static``: nothing is fetched from another host. The page gets a "Slides" link
under its title. The single-page (PDF) build makes no decks and no links.
"""

from __future__ import annotations

import html
import posixpath
import re
import shutil
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from bs4 import BeautifulSoup, Tag
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
ROOT = HERE.parents[1]
REVEAL = ROOT / ".node" / "slides" / "node_modules" / "reveal.js"
# The files of reveal.js the decks load, from its package to _static/reveal/.
REVEAL_FILES = ("dist/reveal.js", "dist/reveal.css", "dist/theme/white.css", "LICENSE")
DECK_DIR = "slides"
MISSING = ("slides: reveal.js from the npm registry is missing ({}): install npm "
           "(apt-get install npm) and run `make bootstrap`")

# How much goes on one slide: an equation line counts one, a figure fills a slide.
SLIDE_BUDGET = 5
FIGURE_WEIGHT = SLIDE_BUDGET
# Text longer than this (characters) is set smaller, and smaller again past the second, so it fits.
DENSE_TEXT = (600, 1000)
# Classes that mark what is folded on the page (answers, hidden cells): never on a slide.
FOLDED_CLASSES = {"dropdown", "toggle", "toggle-hidden"}
MARK, SKIP = "slide", "no-slide"
# What needs the page's scripts (a JavaScript animation, a form): taken out of anything put on a slide.
INTERACTIVE = ["script", "style", "input", "button", "select", "textarea", "form"]


# --------------------------------------------------------------------------- reading the page


@dataclass
class Unit:
    """A section or subsection of the page: its heading and what goes on its slides."""

    anchor: str
    heading: str            # HTML of the heading, with its section number
    level: int              # 2 for a section, 3 for a subsection
    items: list[tuple[int, str]] = field(default_factory=list)   # (weight, HTML)
    lead: str = ""          # the opening paragraph, for a section without items


@dataclass
class Page:
    name: str
    title: str              # HTML of the page title, with its chapter number
    objectives: str         # HTML of the objectives' list, or ""
    units: list[Unit]


def is_folded(node: Tag) -> bool:
    """True inside anything the page folds away (details, drop-downs, toggled blocks)."""
    for parent in [node, *node.parents]:
        if parent.name == "details" or FOLDED_CLASSES & set(parent.get("class") or ()):
            return True
    return False


def has_class(node: Tag, name: str) -> bool:
    return name in (node.get("class") or ())


def is_marked(node: Tag) -> bool:
    """A block an author put on the slides whole (class ``slide``, or a code cell tagged ``slide``)."""
    return has_class(node, MARK) or has_class(node, "tag_" + MARK)


def clean(node: Tag) -> Tag:
    """Drop the pilcrow links (#) Sphinx adds to headings, equations and captions."""
    for link in node.select("a.headerlink"):
        link.decompose()
    return node


def heading_html(heading: Tag) -> str:
    return "".join(str(child) for child in clean(heading).contents).strip()


def inert(node: Tag) -> Tag:
    """The node without the scripts and controls that only work on the page."""
    for part in node.find_all(INTERACTIVE):
        part.decompose()
    return node


def figure_item(figure: Tag) -> list[tuple[int, str]]:
    """A figure with an image file, as one item; none for a figure drawn by script (an animation)."""
    inert(clean(figure))
    if not any(img.get("src") for img in figure.find_all("img")):
        return []
    return [(FIGURE_WEIGHT, str(figure))]


def equation_weight(node: Tag) -> int:
    """An equation counts one for each of its lines."""
    return 1 + node.get_text().count("\\\\")


def motion_figure(figure: Tag) -> str:
    """The still image and caption of a 3D motion view (the view itself needs the page)."""
    still = figure.find("img", class_="rbtutor-motion3d-still")
    caption = figure.find("figcaption")
    for note in caption.select(".rbtutor-motion3d-print-note"):
        note.decompose()
    return f'<figure class="rbtutor-slides-motion">{still}{caption}</figure>'


def marked_output(cell: Tag) -> tuple[int, str]:
    """A code cell tagged ``slide``: its outputs without its code."""
    outputs = cell.find_all("div", class_="cell_output")
    body = ('<p class="rbtutor-slides-note">Computed by the page\'s own code cell:</p>'
            + "".join(str(inert(out)) for out in outputs))
    weight = sum(equation_weight(m) for out in outputs for m in out.find_all(class_="math"))
    weight += FIGURE_WEIGHT * sum(len(out.find_all("img")) for out in outputs)
    return max(weight, 1), body


def unit_items(section: Tag) -> list[tuple[int, str]]:
    """What a section puts on slides, in page order, leaving out its subsections."""
    items = []
    for node in section.find_all(True):
        if node.find_parent("section") is not section or is_folded(node):
            continue
        if has_class(node, SKIP) or any(is_marked(p) for p in node.parents):
            continue
        if has_class(node, "tag_" + MARK):
            items.append(marked_output(node))
        elif has_class(node, MARK):
            items.append((SLIDE_BUDGET // 2, str(inert(clean(node)))))
        elif node.name == "div" and has_class(node, "math") and str(node.get("id", "")).startswith("equation-"):
            items.append((equation_weight(node), str(clean(node))))
        elif node.name == "figure" and has_class(node, "rbtutor-motion3d"):
            items.append((FIGURE_WEIGHT, motion_figure(clean(node))))
        elif node.name == "figure" and not node.find_parent("figure"):
            items += figure_item(node)
    return items


def lead_paragraph(section: Tag) -> str:
    """The section's opening paragraph or list, for a section with no equation or figure."""
    first = section.find(["p", "ul", "ol"], recursive=False)
    return str(inert(first)) if first is not None else ""


def read_units(top: Tag, title: str) -> list[Unit]:
    """The page's sections and subsections in order, after what stands before the first section."""
    opening = Unit(top.get("id", ""), title, 1, unit_items(top))
    units = [opening] if opening.items else []
    for section in top.find_all("section"):
        heading = section.find(["h2", "h3"], recursive=False)
        if heading is None or is_folded(section):
            continue
        unit = Unit(section.get("id", ""), heading_html(heading), int(heading.name[1]), unit_items(section))
        if not unit.items and unit.level == 2:
            unit.lead = lead_paragraph(section)
        units.append(unit)
    return units


def objectives_of(top: Tag) -> str:
    """The list of the page's learning objectives (the admonition so titled, or so classed)."""
    for box in top.select("div.admonition"):
        title = box.find(class_="admonition-title")
        named = title is not None and title.get_text().strip().lower().startswith("learning objectives")
        if has_class(box, "objectives") or named:
            if title:
                title.decompose()
            return "".join(str(child) for child in box.contents).strip()
    return ""


def read_page(name: str, body: str) -> Page:
    """The parts of a rendered page body that the deck shows."""
    soup = BeautifulSoup(body, "html.parser")
    top = soup.find("section")
    if top is None or top.find("h1") is None:
        raise ExtensionError(f"slides: {name} has no titled section to make slides from")
    title = heading_html(top.find("h1"))
    return Page(name, title, objectives_of(top), read_units(top, title))


# --------------------------------------------------------------------------- links


def rebase_url(url: str, page: str, deck: str) -> str:
    """A URL of the page (docname ``page``) as seen from the deck at ``deck`` (both site paths)."""
    if not url or re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I) or url.startswith("//"):
        return url
    if url.startswith("#"):
        url = posixpath.basename(page) + ".html" + url
    path, _, fragment = url.partition("#")
    target = posixpath.normpath(posixpath.join(posixpath.dirname(page), path))
    moved = posixpath.relpath(target, posixpath.dirname(deck) or ".")
    return moved + ("#" + fragment if fragment else "")


def rebase_links(fragment: str, page: str, deck: str) -> str:
    soup = BeautifulSoup(fragment, "html.parser")
    for node in soup.find_all(True):
        for attribute in ("href", "src"):
            if node.has_attr(attribute):
                node[attribute] = rebase_url(node[attribute], page, deck)
        if node.has_attr("class"):
            node["class"] = [c for c in node["class"] if c not in (MARK, "tag_" + MARK)] or None
            if node["class"] is None:
                del node["class"]
    return str(soup)


# --------------------------------------------------------------------------- writing the deck


def density(fragment: str) -> str:
    """A class that sets a slide with much text in smaller type, or nothing."""
    length = len(BeautifulSoup(fragment, "html.parser").get_text(" ", strip=True))
    if length > DENSE_TEXT[1]:
        return ' class="rbtutor-slides-denser"'
    return ' class="rbtutor-slides-dense"' if length > DENSE_TEXT[0] else ""


def chunks(items: list[tuple[int, str]]) -> list[list[str]]:
    """The items in page order, a slide's budget at a time (an item larger than it goes alone)."""
    slides: list[list[str]] = []
    used = SLIDE_BUDGET
    for weight, item in items:
        if used + weight > SLIDE_BUDGET:
            slides.append([])
            used = 0
        slides[-1].append(item)
        used += weight
    return slides


def unit_slides(unit: Unit, page_url: str) -> list[str]:
    """The slides of one section: its heading on each, a link to the section on the first."""
    source = f'<p class="rbtutor-slides-source"><a href="{page_url}#{unit.anchor}">In the book</a></p>'
    groups = chunks(unit.items) or ([[unit.lead]] if unit.lead else [])
    slides = []
    for k, group in enumerate(groups):
        more = f' <span class="rbtutor-slides-part">({k + 1}/{len(groups)})</span>' if len(groups) > 1 else ""
        ident = f' id="{unit.anchor}"' if k == 0 else ""
        content = "\n".join(group + ([source] if k == 0 else []))
        slides.append(f'<section{ident}{density("".join(group))} data-unit="{unit.anchor}">\n'
                      f'<h2>{unit.heading}{more}</h2>\n{content}\n</section>')
    return slides


def outline(units: list[Unit]) -> str:
    entries = []
    for unit in units:
        if unit.level != 2:
            continue
        text = unit.heading
        if unit.items or unit.lead:
            text = f'<a href="#/{unit.anchor}">{text}</a>'
        entries.append(f"<li>{text}</li>")
    return (f'<section id="outline">\n<h2>Outline</h2>\n<ul class="rbtutor-slides-outline">{"".join(entries)}</ul>\n'
            '</section>')


@dataclass(frozen=True)
class Site:
    """What every deck shares: the book's title, language, licence line and asset paths."""

    book_title: str
    language: str
    licence: str
    mathjax: str            # the MathJax script, a path inside the site


def for_deck(page: Page, deck: str) -> Page:
    """The page's fragments with their links made relative to the deck (site path ``deck``)."""

    def move(fragment: str) -> str:
        return rebase_links(fragment, page.name, deck) if fragment else fragment

    units = [Unit(u.anchor, move(u.heading), u.level, [(w, move(item)) for w, item in u.items], move(u.lead))
             for u in page.units]
    return Page(page.name, move(page.title), move(page.objectives), units)


def deck_html(page: Page, site: Site) -> str:
    deck = f"{DECK_DIR}/{page.name}.html"
    page = for_deck(page, deck)
    up = posixpath.relpath(".", posixpath.dirname(deck))
    page_url = posixpath.relpath(f"{page.name}.html", posixpath.dirname(deck))
    plain_title = html.escape(BeautifulSoup(page.title, "html.parser").get_text(" ", strip=True))
    slides = [
        f'<section id="title">\n<h1>{page.title}</h1>\n'
        f'<p class="rbtutor-slides-book">{html.escape(site.book_title)}</p>\n'
        '<p class="rbtutor-slides-help">Next slide: right arrow or space; previous: left arrow; '
        'all slides: Esc.</p>\n</section>',
    ]
    if page.objectives:
        slides.append(f'<section id="objectives"{density(page.objectives)}>\n<h2>Learning objectives</h2>\n'
                      f'{page.objectives}\n</section>')
    slides.append(outline(page.units))
    for unit in page.units:
        slides += unit_slides(unit, page_url)
    slides.append(f'<section id="end">\n<h2>Read on in the book</h2>\n<p>The whole page, with every step, '
                  f'its code and its exercises: <a href="{page_url}">{page.title}</a>.</p>\n'
                  f'<div class="rbtutor-slides-licence">{site.licence}</div>\n</section>')
    body = "\n".join(slides)
    return f"""<!DOCTYPE html>
<html lang="{html.escape(site.language)}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Slides: {plain_title} ({html.escape(site.book_title)})</title>
<link rel="stylesheet" href="{up}/_static/reveal/reveal.css">
<link rel="stylesheet" href="{up}/_static/reveal/theme/white.css">
<link rel="stylesheet" href="{up}/_static/slides-deck.css">
<script src="{up}/_static/slides-deck.js"></script>
<script defer src="{up}/{site.mathjax}"></script>
<script src="{up}/_static/reveal/reveal.js"></script>
</head>
<body>
<main class="reveal" aria-label="Slides">
<div class="slides">
{body}
</div>
</main>
</body>
</html>
"""


# --------------------------------------------------------------------------- Sphinx


def wants_deck(app: Sphinx, pagename: str) -> bool:
    return app.builder.name == "html" and any(fnmatchcase(pagename, p) for p in app.config.slides_pages)


def site_of(app: Sphinx) -> Site:
    mathjax = app.config.mathjax_path or ""
    if "://" in mathjax or mathjax.startswith("//"):
        raise ExtensionError(f"slides: MathJax must be served from the book, not {mathjax}")
    options = app.config.html_theme_options or {}
    return Site(book_title=app.config.html_title or app.config.project or "", language=app.config.language or "en",
                licence=options.get("extra_footer", "") or "", mathjax=f"_static/{mathjax}")


def slides_link(pagename: str) -> str:
    href = posixpath.relpath(f"{DECK_DIR}/{pagename}.html", posixpath.dirname(pagename) or ".")
    return (f'<p class="rbtutor-slides-link"><a href="{href}">Slides</a> of this page, '
            'for a lecture: the equations and figures, one section at a time.</p>')


def write_deck(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Write the page's deck from its rendered body; put the link to it under the page title."""
    if doctree is None or not wants_deck(app, pagename) or "body" not in context:
        return
    page = read_page(pagename, context["body"])
    target = Path(app.outdir) / DECK_DIR / f"{pagename}.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(deck_html(page, site_of(app)), encoding="utf-8")
    context["body"] = re.sub(r"(</h1>)", lambda m: m.group(1) + slides_link(pagename), context["body"], count=1)
    app.add_css_file("slides-page.css")


def check_reveal(app: Sphinx) -> None:
    if app.builder.name != "html":
        return
    missing = [f for f in REVEAL_FILES if not (REVEAL / f).is_file()]
    if missing:
        raise ExtensionError(MISSING.format(", ".join(str((REVEAL / f).relative_to(ROOT)) for f in missing)))


def copy_reveal(app: Sphinx, exception) -> None:
    """reveal.js into _static/reveal/ (its dist/ folder flattened), with its licence."""
    if exception is not None or app.builder.name != "html":
        return
    for name in REVEAL_FILES:
        target = Path(app.outdir) / "_static" / "reveal" / name.removeprefix("dist/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REVEAL / name, target)


def add_static_path(app: Sphinx, config) -> None:
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict:
    app.add_config_value("slides_pages", ["book/chapter/*", "book/euler/*", "book/problems/*"], "html")
    app.connect("config-inited", add_static_path)
    app.connect("builder-inited", check_reveal)
    # After the theme and the other extensions have set up the page's context.
    app.connect("html-page-context", write_deck, priority=800)
    app.connect("build-finished", copy_reveal)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
