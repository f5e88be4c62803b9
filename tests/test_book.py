"""The course book builds without network, and its pages work in a browser without network.

The build runs once per session (fixture `built_book`, in conftest.py). The browser
checks load every built page from file:// in a headless Chromium that sits in its own
network namespace, and read the result through the DevTools protocol: the typeset DOM,
every network request and its outcome, and every console message and uncaught error.
"""

from __future__ import annotations

import base64
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from chromium_cdp import settle_js
from conftest import ARTIFACTS, BOOK_HTML_ENV, JB_BUILD_ARGS, OFFLINE, ROOT, toc_pages

TOC_PAGES = toc_pages()
# Pages whose screenshots are kept in test-artifacts/ for a human to look at.
SCREENSHOT_PAGES = ["book/intro", "book/chapter/complete"]
# Text that must not survive typesetting: TeX delimiters and environments.
RAW_TEX = ["\\begin", "\\[", "\\(", "$$"]
LOCAL_SCHEMES = {"file", "data", "blob", "about"}


def built_pages(html_dir: Path) -> list[Path]:
    """Every HTML page of the site (not the theme's template fragments in _static/)."""
    return sorted(
        p for p in html_dir.rglob("*.html")
        if not p.relative_to(html_dir).parts[0].startswith(("_static", "_sources"))
    )


def is_external(url: str) -> bool:
    url = url.strip()
    return url.startswith("//") or urlsplit(url).scheme in {"http", "https", "ftp", "ws", "wss"}


# --------------------------------------------------------------------------- build


def test_book_builds_offline(built_book: Path):
    """The build succeeded (offline when possible) and every _toc.yml page has its HTML."""
    if os.environ.get(BOOK_HTML_ENV):
        pytest.skip(f"not built here: {BOOK_HTML_ENV} points at an existing build")
    assert (built_book / "index.html").is_file()
    missing = [doc for doc in TOC_PAGES if not (built_book / f"{doc}.html").is_file()]
    assert not missing, f"pages in _toc.yml without HTML: {missing}"
    if not OFFLINE:
        pytest.skip("built, but not offline: `unshare -n` is not available here")


