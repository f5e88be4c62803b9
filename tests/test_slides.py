"""The slide decks of the chapter pages (book/_ext/slides.py, book/_ext/static/slides-*).

Three layers: the built book (each chapter, Euler-parameter and problem page links to
its deck under slides/; the deck holds the page's labelled equations with the same
LaTeX and numbers, the page's figures as the same image files with the same alt text,
and the output of a code cell tagged ``slide``; nothing is loaded from outside; the
reveal.js files are the pinned npm package); a small Sphinx project built here with the
extension (the ``slide`` and ``no-slide`` marks; no decks in the single-page build of
the PDF); and a deck in headless Chromium, offline (it loads, MathJax typesets every
equation, the right-arrow key moves to the next slide), with screenshots kept in
test-artifacts/ for a human to look at.

The book comes from the session's build (fixture ``built_book``) or ``RBTUTOR_BOOK_HTML``.
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup
from conftest import ARTIFACTS, ROOT, headless_chromium, toc_pages

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import slides

PAGES = [p for p in toc_pages() if p.startswith(("book/chapter/", "book/euler/", "book/problems/"))]
AXE_JS = ROOT / ".node" / "node_modules" / "axe-core" / "axe.min.js"
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
FOLDED = {"dropdown", "toggle", "toggle-hidden"}


@pytest.fixture(scope="module")
def book(built_book) -> Path:
    """The built book (RBTUTOR_BOOK_HTML names one built elsewhere; see tests/conftest.py)."""
    return built_book


def soup_of(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def deck_path(book: Path, page: str) -> Path:
    return book / "slides" / f"{page}.html"


def resolve(base: Path, url: str) -> Path:
    """The file a relative URL of the HTML file ``base`` points at (fragment dropped)."""
    return (base.parent / unquote(urlsplit(url).path)).resolve()


def folded(node) -> bool:
    return any(p.name == "details" or FOLDED & set(p.get("class") or ()) for p in [node, *node.parents])


def shown(nodes):
    return [n for n in nodes if not folded(n) and "no-slide" not in (n.get("class") or ())]


def equations(soup: BeautifulSoup) -> dict[str, tuple[str, str]]:
    """Each labelled equation shown: id -> (its number as printed, its LaTeX)."""
    found = {}
    for div in shown(soup.select('div.math[id^="equation-"]')):
        number = re.search(r"\(([^)]+)\)", div.find("span", class_="eqno").get_text()).group(1)
        latex = "".join(s for s in div.find_all(string=True) if not s.find_parent("span", class_="eqno"))
        found[div["id"]] = (number, latex.strip())
    return found


def figures(soup: BeautifulSoup, html_file: Path) -> list[tuple[Path, str]]:
    """The image file and alt text of each figure shown, in order."""
    return [(resolve(html_file, img["src"]), img.get("alt", ""))
            for fig in shown(soup.find_all("figure")) if not fig.find_parent("figure")
            for img in fig.find_all("img") if img.get("src")]


# --------------------------------------------------------------------------- the built book


def test_the_chapter_pages_are_all_there():
    """Every chapter and Euler-parameter page of _toc.yml is among the pages given decks."""
    sources = sorted(str(p.relative_to(ROOT).with_suffix("")) for d in ("chapter", "euler")
                     for p in (ROOT / "book" / d).glob("*.md"))
    listed = [s for s in sources if s in toc_pages()]
    assert len(listed) >= 7
    assert set(listed) <= set(PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_page_links_to_its_deck_and_back(book, page):
    """Right under the page title a "Slides" link opens the page's deck; the deck's last slide links back."""
    html_file = book / f"{page}.html"
    soup = soup_of(html_file)
    title = soup.select_one("article h1") or soup.find("h1")
    link = title.find_next_sibling()
    assert link is not None
    assert "rbtutor-slides-link" in link.get("class", []), link
    anchor = link.find("a")
    assert anchor.get_text() == "Slides"
    deck = resolve(html_file, anchor["href"])
    assert deck == deck_path(book, page).resolve()
    assert deck.is_file()
    back = soup_of(deck).select_one("section#end a")
    assert resolve(deck, back["href"]) == html_file.resolve()


@pytest.mark.parametrize("page", PAGES)
def test_deck_holds_the_page_equations(book, page):
    """The deck shows every labelled equation the page shows (unfolded), with the same LaTeX and number."""
    on_page = equations(soup_of(book / f"{page}.html"))
    on_slides = equations(soup_of(deck_path(book, page)))
    assert on_slides == on_page
    if page.startswith("book/chapter/") and page != "book/chapter/motivation":
        assert on_page, f"{page} shows no labelled equation"


@pytest.mark.parametrize("page", PAGES)
def test_deck_holds_the_page_figures(book, page):
    """The deck shows the page's figures: the same image files, in order, with the same alt text."""
    on_page = figures(soup_of(book / f"{page}.html"), book / f"{page}.html")
    deck = deck_path(book, page)
    on_slides = figures(soup_of(deck), deck)
    assert on_slides == on_page
    assert all(path.is_file() and alt.strip() for path, alt in on_slides), on_slides


