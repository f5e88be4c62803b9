"""Each page of the built book has the favicon, and each notebook page offers its notebook as .ipynb.

Checks the HTML build (the `built_book` fixture of conftest.py: `make book`, or
RBTUTOR_BOOK_HTML). The notebook download comes from book/_ext/notebook_download.py,
the favicon from ``html.favicon`` in _config.yml.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urljoin

from conftest import ROOT, toc_pages

NOTEBOOK_LINK = re.compile(r'<a href="([^"]+\.ipynb)"([^>]*)>')
ICON_LINK = re.compile(r'<link rel="icon" href="([^"]+)"')


def is_notebook_source(doc: str) -> bool:
    """A MyST page with a kernelspec in its front matter is a notebook."""
    text = (ROOT / f"{doc}.md").read_text(encoding="utf-8")
    front = re.match(r"\A---\n(.*?)\n---\n", text, re.S)
    return bool(front) and "kernelspec:" in front.group(1)


def resolve(page: Path, href: str, site: Path) -> Path:
    """The file in the site that a relative link of a page points to."""
    target = urljoin(page.relative_to(site).as_posix(), unquote(href.split("#")[0]))
    return site / target


def test_every_notebook_page_offers_its_ipynb(built_book: Path):
    """The download menu of each notebook page links to a notebook file that is in the site,
    is valid JSON with the page's code cells, and is saved (download) rather than opened."""
    notebooks = [doc for doc in toc_pages() if is_notebook_source(doc)]
    assert "book/euler/index" in notebooks, notebooks
    assert "book/euler/node" in notebooks, notebooks
    for doc in notebooks:
        page = built_book / f"{doc}.html"
        links = NOTEBOOK_LINK.findall(page.read_text(encoding="utf-8"))
        assert links, f"{doc}: no .ipynb link in the page"
        href, attributes = links[0]
        assert "download" in attributes, f"{doc}: the .ipynb link opens a tab instead of downloading"
        target = resolve(page, href, built_book)
        assert target.is_file(), f"{doc}: the .ipynb link points at {target}, which is not in the site"
        notebook = json.loads(target.read_text(encoding="utf-8"))
        code_cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        assert code_cells, f"{doc}: the downloadable notebook has no code cell"
        first = "".join(code_cells[0]["source"]).strip().split("\n")[0]
        assert first in (ROOT / f"{doc}.md").read_text(encoding="utf-8"), (doc, first)
        assert notebook["metadata"]["kernelspec"]["language"] == "python"


def test_a_downloaded_chapter_runs_on_its_own(built_book: Path, tmp_path: Path):
    """The Euler node section, downloaded, runs in a plain Jupyter kernel in an empty folder."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(built_book / "_sources" / "book" / "euler" / "node.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "error with h over error with h/2" in printed, printed[-1000:]


def test_every_page_has_the_favicon(built_book: Path):
    """Every built page names the favicon, and the file it names is in the site."""
    for doc in toc_pages():
        page = built_book / f"{doc}.html"
        icons = ICON_LINK.findall(page.read_text(encoding="utf-8"))
        assert icons, f"{doc}: no favicon"
        assert resolve(page, icons[0], built_book).is_file(), f"{doc}: favicon {icons[0]} not in the site"
