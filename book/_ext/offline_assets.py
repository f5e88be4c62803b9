"""Sphinx extension: keep every page of the book loadable without network.

Loaded from _config.yml (``sphinx.local_extensions``). On each HTML page it

* removes duplicated inline scripts and stylesheets. Sphinx 7.4 registers an
  inline script that an extension adds after ``Builder.init()`` twice (once with
  filename ``None``, once with ``''``); with sphinx-thebe's ``const THEBE_JS_URL``
  the second copy throws "Identifier has already been declared" in the browser;
* drops sphinx-thebe's assets when the thebe launch button is off: they only
  name a CDN copy of thebe, which an offline book cannot use;
* warns (an error under ``jb build -W``) if any script or stylesheet would still
  be fetched from another host, MathJax included.
"""

from __future__ import annotations

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

THEBE_FILES = {"_static/sphinx-thebe.js", "_static/sphinx-thebe.css"}


def _key(asset) -> tuple:
    filename = getattr(asset, "filename", asset) or ""
    attributes = getattr(asset, "attributes", {})
    return filename, tuple(sorted((k, str(v)) for k, v in attributes.items()))


def _thebe_enabled(app: Sphinx) -> bool:
    launch = (app.config.html_theme_options or {}).get("launch_buttons", {}) or {}
    always = (getattr(app.config, "thebe_config", None) or {}).get("always_load", False)
    return bool(launch.get("thebe")) or bool(always)


def _is_thebe(asset) -> bool:
    filename = getattr(asset, "filename", asset) or ""
    body = getattr(asset, "attributes", {}).get("body", "")
    return filename.split("?")[0] in THEBE_FILES or "THEBE_JS_URL" in body


def clean_page_assets(app: Sphinx, pagename: str, templatename: str, context: dict,
                      doctree) -> None:
    drop_thebe = not _thebe_enabled(app)
    for kind in ("script_files", "css_files"):
        assets = context.get(kind)
        if assets is None:
            continue
        seen: set[tuple] = set()
        kept = []
        for asset in assets:
            key = _key(asset)
            if key in seen or (drop_thebe and _is_thebe(asset)):
                continue
            seen.add(key)
            kept.append(asset)
            filename = key[0]
            if "://" in filename or filename.startswith("//"):
                logger.warning(
                    "%s: %s would be loaded from the network (%s); serve it from the book",
                    pagename, kind, filename, type="offline", subtype="external_asset",
                )
        assets[:] = kept


def setup(app: Sphinx) -> dict:
    # After sphinx.ext.mathjax (priority 500) has added its script to the page.
    app.connect("html-page-context", clean_page_assets, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