def test_tagged_cell_shows_its_sympy_result(book):
    """The code cell tagged ``slide`` on the Complete page puts its SymPy output on a slide, as computed."""
    page = soup_of(book / "book/chapter/complete.html")
    cells = page.select("div.cell.tag_slide")
    assert cells, "no cell of book/chapter/complete.md is tagged slide"
    outputs = [m.get_text().strip() for c in cells for m in c.select("div.cell_output .math")]
    assert outputs
    assert all("\\boldsymbol{M}_{RB}" in o for o in outputs)
    deck = soup_of(deck_path(book, "book/chapter/complete"))
    on_slides = [m.get_text().strip() for m in deck.select("div.cell_output .math")]
    assert on_slides == outputs
    assert not deck.select("div.cell_input"), "the code of a tagged cell is not for the slides"


@pytest.mark.parametrize("page", PAGES)
def test_every_slide_has_a_heading(book, page):
    """The deck states its language and title, each slide starts with a heading, each image has alt text."""
    deck = soup_of(deck_path(book, page))
    assert deck.html.get("lang")
    assert deck.title.get_text().startswith("Slides: ")
    sections = deck.select("div.slides > section")
    assert len(sections) >= 3
    for section in sections:
        first = section.find(True)
        assert first.name in {"h1", "h2"}, section.get("id")
        assert first.get_text().strip(), section.get("id")
    assert all(img.get("alt", "").strip() for img in deck.find_all("img"))


def test_decks_load_nothing_from_outside(book):
    """Every script, stylesheet and image of every deck is a file of the book; the only outside links
    are the licence's, which the book's footer has too."""
    decks = sorted((book / "slides").rglob("*.html"))
    assert len(decks) == len(PAGES)
    footer = soup_of(book / "book/chapter/complete.html").select("footer.bd-footer-content a[href]")
    allowed = {a["href"] for a in footer}
    assert any("creativecommons.org" in url for url in allowed)
    for deck in decks:
        soup = soup_of(deck)
        for node in soup.find_all(["script", "link", "img", "source", "iframe", "video", "audio"]):
            url = node.get("src") or node.get("href")
            if url is None:
                continue
            assert not urlsplit(url).scheme, (deck, url)
            assert not url.startswith("//"), (deck, url)
            assert resolve(deck, url).is_file(), (deck, url)
        outside = {a["href"] for a in soup.find_all("a", href=True) if urlsplit(a["href"]).scheme}
        assert outside <= allowed, (deck, outside - allowed)
    for asset in (book / "_static" / "reveal").rglob("*"):
        if asset.suffix in {".css", ".js"}:
            text = asset.read_text(encoding="utf-8", errors="replace")
            assert not re.search(r"(@import|url\()\s*['\"]?(https?:)?//", text), asset


