"""The hostile feedback and Formgrader pages in headless Chromium: nothing injected runs, math renders.

The notebook of tests/test_feedback.py (every payload sets ``window.pwned`` and the page
title if it runs) is rendered with :func:`rbtutor.grading.feedback.render_feedback`,
written with ``write_feedback`` and opened from a ``file://`` URL; the same notebook,
sanitised, is rendered with nbgrader's own Formgrader template. Controls first show that
the payloads do run in this browser when nothing stops them. Screenshots go to
test-artifacts/. Chromium is driven over the DevTools pipe by tests/conftest.py's helper,
in its own network namespace when the machine allows it, with every http(s) request
blocked as well.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from conftest import ARTIFACTS, headless_chromium
from test_feedback import HOSTILE_HTML, SCORES, formgrader_page, hostile_notebook

from rbtutor.grading.feedback import render_feedback, write_feedback
from rbtutor.grading.mathml import prerender_math
from rbtutor.grading.sanitize import sanitize_notebook

TITLE = "problem03: feedback for s01"
PHONE_WIDTH = 390

STATE_JS = r"""
(() => {
  const box = el => { const r = el.getBoundingClientRect(); return {w: r.width, h: r.height, top: r.top}; };
  const maths = [...document.querySelectorAll('math')];
  const frac = document.querySelector('math mfrac');
  const sup = document.querySelector('math msup');
  return {
    title: document.title,
    pwned: typeof window.pwned,
    href: location.href,
    scripts: document.scripts.length,
    iframes: document.querySelectorAll('iframe, object, embed').length,
    maths: maths.map(m => ({display: m.getAttribute('display'), ns: m.namespaceURI, ...box(m)})),
    frac: frac && {all: box(frac), num: box(frac.children[0]), den: box(frac.children[1])},
    sup: sup && {base: box(sup.children[0]), script: box(sup.children[1])},
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
  };
})()
"""

# Text colour against the first opaque background behind it, for the page's own styles.
COLOURS_JS = r"""
(() => {
  const parse = c => (c.match(/[\d.]+/g) || []).map(Number);
  const background = el => {
    for (; el; el = el.parentElement) {
      const c = parse(getComputedStyle(el).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = {};
  for (const sel of ['body', 'h1', '.total', 'p.verdict.fail', 'p.verdict.pass', 'pre.source', 'pre.source .c1',
                     'pre.source .s2', 'pre.error', 'pre.stdout', '.comment', '.points.pending', 'table a',
                     'th', 'footer']) {
    const el = document.querySelector(sel);
    if (el) out[sel] = {fg: parse(getComputedStyle(el).color).slice(0, 3), bg: background(el)};
  }
  return out;
})()
"""


def contrast(fg: list[float], bg: list[float]) -> float:
    """WCAG 2 contrast ratio of two sRGB colours (0-255)."""

    def luminance(rgb):
        channels = []
        for c in rgb:
            c = c / 255.0
            channels.append(c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4)
        return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]

    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium of our own (the book's fixture would build the whole book first)."""
    with headless_chromium("chromium-feedback.log", block_web=True) as chromium:
        yield chromium


def visit(browser, path: Path) -> tuple[dict, list[dict]]:
    """Open ``path`` as a file:// URL; return the page's state after load and the browser's events."""
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    for url in ("about:blank", path.as_uri()):  # a blank page first ends any refresh the last page set
        since = len(browser.events)
        browser.send("Page.navigate", {"url": url})
        browser.wait_event("Page.loadEventFired", since)
    state = browser.evaluate(STATE_JS)
    return state, browser.events[since:]


def requested(events: list[dict]) -> list[str]:
    return [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]


def screenshot(browser, name: str) -> Path:
    """A full-page PNG in test-artifacts/."""
    size = browser.send("Page.getLayoutMetrics")["cssContentSize"]
    shot = browser.send("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 12000), "scale": 1}})
    path = ARTIFACTS / name
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def test_the_payloads_run_when_nothing_stops_them(browser, tmp_path):
    """Control: the same injections in a plain page set the marker in this browser."""
    plain = tmp_path / "plain.html"
    # without the meta refresh, which would navigate away while the next test loads its page
    payloads = "\n".join(line for line in HOSTILE_HTML.splitlines() if "http-equiv" not in line)
    plain.write_text(f"<!DOCTYPE html><html><head><title>{TITLE}</title></head><body>{payloads}</body></html>")
    state, _ = visit(browser, plain)
    assert state["pwned"] == "number"
    assert state["title"] == "PWNED"


def test_hostile_feedback_page_runs_nothing_and_loads_nothing(browser, tmp_path):
    page = tmp_path / "feedback" / "s01" / "problem03" / "problem03.html"
    page.parent.mkdir(parents=True)
    write_feedback(page, render_feedback(hostile_notebook(), SCORES, title=TITLE))
    state, events = visit(browser, page)
    assert state["pwned"] == "undefined", "an injected script ran"
    assert state["title"] == TITLE
    assert state["href"] == page.as_uri()
    assert state["scripts"] == 0
    assert state["iframes"] == 0
    urls = requested(events)
    assert urls[0] == page.as_uri(), urls
    assert all(u.startswith("data:image/") for u in urls[1:]), urls
    assert len(urls) == 3  # the page, its PNG and its SVG figure
    blocked = [e["params"]["entry"]["text"] for e in events if e.get("method") == "Log.entryAdded"
               and "Content Security Policy" in e["params"]["entry"]["text"]]
    assert not blocked, f"sanitising let something through that only the CSP stopped: {blocked}"
    shot = screenshot(browser, "feedback-hostile.png")
    assert shot.stat().st_size > 10_000


def test_math_renders_as_mathml(browser, tmp_path):
    page = tmp_path / "feedback.html"
    write_feedback(page, render_feedback(hostile_notebook(), SCORES, title=TITLE))
    state, _ = visit(browser, page)
    maths = state["maths"]
    assert len(maths) >= 8
    for m in maths:
        assert m["ns"] == "http://www.w3.org/1998/Math/MathML"
        assert m["w"] > 0, m
        assert m["h"] > 0, m
    frac, sup = state["frac"], state["sup"]
    # laid out as mathematics: numerator above denominator, superscript raised
    assert frac["num"]["top"] + frac["num"]["h"] <= frac["den"]["top"] + 1, frac
    assert frac["all"]["h"] > 1.5 * frac["num"]["h"], frac
    assert sup["script"]["top"] < sup["base"]["top"], sup


def test_feedback_page_fits_a_phone_and_reads_well(browser, tmp_path):
    page = tmp_path / "feedback.html"
    write_feedback(page, render_feedback(hostile_notebook(), SCORES, title=TITLE))
    visit(browser, page)
    colours = browser.evaluate(COLOURS_JS)
    assert {"body", "p.verdict.fail", "p.verdict.pass", "pre.source", "pre.error", ".comment"} <= set(colours)
    low = {sel: round(contrast(c["fg"], c["bg"]), 2) for sel, c in colours.items() if contrast(c["fg"], c["bg"]) < 4.5}
    assert not low, f"contrast below 4.5:1 (WCAG AA): {low}"
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": PHONE_WIDTH, "height": 800, "deviceScaleFactor": 2, "mobile": True})
    try:
        state = browser.evaluate(STATE_JS)
        assert state["innerWidth"] == PHONE_WIDTH
        assert state["scrollWidth"] <= PHONE_WIDTH + 1, "the page scrolls sideways on a phone"
        screenshot(browser, "feedback-hostile-phone.png")
    finally:
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})


def test_formgrader_page_of_the_sanitised_notebook_runs_nothing_injected(browser, tmp_path):
    """nbgrader's own Formgrader template, fed the sanitised notebook with math pre-rendered."""
    raw = tmp_path / "formgrade-raw.html"
    # without the meta refresh: it may navigate away (to a blocked page) before the state is read
    raw.write_text("\n".join(line for line in formgrader_page(hostile_notebook()).splitlines()
                             if "http-equiv=\"refresh\"" not in line))
    state, _ = visit(browser, raw)
    assert state["pwned"] == "number", "control: unsanitised, the Formgrader page runs the student's code"
    nb = hostile_notebook()
    sanitize_notebook(nb)
    prerender_math(nb)
    page = tmp_path / "formgrade.html"
    page.write_text(formgrader_page(nb))
    state, events = visit(browser, page)
    assert state["pwned"] == "undefined"
    assert state["title"] == "problem03"
    assert all(url.startswith(("file:", "data:")) or "cdnjs.cloudflare.com/ajax/libs/mathjax" in url
               for url in requested(events)), requested(events)
    maths = [m for m in state["maths"] if m["w"] > 0 and m["h"] > 0]
    assert len(maths) >= 8, state["maths"]
    screenshot(browser, "formgrader-sanitised.png")


def test_feedback_page_passes_axe(browser, tmp_path):
    """axe-core (from the npm registry, as for the book) finds no serious or critical violation."""
    from test_book import AXE_FAILING_IMPACTS, require_axe, run_axe

    require_axe()
    page = tmp_path / "feedback.html"
    write_feedback(page, render_feedback(hostile_notebook(), SCORES, title=TITLE))
    visit(browser, page)
    violations = run_axe(browser)  # injected over DevTools, which the page's CSP does not govern
    failing = [v for v in violations if v["impact"] in AXE_FAILING_IMPACTS]
    assert not failing, failing
    state = browser.evaluate(STATE_JS)
    assert state["scripts"] == 0  # axe ran as an evaluation, not as a script element
