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

from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"


def add_static_path(app: Sphinx, config) -> None:
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", add_static_path)
    app.add_css_file("rbtutor-screen.css")
    app.add_css_file("rbtutor-print.css", media="print")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