def test_reveal_assets_are_the_pinned_package(book):
    """_static/reveal/ holds reveal.js, its stylesheet, theme and licence, byte for byte from the npm
    package whose version the Makefile pins."""
    pinned = re.search(r"^REVEAL_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    package = json.loads((slides.REVEAL / "package.json").read_text())
    assert package["version"] == pinned
    for name in slides.REVEAL_FILES:
        copied = book / "_static" / "reveal" / name.removeprefix("dist/")
        assert copied.read_bytes() == (slides.REVEAL / name).read_bytes(), name


# --------------------------------------------------------------------------- marks, and the PDF build


CONF = """
import sys
sys.path.insert(0, {ext!r})
extensions = ["slides"]
project = "Marks"
mathjax_path = "mathjax/tex-chtml.js"
"""
PAGE = """Marks
=====

Kept
----

.. math::
   :label: eq-kept

   a = b

.. math::
   :label: eq-left-out
   :class: no-slide

   c = d

Words
-----

Only words here, for the opening paragraph.

Plain
-----

Words that stay on the page.

.. admonition:: Worth a slide
   :class: slide

   Say this in the lecture, with :math:`e = f`.
"""


def build_marks(tmp_path: Path, builder: str) -> Path:
    src = tmp_path / "src"
    (src / "book" / "chapter").mkdir(parents=True, exist_ok=True)
    (src / "conf.py").write_text(CONF.format(ext=str(ROOT / "book" / "_ext")))
    (src / "index.rst").write_text(".. toctree::\n   :numbered:\n\n   book/chapter/marks\n")
    (src / "book" / "chapter" / "marks.rst").write_text(PAGE)
    out = tmp_path / builder
    # A process of its own: Sphinx registers its nodes once a process, and -W fails a second build.
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", builder, "-W", "-q", str(src), str(out)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def test_marks_steer_what_goes_on_the_slides(tmp_path):
    """``no-slide`` leaves a labelled equation out, ``slide`` puts a block on its section's slide, and a
    section with neither equations nor figures shows its opening paragraph."""
    out = build_marks(tmp_path, "html")
    deck = soup_of(out / "slides" / "book" / "chapter" / "marks.html")
    assert set(equations(deck)) == {"equation-eq-kept"}
    page = soup_of(out / "book" / "chapter" / "marks.html")
    assert equations(deck)["equation-eq-kept"] == equations(page)["equation-eq-kept"]
    assert "Only words here" in deck.select_one("section#words").get_text()
    plain = deck.select_one("section#plain").get_text()
    assert "Say this in the lecture" in plain
    assert "stay on the page" not in plain
    assert not deck.select(".slide"), "the mark itself is not carried into the deck"
    assert page.select_one("p.rbtutor-slides-link a")["href"] == "../../slides/book/chapter/marks.html"


def test_single_page_build_makes_no_decks(tmp_path):
    """The single-page build (the PDF's) writes no deck and no Slides link."""
    out = build_marks(tmp_path, "singlehtml")
    assert not (out / "slides").exists()
    assert "rbtutor-slides-link" not in (out / "index.html").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- in the browser


STATE_JS = r"""
(() => ({
  ready: !!(window.Reveal && Reveal.isReady()),
  typeset: document.documentElement.dataset.mathjax === 'typeset',
  h: window.Reveal && Reveal.isReady() ? Reveal.getIndices().h : -1,
  total: window.Reveal && Reveal.isReady() ? Reveal.getTotalSlides() : 0,
  equations: document.querySelectorAll('.slides div.math').length,
  typesetEquations: document.querySelectorAll('.slides div.math mjx-container').length,
  errors: document.querySelectorAll('mjx-merror').length,
  heading: (document.querySelector('.slides > section.present h1, .slides > section.present h2')
            || {textContent: ''}).textContent.trim()
}))()
"""
# The index of the first slide holding the given selector.
FIRST_WITH_JS = "[...document.querySelectorAll('.slides > section')].findIndex(s => s.querySelector({!r}))"


def wait_for(browser, condition: str, seconds: float = 60.0) -> dict:
    deadline = time.monotonic() + seconds
    state = browser.evaluate(STATE_JS)
    while not browser.evaluate(condition) and time.monotonic() < deadline:
        time.sleep(0.2)
        state = browser.evaluate(STATE_JS)
    return state


def screenshot(browser, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = browser.send("Page.captureScreenshot", {"format": "png"})
    (ARTIFACTS / name).write_bytes(base64.b64decode(shot["data"]))


def show_slide(browser, selector: str, name: str) -> str:
    index = browser.evaluate(FIRST_WITH_JS.format(selector))
    assert index > 0, selector
    browser.evaluate(f"Reveal.slide({index})")
    wait_for(browser, f"Reveal.getIndices().h === {index}", 10)
    screenshot(browser, name)
    return browser.evaluate(STATE_JS)["heading"]


@pytest.fixture(scope="module")
def browser(book):
    with headless_chromium("chromium-slides.log", block_web=True) as chromium:
        yield chromium


@pytest.mark.parametrize("page", ["book/chapter/translational", "book/chapter/complete", "book/euler/index"])
def test_deck_works_offline_in_chromium(browser, book, page):
    """Offline the deck loads only its own files, without error; MathJax typesets every equation; the
    right-arrow key moves on one slide. Screenshots of the title, an equation and a figure slide."""
    since = len(browser.events)
    browser.send("Page.navigate", {"url": deck_path(book, page).as_uri()})
    browser.wait_event("Page.loadEventFired", since)
    state = wait_for(browser, "document.documentElement.dataset.mathjax === 'typeset' && Reveal.isReady()")
    events = browser.events[since:]
    requested = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    assert requested
    assert all(url.startswith(LOCAL_SCHEMES) for url in requested), requested
    failed = [e["params"] for e in events if e.get("method") == "Network.loadingFailed"]
    errors = [e for e in events if e.get("method") == "Runtime.exceptionThrown"
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error")]
    assert not failed, failed
    assert not errors, errors
    assert state["ready"], state
    assert state["typeset"], state
    assert state["equations"] == state["typesetEquations"], state
    assert state["errors"] == 0, state
    assert state["h"] == 0, state
    assert state["total"] >= 4, state
    stem = posixpath.basename(page) if page.startswith("book/chapter/") else page.replace("/", "-")[5:]
    screenshot(browser, f"slides-{stem}-title.png")

    for kind in ("rawKeyDown", "keyUp"):
        browser.send("Input.dispatchKeyEvent", {"type": kind, "key": "ArrowRight", "code": "ArrowRight",
                                                "windowsVirtualKeyCode": 39})
    moved = wait_for(browser, "Reveal.getIndices().h === 1", 10)
    assert moved["h"] == 1, moved
    assert moved["heading"], moved

    selector = "div.cell_output .math" if page == "book/chapter/complete" else 'div.math[id^="equation-"]'
    assert show_slide(browser, selector, f"slides-{stem}-equations.png")
    assert show_slide(browser, "figure img", f"slides-{stem}-figure.png")


def test_deck_slide_passes_axe(browser, book):
    """axe-core finds no serious or critical violation on an equation slide of a deck."""
    if not AXE_JS.is_file():
        reason = f"axe-core not found at {AXE_JS}: run `make bootstrap`"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    since = len(browser.events)
    browser.send("Page.navigate", {"url": deck_path(book, "book/chapter/translational").as_uri() + "#/outline"})
    browser.wait_event("Page.loadEventFired", since)
    wait_for(browser, "document.documentElement.dataset.mathjax === 'typeset' && Reveal.isReady()")
    browser.evaluate(AXE_JS.read_text(encoding="utf-8") + "\n;true")
    violations = browser.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => "
        "({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.html.slice(0, 120))})))", timeout=120)
    serious = [v for v in violations if v["impact"] in {"serious", "critical"}]
    assert not serious, serious
