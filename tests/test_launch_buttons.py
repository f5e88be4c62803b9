"""Live code on the course hub: one setting, RBTUTOR_HUB_URL at build time, turns the launch button on.

A small Jupyter Book (a notebook page in a subfolder and a page of prose) is built with the
book's own extensions (book/_ext/launch_hub.py, notebook_download.py) and the launch_buttons
section of the book's _config.yml: with the variable set, the notebook page links to its
notebook on the configured hub, the same path the build offers for download; unset, no page
has a launch button; a value that is not an address stops the build with a one-line error.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, VENV_BIN, build_env

HUB = "https://hub.example.edu/"
NOTEBOOK_PAGE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A notebook page

```{code-cell} ipython3
print(6 * 7)
```
"""
PROSE_PAGE = "# A page of prose\n\nNo code here.\n"


def book_config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def make_book(folder: Path) -> Path:
    """The small book: its own _config.yml and _toc.yml, the book's launch settings and extensions."""
    extensions = book_config()["sphinx"]["local_extensions"]
    config = {
        "title": "Launch test",
        "only_build_toc_files": True,
        "execute": {"execute_notebooks": "off"},
        "launch_buttons": book_config()["launch_buttons"],
        "sphinx": {"local_extensions": {name: str(ROOT / extensions[name])
                                        for name in ("notebook_download", "launch_hub")}},
    }
    (folder / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    toc = {"format": "jb-book", "root": "intro", "chapters": [{"file": "chapter/live"}]}
    (folder / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
    (folder / "chapter").mkdir()
    (folder / "chapter" / "live.md").write_text(NOTEBOOK_PAGE, encoding="utf-8")
    (folder / "intro.md").write_text(PROSE_PAGE, encoding="utf-8")
    return folder


def build(folder: Path, hub_url: str | None) -> subprocess.CompletedProcess:
    env = build_env()
    env.pop("RBTUTOR_HUB_URL", None)
    if hub_url is not None:
        env["RBTUTOR_HUB_URL"] = hub_url
    return subprocess.run([str(VENV_BIN / "jb"), "build", str(folder), "--all", "-W", "--path-output",
                           str(folder)], env=env, capture_output=True, text=True, check=False, timeout=600)


def launch_links(html: Path) -> list[str]:
    text = html.read_text(encoding="utf-8")
    return re.findall(r'href="([^"]*user-redirect[^"]*)"', text)


def test_the_book_has_one_setting_and_the_theme_buttons_stay_off():
    """The book loads the launch extension; the theme's own launch services are all empty."""
    config = book_config()
    assert "launch_hub" in config["sphinx"]["local_extensions"]
    services = {key: value for key, value in config["launch_buttons"].items() if key.endswith("_url")}
    assert services
    assert not any(services.values()), services
    assert config["launch_buttons"].get("thebe") is False


def test_launch_link_to_the_configured_hub(tmp_path):
    """Set: the notebook page opens its notebook on the hub; the page of prose has no button."""
    book = make_book(tmp_path)
    proc = build(book, HUB)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = book / "_build" / "html"
    expected = "https://hub.example.edu/hub/user-redirect/lab/tree/rbtutor-book/chapter/live.ipynb"
    assert launch_links(html / "chapter" / "live.html") == [expected]
    assert launch_links(html / "intro.html") == []
    # The notebook the link names is the one the build offers for download (what the hub holds).
    assert (html / "_sources" / "chapter" / "live.ipynb").is_file()


def test_no_launch_link_when_unset(tmp_path):
    """Unset (or empty): no page links to a hub."""
    book = make_book(tmp_path)
    proc = build(book, "")
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = book / "_build" / "html"
    for page in html.rglob("*.html"):
        assert launch_links(page) == [], page
    assert "launch-buttons" not in (html / "chapter" / "live.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("value", ["hub.example.edu", "ftp://hub.example.edu", "https://"])
def test_bad_hub_address_stops_the_build(tmp_path, value):
    """A value that is not an http(s) address is a one-line error naming the variable."""
    book = make_book(tmp_path)
    proc = build(book, value)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert f"RBTUTOR_HUB_URL: expected the hub's http(s) address, such as https://hub.example.edu, got {value!r}" \
        in output, output[-2000:]

