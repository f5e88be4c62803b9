"""Sphinx extension: a launch button that opens a notebook page's notebook on the course hub.

Loaded from _config.yml (``sphinx.local_extensions``). Off unless the book is built
with ``RBTUTOR_HUB_URL`` set to the hub's address, for example::

    RBTUTOR_HUB_URL=https://hub.example.edu make book

Then every notebook page (a MyST markdown file with a kernelspec) gets the theme's
launch menu with one entry, "JupyterHub", linking to
``<hub>/hub/user-redirect/lab/tree/rbtutor-book/<page>.ipynb``: the hub logs the reader
in and opens that notebook in JupyterLab on the reader's own server. The notebook
must be there, in the folder :data:`HUB_FOLDER` of the reader's home, laid out as the
book's own download copies (``_build/html/_sources/<page>.ipynb``, written by
notebook_download.py); ``rbtutor hub up`` places them there (hub/hubctl.py, its
BOOK_FOLDER), and book/manual/operator/hub.md says who may run them. Jupyter Book's
own JupyterHub button is not used: it pulls the book from a public git repository with
nbgitpuller, and this course has neither.

A value that is not an http(s) address with a host stops the build with a one-line error.
"""

from __future__ import annotations

import os
from urllib.parse import quote, urlsplit

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError

# The environment variable that turns the launch button on, and the folder of each
# reader's home on the hub that holds the book's notebooks.
HUB_URL_VARIABLE = "RBTUTOR_HUB_URL"
HUB_FOLDER = "rbtutor-book"


def hub_url_from(value: str) -> str:
    """The hub's address without a trailing slash; '' when unset; ConfigError when not an address."""
    value = value.strip()
    if not value:
        return ""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(f"{HUB_URL_VARIABLE}: expected the hub's http(s) address, such as "
                          f"https://hub.example.edu, got {value!r}")
    return value.rstrip("/")


def launch_url(hub_url: str, pagename: str) -> str:
    """Where the launch button of a page goes: its notebook in JupyterLab on the reader's server."""
    return f"{hub_url}/hub/user-redirect/lab/tree/{quote(HUB_FOLDER)}/{quote(pagename)}.ipynb"


def check_hub_url(app: Sphinx, config: Config) -> None:
    config.rbtutor_hub_url = hub_url_from(config.rbtutor_hub_url)


def add_launch_button(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    hub_url = app.config.rbtutor_hub_url
    if not hub_url or doctree is None or "kernelspec" not in app.env.metadata.get(pagename, {}):
        return
    context.setdefault("header_buttons", []).append({
        "type": "group",
        "tooltip": "Run this page's notebook",
        "icon": "fas fa-rocket",
        "label": "launch-buttons",
        "buttons": [{
            "type": "link",
            "text": "JupyterHub",
            "tooltip": "Open this page's notebook on the course hub",
            "icon": "_static/images/logo_jupyterhub.svg",
            "url": launch_url(hub_url, pagename),
        }],
    })


def setup(app: Sphinx) -> dict:
    # "html": a changed address rewrites the pages.
    app.add_config_value("rbtutor_hub_url", os.environ.get(HUB_URL_VARIABLE, ""), "html")
    app.connect("config-inited", check_hub_url)
    # After sphinx-book-theme has made the header's buttons (priority 500 and 501).
    app.connect("html-page-context", add_launch_button, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
