"""Sphinx extension: accessible pages and a print style.

Loaded from _config.yml (``sphinx.local_extensions``). It

* adds two stylesheets from ``book/_ext/static``: ``rbtutor-screen.css`` (tables
  and wide equations scroll inside the page at phone width instead of
  widening it) and ``rbtutor-print.css`` (media ``print``: no sidebars, header or
  buttons, compact code, figures kept whole), used by the browser's print and
  by ``make pdf``;
* post-processes every written HTML page (event ``build-finished``) to fix what
  the theme leaves unlabelled, see :func:`fix_page`.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"


def _name_section_toggle(match: re.Match) -> str:
    """Give a sidebar entry's fold toggle a name built from the entry's title."""
    entry, title, details = match.groups()
    plain = html.unescape(re.sub(r"<[^>]+>", "", title)).strip()
    if not plain:
        raise ValueError(f"expected a title in the sidebar entry, got {match.group(0)[:200]!r}")
    label = html.escape(f"Sections of {plain}", quote=True)
    return f'{entry}{title}{details}<summary aria-label="{label}">'


# (pattern, replacement, what it fixes); each is applied to every written page.
FIXES = [
    # The theme's search field shows "Search Ctrl+K" but is labelled "Search": a
    # speech-input user saying what they see would miss it (axe
    # label-content-name-mismatch). Without aria-label the visible text names it.
    (re.compile(r'(<button class="btn search-button-field[^"]*"[^>]*?) aria-label="Search"'), r"\1",
     "search field named by its visible text"),
    # The colour-mode button shows only icons whose titles (Light, Dark, System
    # Settings) are not in its name "Color mode"; the icons are decoration.
    (re.compile(r'<i class="theme-switch ([^"]*)"([^>]*?) title="[^"]*"'),
     r'<i class="theme-switch \1"\2 aria-hidden="true"',
     "colour-mode icons hidden from assistive technology"),
    # Folded code cells: the summary shows "Show code cell source" but was labelled
    # "Toggle hidden content"; its visible text is the better name.
    (re.compile(r'<summary aria-label="Toggle hidden content">'), "<summary>",
     "folded-cell summaries named by their visible text"),
    # A sidebar entry with child pages folds them in <details>; its <summary> holds
    # only a chevron icon (role="presentation"), so it has no name (axe
    # summary-name). It is named after the entry; the open or closed state is
    # announced by the browser, so the name does not say "show" or "hide".
    (re.compile(r'(<li class="toctree-l\d+ [^"]*\bhas-children\b[^"]*"><a [^>]*>)(.*?)(</a><details[^>]*>)<summary>'),
     _name_section_toggle,
     "sidebar fold toggles named after their entry"),
    # The left sidebar (site title, search, chapter list) becomes a landmark, so no
    # content of the page lies outside one (axe region).
    (re.compile(r'<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar"(?![^>]*role=)'),
     '<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar" role="navigation" aria-label="Book"',
     "primary sidebar as a navigation landmark"),
    # sphinxcontrib-bibtex marks entries with the deprecated role doc-biblioentry
    # inside role="list", which then has no list items (axe aria-required-children).
    (re.compile(r'role="doc-biblioentry"'), 'role="listitem"', "bibliography entries as list items"),
    # Matplotlib's JavaScript animation: the frame image has no alt text and the
    # frame slider no label. A page that describes its animation itself (an alt
    # attribute on the image) keeps its own text.
    (re.compile(r'<img id="(_anim_img[0-9a-f]+)"(?![^>]*\balt=)'),
     r'<img id="\1" alt="Animation frame; the text and caption of this page describe what it shows"',
     "animation frame image with alt text"),
    (re.compile(r'<input id="(_anim_slider[0-9a-f]+)"(?![^>]*\baria-label=)'),
     r'<input id="\1" aria-label="Animation frame"',
     "animation slider with a label"),
]


def fix_page(html: str) -> str:
    """Apply every fix of FIXES to one HTML page and return the result."""
    for pattern, replacement, _what in FIXES:
        html = pattern.sub(replacement, html)
    return html


def fix_written_pages(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for page in outdir.rglob("*.html"):
        if page.relative_to(outdir).parts[0] in {"_static", "_sources", "_images"}:
            continue
        text = page.read_text(encoding="utf-8")
        fixed = fix_page(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def add_static_path(app: Sphinx, config) -> None:
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", add_static_path)
    app.connect("build-finished", fix_written_pages)
    app.add_css_file("rbtutor-screen.css")
    app.add_css_file("rbtutor-print.css", media="print")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