def test_makefile_builds_the_same_way():
    """`make book` and the test fixture run the same jupyter-book command."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^JB_BUILD\s*:=\s*(.+)$", makefile, re.MULTILINE)
    assert match, "JB_BUILD not found in Makefile"
    assert match.group(1).split() == ["jb", *JB_BUILD_ARGS]


# ------------------------------------------------------------- static HTML and CSS


class _ResourceCollector(HTMLParser):
    """Collect the URLs a browser would fetch by itself (not <a href> links)."""

    # rel values of <link> that a browser does not fetch
    NOT_FETCHED = frozenset({"canonical", "alternate", "author", "license", "help", "index", "search",
                             "next", "prev", "top", "up", "bookmark", "me"})

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls: list[tuple[str, str]] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        if tag == "script" and a.get("src"):
            self.urls.append(("script", a["src"]))
        elif tag == "link" and a.get("href"):
            rels = set(a.get("rel", "").lower().split())
            if not rels or not rels <= self.NOT_FETCHED:
                self.urls.append((f"link rel={a.get('rel', '')}", a["href"]))
        elif tag in {"img", "source", "iframe", "embed", "video", "audio", "track", "input"}:
            for key in ("src", "poster"):
                if a.get(key):
                    self.urls.append((tag, a[key]))
            for part in a.get("srcset", "").split(","):
                if part.strip():
                    self.urls.append((f"{tag} srcset", part.split()[0]))
        elif tag == "object" and a.get("data"):
            self.urls.append(("object", a["data"]))
        elif tag == "image":  # SVG
            for key in ("href", "xlink:href"):
                if a.get(key):
                    self.urls.append(("svg image", a[key]))
        if a.get("style"):
            self.urls.extend(("style attribute", u) for u in css_urls(a["style"]))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.urls.extend(("<style>", u) for u in css_urls(data))


_CSS_URL = re.compile(r"""url\(\s*(['"]?)([^'")]+)\1\s*\)|@import\s+(['"])([^'"]+)\3""")


def css_urls(css: str) -> list[str]:
    return [m.group(2) or m.group(4) for m in _CSS_URL.finditer(css)]


def test_no_external_resources_in_html(built_book: Path):
    """No page makes the browser fetch a script, stylesheet, font or image from outside."""
    offenders = []
    for page in built_pages(built_book):
        collector = _ResourceCollector()
        collector.feed(page.read_text(encoding="utf-8"))
        offenders += [f"{page.relative_to(built_book)}: {kind} {url}"
                      for kind, url in collector.urls if is_external(url)]
    assert not offenders, "external resources:\n" + "\n".join(offenders)


def test_no_external_resources_in_css(built_book: Path):
    """No stylesheet shipped with the book imports CSS or loads a font from outside."""
    offenders = []
    for css in (built_book / "_static").rglob("*.css"):
        offenders += [f"{css.relative_to(built_book)}: {url}"
                      for url in css_urls(css.read_text(encoding="utf-8", errors="replace"))
                      if is_external(url)]
    assert not offenders, "external URLs in CSS:\n" + "\n".join(offenders)


# ------------------------------------------------------------ navigation of ideas


def test_api_page_documents_every_public_name(built_book: Path):
    """book/api.html is generated from rbtutor.__all__: each name has its entry there."""
    import inspect

    import rbtutor

    html = (built_book / "book" / "api.html").read_text(encoding="utf-8")
    missing = []
    for name in rbtutor.__all__:
        obj = getattr(rbtutor, name)
        anchor = f'id="module-{obj.__name__}"' if inspect.ismodule(obj) else f'id="rbtutor.{name}"'
        if anchor not in html:
            missing.append(name)
    assert not missing, f"public names without an entry on the API page: {missing}"
    assert 'id="rbtutor.integrate_spin"' in html


def _links(page: Path, fragment_prefix: str) -> list[str]:
    return re.findall(r'href="[^"]*#(' + re.escape(fragment_prefix) + r'[^"]*)"',
                      page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("doc", ["book/exercises", "book/euler/index", "book/problems/heel",
                                 "book/problems/tumbling", "book/problems/simulation"])
def test_pages_cross_reference_equations_and_code(built_book: Path, doc: str):
    """The exercises, problem and Euler pages link to numbered equations and to the API."""
    page = built_book / f"{doc}.html"
    assert _links(page, "equation-eq-"), f"{doc}: no link to a numbered equation"
    text = page.read_text(encoding="utf-8")
    if doc != "book/exercises":
        assert re.search(r'href="[^"]*api\.html#rbtutor\.', text), f"{doc}: no link to the API page"


def test_euler_parameter_model_is_a_numbered_equation(built_book: Path):
    """The 13-state model and the Euler-parameter matrices are labelled, numbered equations."""
    html = (built_book / "book" / "euler" / "index.html").read_text(encoding="utf-8")
    for label in ["eq-ep-rotation-matrix", "eq-ep-g-matrices", "eq-ep-state-model"]:
        assert f'id="equation-{label}"' in html, label


def test_bibliography_and_glossary_are_linked(built_book: Path):
    """Every work of references.bib is listed and cited; glossary terms are linked from pages."""
    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    keys = re.findall(r"^@\w+\{([^,]+),", bib, re.MULTILINE)
    references = (built_book / "book" / "references.html").read_text(encoding="utf-8")
    entries = re.findall(r'role="listitem"', references)
    assert len(entries) == len(keys) >= 4, (len(entries), keys)
    pages = [p for p in built_pages(built_book) if p.name != "references.html"]
    cited = sum(len(re.findall(r'href="[^"]*references\.html#id\d+"', p.read_text(encoding="utf-8")))
                for p in pages)
    terms = sum(len(re.findall(r'href="[^"]*glossary\.html#term-', p.read_text(encoding="utf-8")))
                for p in pages)
    assert cited >= 4, f"only {cited} citations link to the references page"
    assert terms >= 10, f"only {terms} links to glossary terms"


# ------------------------------------------------------------------------ browser

# Runs in the page after the load event. Waits (bounded) for MathJax to finish its
# first typeset pass, for images and web fonts, then reports what a reader would see.
CHECK_PAGE_JS = settle_js("(() => {\n" + r"""  const text = document.body.innerText;
  const mathNodes = [...document.querySelectorAll('.math')];
  return {
    href: location.href,
    title: document.title,
    mathjax: mathjax,
    mathjaxVersion: (mj && mj.version) || null,
    rawTex: %RAW_TEX%.filter(s => text.includes(s)),
    mathCount: mathNodes.length,
    untypeset: mathNodes.filter(n => !n.querySelector('mjx-container'))
                        .map(n => n.textContent.trim().slice(0, 80)),
    texErrors: [...document.querySelectorAll('mjx-merror')]
                 .map(n => n.getAttribute('data-mjx-error') || n.textContent),
    brokenImages: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))
                                      .map(i => i.currentSrc || i.src),
    imageCount: document.images.length,
    // Code cells that call plt.show() but have no figure in their output.
    cellsWithoutFigure: [...document.querySelectorAll('div.cell')]
      .filter(c => /plt\.show\(\)/.test((c.querySelector('.cell_input') || c).innerText))
      .filter(c => !c.querySelector('.cell_output img'))
      .map(c => c.querySelector('.cell_input').innerText.trim().slice(0, 80)),
    // Code blocks whose lines run past their box (a reader would have to scroll to see them).
    codeCut: [...document.querySelectorAll('.bd-article div.highlight pre')]
      .filter(p => p.getClientRects().length && p.scrollWidth > p.clientWidth + 1)
      .map(p => p.innerText.split('\n').reduce((a, b) => (b.length > a.length ? b : a), '').trim().slice(0, 80)),
    scripts: [...document.scripts].filter(s => s.src).map(s => s.src),
    stylesheets: [...document.querySelectorAll('link[rel~="stylesheet"]')].map(l => l.href),
    failedFonts: [...document.fonts].filter(f => f.status === 'error')
                                    .map(f => f.family + ' ' + f.weight + ' ' + f.style),
    navLinks: [...document.querySelectorAll('.bd-sidebar-primary a[href]')].map(a => a.href),
  };
})()""".replace("%RAW_TEX%", json.dumps(RAW_TEX)), 20000, 10000)


# At phone width: how wide the document is, and which visible elements reach past
# the right edge of the screen without a scrolling box around them.
PHONE_JS = r"""
(() => {
  const root = document.documentElement;
  const W = root.clientWidth;
  const over = e => e.getBoundingClientRect().right > W + 1;
  const contained = e => {
    for (let a = e.parentElement; a; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.position === 'fixed' || (s.overflowX !== 'visible' && !over(a))) return true;
    }
    return false;
  };
  const describe = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\s+/).join('.') : '') +
    ' (' + Math.round(e.getBoundingClientRect().right) + ' px): ' +
    (e.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60);
  return {
    width: W,
    scrollWidth: root.scrollWidth,
    culprits: [...document.querySelectorAll('body *')]
      .filter(e => e.getClientRects().length && over(e) && !contained(e))
      .slice(0, 8).map(describe),
  };
})()
"""


def _strip_fragment(url: str) -> str:
    return url.split("#", 1)[0]


def _page_events(browser, since: int) -> list[dict]:
    return [ev for ev in browser.events[since:] if ev.get("sessionId") == browser.session_id]


def _summarise_network(events: list[dict]) -> dict:
    requests, finished, failed = {}, set(), []
    for ev in events:
        method, params = ev["method"], ev.get("params", {})
        if method == "Network.requestWillBeSent":
            requests[params["requestId"]] = params["request"]["url"]
        elif method == "Network.loadingFinished":
            finished.add(params["requestId"])
        elif method == "Network.loadingFailed":
            failed.append(f"{requests.get(params['requestId'], '?')}: {params.get('errorText')}"
                          f" {params.get('blockedReason') or ''}".strip())
        elif method == "Network.responseReceived":
            status = params["response"].get("status", 0)
            if status >= 400:
                failed.append(f"{params['response']['url']}: HTTP {status}")
    return {
        "requested": sorted(set(requests.values())),
        "loaded": {_strip_fragment(requests[r]) for r in finished if r in requests},
        "failed": failed,
    }


def _console_errors(events: list[dict]) -> list[str]:
    errors = []
    for ev in events:
        method, params = ev["method"], ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in {"error", "assert"}:
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            errors.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            desc = details.get("exception", {}).get("description") or details.get("text")
            where = f"{details.get('url', '')}:{details.get('lineNumber')}"
            errors.append(f"uncaught: {desc} ({where})")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            errors.append(f"{entry['source']}: {entry['text']} {entry.get('url', '')}".strip())
    return errors


def visit(browser, url: str, expect_redirect: bool = False) -> dict:
    """Load url, wait until it has settled, and return what the page and the browser saw."""
    since = len(browser.events)
    browser.send("Page.navigate", {"url": url})
    browser.wait_event("Page.loadEventFired", since)
    if expect_redirect:  # a meta refresh: wait for the second load
        mark = next(i for i in range(since, len(browser.events))
                    if browser.events[i].get("method") == "Page.loadEventFired")
        browser.wait_event("Page.loadEventFired", mark + 1)
    report = browser.evaluate(CHECK_PAGE_JS, timeout=60)
    events = _page_events(browser, since)
    report["network"] = _summarise_network(events)
    report["consoleErrors"] = _console_errors(events)
    return report


# axe-core, installed from the npm registry by the Makefile set-up (`make bootstrap`)
# and by .ci/run into .node/ (kept out of git).
AXE_JS = ROOT / ".node" / "node_modules" / "axe-core" / "axe.min.js"
# Impacts that fail a page; "moderate" and "minor" ones are reported, not failed.
AXE_FAILING_IMPACTS = {"serious", "critical"}
RUN_AXE_JS = r"""
axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({
  id: v.id, impact: v.impact, help: v.help,
  nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ' :: ' + n.html.slice(0, 200)),
  count: v.nodes.length,
})))
"""
PHONE_WIDTH = 390


def run_axe(browser) -> list[dict]:
    """Inject axe-core into the open page and return its violations."""
    browser.evaluate(AXE_JS.read_text(encoding="utf-8") + "\n;true")
    return browser.evaluate(RUN_AXE_JS, timeout=120)


def require_axe() -> None:
    if AXE_JS.is_file():
        return
    reason = (f"axe-core not found at {AXE_JS.relative_to(ROOT)}: run `make bootstrap` "
              "(needs npm) or `npm install --prefix .node axe-core@4`")
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def site(chromium, built_book: Path) -> dict:
    """Visit the site like a reader: start at index.html, follow the left navigation,
    then open every other built page. Returns {page path relative to _build/html: report}."""
    html_dir = built_book.resolve()

    def rel(url: str) -> str | None:
        parts = urlsplit(url)
        if parts.scheme != "file":
            return None
        path = Path(unquote(parts.path))
        try:
            return path.relative_to(html_dir).as_posix()
        except ValueError:
            return None

    reports: dict[str, dict] = {}
    index = visit(chromium, (html_dir / "index.html").as_uri(), expect_redirect=True)
    reports["index.html"] = index
    reached: set[str] = set()
    queue = [rel(index["href"])]
    while queue:
        page = queue.pop(0)
        if page is None or page in reached:
            continue
        reached.add(page)
        if page not in reports:
            reports[page] = visit(chromium, (html_dir / page).as_uri())
        for link in reports[page]["navLinks"]:
            target = rel(_strip_fragment(link))
            if target and target not in reached:
                queue.append(target)
    for path in built_pages(html_dir):
        page = path.relative_to(html_dir).as_posix()
        if page not in reports:
            reports[page] = visit(chromium, path.as_uri())

    # Each page again, as it is now loaded: axe-core (when installed), then the same
    # page at phone width, where nothing may be wider than the screen.
    for page, report in reports.items():
        visit(chromium, (html_dir / page).as_uri(), expect_redirect=(page == "index.html"))
        report["axe"] = run_axe(chromium) if AXE_JS.is_file() else None
    chromium.send("Emulation.setDeviceMetricsOverride",
                  {"width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        for page, report in reports.items():
            visit(chromium, (html_dir / page).as_uri(), expect_redirect=(page == "index.html"))
            report["phone"] = chromium.evaluate(PHONE_JS)
    finally:
        chromium.send("Emulation.setDeviceMetricsOverride",
                      {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})

    ARTIFACTS.mkdir(exist_ok=True)
    for doc in SCREENSHOT_PAGES:
        visit(chromium, (html_dir / f"{doc}.html").as_uri())
        shot = chromium.send("Page.captureScreenshot", {"format": "png"})
        (ARTIFACTS / f"{doc.replace('/', '_')}.png").write_bytes(base64.b64decode(shot["data"]))
    return {"reports": reports, "reached_by_nav": reached}


def _problems(report: dict) -> list[str]:
    problems = []
    if report["rawTex"]:
        problems.append(f"raw TeX in the rendered text: {report['rawTex']}")
    if report["untypeset"]:
        problems.append(f"math not typeset (MathJax: {report['mathjax']}): {report['untypeset']}")
    if report["mathCount"] and report["mathjax"] != "ok":
        problems.append(f"MathJax did not finish: {report['mathjax']}")
    if report["texErrors"]:
        problems.append(f"TeX errors: {report['texErrors']}")
    if report["brokenImages"]:
        problems.append(f"images that did not load: {report['brokenImages']}")
    if report["cellsWithoutFigure"]:
        problems.append(f"plt.show() cells without a figure: {report['cellsWithoutFigure']}")
    if report["failedFonts"]:
        problems.append(f"fonts that did not load: {report['failedFonts']}")
    net = report["network"]
    external = [u for u in net["requested"] if urlsplit(u).scheme not in LOCAL_SCHEMES]
    if external:
        problems.append(f"requests to outside the book: {external}")
    if net["failed"]:
        problems.append(f"failed loads: {net['failed']}")
    not_loaded = [u for u in report["scripts"] + report["stylesheets"]
                  if _strip_fragment(u) not in net["loaded"]]
    if not_loaded:
        problems.append(f"scripts/stylesheets never loaded: {not_loaded}")
    if report["consoleErrors"]:
        problems.append(f"console errors: {report['consoleErrors']}")
    return problems


@pytest.mark.parametrize("doc", TOC_PAGES)
def test_toc_page_renders_offline(site: dict, doc: str):
    """Math typeset, every image/script/stylesheet/font loaded, nothing fetched from
    outside, and no console error, for each page of _toc.yml."""
    report = site["reports"].get(f"{doc}.html")
    assert report is not None, f"{doc}.html was never visited"
    problems = _problems(report)
    assert not problems, f"{doc}.html:\n  " + "\n  ".join(problems)


def test_math_is_really_typeset(site: dict):
    """The pages with math (the landing page has a display equation) went through MathJax."""
    root = site["reports"][f"{TOC_PAGES[0]}.html"]
    assert root["mathCount"] > 0, "the landing page should contain math"
    assert root["mathjax"] == "ok", root["mathjax"]
    assert root["mathjaxVersion"], root["mathjax"]


def test_other_pages_render_offline(site: dict):
    """index.html redirects to the root page; search and index pages work too."""
    index = site["reports"]["index.html"]
    assert index["href"].endswith(f"/{TOC_PAGES[0]}.html"), index["href"]
    failures = {page: problems for page, report in site["reports"].items()
                if (problems := _problems(report))}
    assert not failures, "\n".join(f"{p}:\n  " + "\n  ".join(v) for p, v in failures.items())


def test_navigation_reaches_every_toc_page(site: dict):
    """Following the left navigation from index.html reaches every page in _toc.yml."""
    missing = [doc for doc in TOC_PAGES if f"{doc}.html" not in site["reached_by_nav"]]
    assert not missing, f"not reachable through the navigation: {missing}"


# ------------------------------------------------------- accessibility and layout


def test_every_page_passes_axe(site: dict):
    """axe-core finds no serious or critical violation on any page of the site."""
    require_axe()
    failures, lesser = [], []
    for page, report in sorted(site["reports"].items()):
        for violation in report["axe"]:
            line = (f"{page}: {violation['id']} ({violation['impact']}, {violation['count']} "
                    f"nodes): {violation['help']}\n      " + "\n      ".join(violation["nodes"]))
            (failures if violation["impact"] in AXE_FAILING_IMPACTS else lesser).append(line)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "axe-report.txt").write_text(
        "\n".join(failures + lesser) or "no violations\n", encoding="utf-8")
    assert len(site["reports"]) >= len(TOC_PAGES)
    assert not failures, "axe-core violations:\n" + "\n".join(failures)


def test_axe_sees_a_broken_page(chromium, built_book: Path):
    """The axe check can fail: an unlabelled button and an image without alt are reported."""
    require_axe()
    visit(chromium, (built_book / f"{TOC_PAGES[0]}.html").as_uri())
    chromium.evaluate("document.querySelector('article').insertAdjacentHTML('afterbegin', "
                      "'<button id=\"bad\"><i class=\"fa fa-x\"></i></button><img src=\"x.png\">'); true")
    found = {v["id"] for v in run_axe(chromium) if v["impact"] in AXE_FAILING_IMPACTS}
    assert {"button-name", "image-alt"} <= found, found


def test_code_wraps_instead_of_being_cut(site: dict):
    """On a desktop screen no code block hides the end of a line behind a scroll bar."""
    cut = {page: report["codeCut"] for page, report in site["reports"].items() if report.get("codeCut")}
    assert not cut, "code lines run past their box (the longest line of each block):\n" + "\n".join(
        f"{page}: {lines}" for page, lines in sorted(cut.items()))


def test_no_page_is_wider_than_a_phone(site: dict):
    """At 390 px, no page scrolls sideways: wide tables, code and formulas scroll inside it."""
    wide = {page: report["phone"] for page, report in sorted(site["reports"].items())
            if report["phone"]["scrollWidth"] > report["phone"]["width"]}
    assert not wide, "pages wider than the phone screen:\n" + "\n".join(
        f"{page}: {info['scrollWidth']} px > {info['width']} px; "
        + "; ".join(info["culprits"]) for page, info in wide.items())
