"""Sphinx extension: every notebook page offers its notebook as ``.ipynb`` for download.

Loaded from _config.yml (``sphinx.local_extensions``). sphinx-book-theme puts a
".ipynb" entry in a page's download menu only when a launch service (Binder,
JupyterHub, Colab, thebe) is configured; this book configures none, because it
must work offline. So for each page that is a notebook (a MyST markdown file with
a kernelspec) this copies the notebook that MyST-NB wrote to
``jupyter_execute/<page>.ipynb`` (the page's cells; in cache mode without their
outputs) into the site as ``_sources/<page>.ipynb`` and tells the theme about it
(``ipynb_source``), before the theme builds the menu. A reader can then run the
chapter in any Jupyter with ``rbtutor[course]`` installed, without the course
server. A notebook page whose notebook is missing is a warning (an error under
``jb build -W``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def executed_notebook(app: Sphinx, pagename: str) -> Path:
    """Where MyST-NB wrote the notebook of a page (next to the html output)."""
    return Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"


def is_notebook_page(app: Sphinx, pagename: str) -> bool:
    return "kernelspec" in app.env.metadata.get(pagename, {})


def offer_notebook(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    if app.builder.name != "html" or doctree is None or not is_notebook_page(app, pagename):
        return
    source = executed_notebook(app, pagename)
    if not source.is_file():
        logger.warning("%s: no notebook at %s to offer for download", pagename, source,
                       type="rbtutor", subtype="notebook_download")
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


# The theme's menu entry opens the notebook in a new tab, where a browser shows its JSON;
# the download attribute makes it save the file instead.
NOTEBOOK_LINK = re.compile(r'(<a href="[^"]*_sources/[^"]*\.ipynb") target="_blank"')


def mark_downloads(app: Sphinx, exception) -> None:
    """Give every notebook link of the download menus the download attribute."""
    if exception is not None or app.builder.name != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = NOTEBOOK_LINK.sub(r"\1 download", text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", mark_downloads)
    # Before sphinx-book-theme's add_header_buttons (priority 501) reads ipynb_source.
    app.connect("html-page-context", offer_notebook, priority=450)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
