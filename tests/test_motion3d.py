"""The 3D motion viewer of the book (book/_ext/motion3d.py, book/_ext/static/motion3d.js).

Three layers: the scene data that rbtutor computes at build time (unit Euler
parameters, one rotation from both attitudes, increasing time, the same numbers as a
direct run of rbtutor); the built pages that carry the viewer; and the viewer in a
headless Chromium, offline: it draws, plays, scrubs to the last frame from the
keyboard, shows the still in print, and axe-core finds no serious or critical
violation in it.

The built pages come from the session's book build (fixture ``built_book``, or
``RBTUTOR_BOOK_HTML``). ``RBTUTOR_MOTION3D_PAGES=/dir`` uses instead the single-page
builds ``jb build book/problems/simulation.md --path-output /dir`` (and the other two
pages) of a developer checking only these pages.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from conftest import ARTIFACTS, ROOT, headless_chromium

from rbtutor import euler_parameters as ep
from rbtutor import rotation_matrix, simulate
from rbtutor.problems import load_data, vessel

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import motion3d

# scene -> the page that shows it (without .html)
PAGES = {"problem10": "book/problems/simulation", "tumbling": "book/problems/tumbling",
         "euler-example": "book/euler/index"}
AXE_JS = ROOT / ".node" / "node_modules" / "axe-core" / "axe.min.js"
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


@pytest.fixture(scope="module", params=sorted(motion3d.SCENES))
def scene(request) -> motion3d.Scene:
    return motion3d.compute_scene(request.param)


# --------------------------------------------------------------------------- (a) the data


def test_every_scene_has_a_page():
    """Each named scene is shown on a page, and each page names a known scene."""
    assert set(PAGES) == set(motion3d.SCENES)
    for name, page in PAGES.items():
        text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
        assert re.search(r"^```\{motion-3d\} " + re.escape(name) + r"$", text, re.M), page


def test_frames_are_few_and_time_increases(scene):
    """Time starts at zero and increases, at most MAX_FRAMES frames, every array one row a frame."""
    n = len(scene.t)
    assert 100 <= n <= motion3d.MAX_FRAMES
    assert scene.t[0] == 0.0
    assert np.all(np.diff(scene.t) > 0.0)
    assert scene.position.shape == (n, 3)
    assert scene.angles.shape == (n, 3)
    assert scene.parameters.shape == (n, 4)


def test_euler_parameters_have_unit_norm(scene):
    """Each frame's Euler parameters are a unit quaternion (to the rounding of the page data)."""
    assert np.allclose(np.linalg.norm(scene.parameters, axis=1), 1.0, rtol=0.0, atol=1e-6)


def test_angles_and_parameters_are_one_rotation(scene):
    """rbtutor's rotation matrix of the Euler angles equals that of the Euler parameters, frame by frame."""
    for angles, theta in zip(scene.angles, scene.parameters, strict=True):
        from_angles = rotation_matrix(*angles)
        from_parameters = ep.rotation_matrix_ep(theta / np.linalg.norm(theta))
        assert np.allclose(from_angles, from_parameters, rtol=0.0, atol=2e-6)


def test_neighbouring_frames_have_close_parameters(scene):
    """q and -q are one rotation; the data picks the sign that keeps the slerp between frames short."""
    assert np.all(np.einsum("ij,ij->i", scene.parameters[1:], scene.parameters[:-1]) > 0.0)


def _direct_run(name: str, times: np.ndarray):
    """The run of the page, with rbtutor, at the given times: (position, Euler parameters)."""
    data = load_data()
    if name == "problem10":
        sim = data["simulation"]
        run = simulate(vessel(data), np.array(sim["tau"]), sim["t_end"], t_eval=times)
        return run.position, np.array([ep.from_euler_angles(*a) for a in run.eta[:, 3:]])
    module = data["module"]
    from rbtutor import RigidBody, box_inertia

    box = RigidBody(module["mass"], [0.0, 0.0, 0.0], box_inertia(module["mass"], module["dimensions"]))
    start = np.zeros(12)
    start[3:6] = module["omega0"]
    t_end = module["t_end"] if name == "tumbling" else 4.0
    run = simulate(box, np.zeros(6), t_end, start, attitude="euler_parameters", t_eval=times)
    return run.position, run.euler_parameters / np.linalg.norm(run.euler_parameters, axis=1, keepdims=True)


def test_frames_equal_a_direct_rbtutor_run(scene):
    """At four frames, the position and attitude equal those of the page's own rbtutor run."""
    n = len(scene.t)
    picked = [0, n // 3, 2 * n // 3, n - 1]
    position, theta = _direct_run(scene.name, scene.t[picked])
    assert np.allclose(scene.position[picked], position, rtol=0.0, atol=1e-3)
    for mine, theirs in zip(scene.parameters[picked], theta, strict=True):
        assert min(np.abs(mine - theirs).max(), np.abs(mine + theirs).max()) < 1e-6
    # the Euler angles, through their rotation matrix (the angles themselves are wrapped)
    for k, theirs in zip(picked, theta, strict=True):
        assert np.allclose(rotation_matrix(*scene.angles[k]), ep.rotation_matrix_ep(theirs), rtol=0.0, atol=2e-6)


def test_the_scene_moves(scene):
    """The attitude changes during the run (a scene frozen at its first frame would pass the checks above)."""
    assert np.abs(scene.parameters - scene.parameters[0]).max() > 0.1


def test_body_surface_is_closed_and_outward(scene):
    """Every edge of the body's triangles is shared by two of them, and the enclosed volume is positive and
    equal to that of the prism over its outline (shoelace area times height)."""
    faces, v = scene.faces, scene.vertices
    edges: dict[tuple[int, int], int] = {}
    for a, b, c in faces:
        for e in ((a, b), (b, c), (c, a)):
            edges[e] = edges.get(e, 0) + 1
    assert all(edges.get((b, a), 0) == count == 1 for (a, b), count in edges.items())
    volume = sum(np.dot(v[a], np.cross(v[b], v[c])) for a, b, c in faces) / 6.0
    half = len(v) // 2
    x, y = v[:half, 0], v[:half, 1]
    area = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    height = v[half:, 2].max() - v[:half, 2].min()
    assert volume > 0.0
    assert np.isclose(volume, area * height, rtol=1e-9)


def test_description_states_the_computed_ranges(scene):
    """The screen-reader text gives the duration, frame count and the range of each angle from the data."""
    overview, text = motion3d.describe(scene)
    assert f"over {scene.t[-1]:g} s in {len(scene.t)} frames" in overview
    assert not re.search(r"\d+ m\b|between", overview), overview  # the numbers are folded, not open
    degrees = np.degrees(scene.angles)
    for (name, symbol), lo, hi in zip(motion3d.ANGLE_NAMES, degrees.min(axis=0), degrees.max(axis=0), strict=True):
        assert f"{name} {symbol} between {motion3d._num(lo, 0)} and {motion3d._num(hi, 0)}" in text


def test_unknown_scene_is_refused():
    with pytest.raises(ValueError, match="expected a scene name"):
        motion3d.compute_scene("no-such-scene")


# --------------------------------------------------------------------------- (b) the built pages


@pytest.fixture(scope="module")
def pages(request) -> dict[str, Path]:
    """scene -> built HTML page that shows it."""
    single = os.environ.get("RBTUTOR_MOTION3D_PAGES")
    if single:
        found = {}
        for name, page in PAGES.items():
            stem = Path(page).stem
            found[name] = Path(single) / "_build" / "_page" / stem / "html" / f"{stem}.html"
    else:
        html = request.getfixturevalue("built_book")
        found = {name: html / f"{page}.html" for name, page in PAGES.items()}
    missing = [str(p) for p in found.values() if not p.is_file()]
    if missing:
        pytest.fail(f"built pages missing: {missing}", pytrace=False)
    return found


class _Figure(HTMLParser):
    """Collects the motion-3d figures of a page: their tags with attributes, and the JSON data."""

    def __init__(self):
        super().__init__()
        self.depth = 0
        self.figures: list[dict] = []
        self._json = False
        self.scripts: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and attrs.get("src"):
            self.scripts.append(attrs["src"])
        if tag == "figure" and "rbtutor-motion3d" in (attrs.get("class") or "").split():
            self.figures.append({"attrs": attrs, "tags": [], "json": ""})
            self.depth = 1
            return
        if self.depth:
            if tag == "figure":
                self.depth += 1
            self.figures[-1]["tags"].append((tag, attrs))
            self._json = tag == "script" and attrs.get("type") == "application/json"

    def handle_endtag(self, tag):
        if self.depth and tag == "figure":
            self.depth -= 1
        if tag == "script":
            self._json = False

    def handle_data(self, data):
        if self.depth and self._json:
            self.figures[-1]["json"] += data


def _parse(page: Path) -> _Figure:
    parser = _Figure()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page_holds_the_viewer(pages, name):
    """The page has one figure with a view, labelled controls, the readout, the data of rbtutor's scene,
    the computed description, the still image, and loads the bundled viewer script from the book."""
    page = pages[name]
    parsed = _parse(page)
    assert len(parsed.figures) == 1
    figure = parsed.figures[0]
    tags = figure["tags"]
    ids = {a.get("id") for _, a in tags if a.get("id")}
    by_class = {c: (t, a) for t, a in tags for c in (a.get("class") or "").split()}
    scene = motion3d.compute_scene(name)

    assert json.loads(figure["json"]) == json.loads(json.dumps(scene.to_json()))
    assert by_class["rbtutor-motion3d-view"][1]["role"] == "img"
    assert by_class["rbtutor-motion3d-play"][0] == "button"
    time_input = by_class["rbtutor-motion3d-time"][1]
    assert time_input["type"] == "range"
    assert int(time_input["max"]) == len(scene.t) - 1
    speed = by_class["rbtutor-motion3d-speed"]
    assert speed[0] == "select"
    labelled = {a["for"] for t, a in tags if t == "label"}
    assert {time_input["id"], speed[1]["id"]} <= labelled
    described = by_class["rbtutor-motion3d-view"][1]["aria-describedby"]
    assert described in ids
    text = page.read_text(encoding="utf-8")
    overview, numbers = motion3d.describe(scene)
    assert overview in text.replace("&#x27;", "'")
    folded = re.search(r'<details class="rbtutor-motion3d-numbers"><summary>[^<]*</summary><p>(.*?)</p></details>',
                       text.replace("&#x27;", "'"))
    assert folded, "the motion's numbers are not in a fold"
    assert folded.group(1) == numbers
    assert "figcaption" in [t for t, _ in tags]

    still = by_class["rbtutor-motion3d-still"][1]
    assert still["alt"].startswith("Still of the motion")
    assert (page.parent / still["src"]).is_file()
    bundle = [s for s in parsed.scripts if s.split("?")[0].endswith(motion3d.BUNDLE)]
    assert len(bundle) == 1
    assert "://" not in bundle[0]
    assert (page.parent / bundle[0].split("?")[0]).is_file()


# --------------------------------------------------------------------------- (c) in the browser

STATE_JS = r"""
(() => {
  const f = document.querySelector('figure.rbtutor-motion3d');
  const cells = [...f.querySelectorAll('.rbtutor-motion3d-readout tbody td')].map(c => c.textContent);
  return {state: f.dataset.state, webgl: f.dataset.webgl, frame: parseInt(f.dataset.frame, 10),
          cells, slider: f.querySelector('.rbtutor-motion3d-time').value,
          play: f.querySelector('.rbtutor-motion3d-play').textContent,
          pose: f.dataset.pose ? JSON.parse(f.dataset.pose) : null};
})()
"""

# Pixels of the drawn canvas unlike its background, and the number of distinct colours.
PIXELS_JS = r"""
(() => {
  const canvas = document.querySelector('figure.rbtutor-motion3d .rbtutor-motion3d-view canvas');
  if (!canvas) return {width: 0, drawn: 0, colours: 0};
  const copy = document.createElement('canvas');
  copy.width = canvas.width; copy.height = canvas.height;
  const ctx = copy.getContext('2d');
  ctx.drawImage(canvas, 0, 0);
  const px = ctx.getImageData(0, 0, copy.width, copy.height).data;
  const bg = [px[0], px[1], px[2]];
  let drawn = 0;
  const colours = new Set();
  for (let i = 0; i < px.length; i += 4) {
    if (Math.abs(px[i] - bg[0]) + Math.abs(px[i + 1] - bg[1]) + Math.abs(px[i + 2] - bg[2]) > 30) drawn++;
    colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
  }
  return {width: canvas.width, height: canvas.height, drawn: drawn / (px.length / 4), colours: colours.size};
})()
"""

RECT_JS = r"""
(() => {
  const f = document.querySelector('figure.rbtutor-motion3d');
  // the theme's sticky header would cover part of the screenshot
  document.querySelectorAll('.bd-header, .bd-header-article, .skip-link')
    .forEach(e => { e.style.visibility = 'hidden'; });
  f.scrollIntoView({block: 'center'});
  const r = f.getBoundingClientRect();
  const still = f.querySelector('.rbtutor-motion3d-still');
  const view = f.querySelector('.rbtutor-motion3d-view');
  return {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height,
          stillShown: still.getBoundingClientRect().width > 0 && still.naturalWidth > 0,
          viewShown: view.getBoundingClientRect().width > 0};
})()
"""


def _expected_cells(scene: motion3d.Scene, k: int) -> list[str]:
    """The readout of frame k as the script formats it: t, angles in degrees (0.1), parameters (0.001)."""
    digits = 2 if scene.t[1] - scene.t[0] < 0.1 else 1

    def fmt(value, d):
        text = f"{value:.{d}f}"
        return text.lstrip("-") if float(text) == 0.0 else text

    return ([fmt(scene.t[k], digits)] + [fmt(a, 1) for a in np.degrees(scene.angles[k])]
            + [fmt(q, 3) for q in scene.parameters[k]])


def _load(browser, url: str) -> list[dict]:
    since = len(browser.events)
    browser.send("Page.navigate", {"url": url})
    browser.wait_event("Page.loadEventFired", since)
    deadline = time.monotonic() + 20
    while browser.evaluate(STATE_JS)["state"] != "ready" and time.monotonic() < deadline:
        time.sleep(0.2)
    return browser.events[since:]


def _key(browser, key: str, code: int) -> None:
    for kind in ("rawKeyDown", "keyUp"):
        browser.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": key,
                                                "windowsVirtualKeyCode": code})


@pytest.fixture(scope="module")
def browser(pages):
    with headless_chromium("chromium-motion3d.log", block_web=True) as chromium:
        yield chromium


@pytest.mark.parametrize("name", sorted(PAGES))
def test_viewer_works_offline_in_chromium(browser, pages, name):
    """Offline: no request leaves the book, no error; the canvas draws; Play advances the time; the End key
    on the slider shows the last frame's numbers; print shows the still instead of the view."""
    scene = motion3d.compute_scene(name)
    events = _load(browser, pages[name].as_uri())
    requested = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    assert requested
    assert all(url.startswith(LOCAL_SCHEMES) for url in requested), requested
    errors = [e for e in events if e.get("method") == "Runtime.exceptionThrown"
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error")]
    assert not errors, errors

    state = browser.evaluate(STATE_JS)
    assert state["state"] == "ready", state
    assert state["webgl"] == "yes", state
    assert state["cells"] == _expected_cells(scene, 0)
    pixels = browser.evaluate(PIXELS_JS)
    assert pixels["width"] > 300, pixels
    assert pixels["drawn"] > 0.02, pixels
    assert pixels["colours"] > 20, pixels

    ARTIFACTS.mkdir(exist_ok=True)
    # At speed 1x, one second of play moves the time on by about a second.
    browser.evaluate("document.querySelector('figure.rbtutor-motion3d .rbtutor-motion3d-play').click()")
    time.sleep(1.0)
    playing = browser.evaluate(STATE_JS)
    assert playing["play"] == "Pause", playing
    assert playing["frame"] > 0, playing
    assert 0.0 < float(playing["cells"][0]) < 3.5, playing
    browser.evaluate("document.querySelector('figure.rbtutor-motion3d .rbtutor-motion3d-play').click()")
    rect = browser.evaluate(RECT_JS)
    clip = {"x": rect["x"], "y": rect["y"], "width": rect["width"], "height": rect["height"], "scale": 1}
    shot = browser.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
    (ARTIFACTS / f"motion3d-{name}.png").write_bytes(base64.b64decode(shot["data"]))

    browser.evaluate("document.querySelector('figure.rbtutor-motion3d .rbtutor-motion3d-time').focus()")
    _key(browser, "End", 35)
    last = browser.evaluate(STATE_JS)
    assert last["frame"] == len(scene.t) - 1
    assert last["play"] == "Play"
    assert last["cells"] == _expected_cells(scene, len(scene.t) - 1), last
    # the body is drawn where rbtutor puts it: O, and the body x and z axes as columns of R (GCS, z0 up)
    rot = ep.rotation_matrix_ep(scene.parameters[-1])
    assert np.allclose(last["pose"]["origin"], scene.position[-1], rtol=0.0, atol=1e-3)
    assert np.allclose(last["pose"]["x"], rot[:, 0], rtol=0.0, atol=1e-5)
    assert np.allclose(last["pose"]["z"], rot[:, 2], rtol=0.0, atol=1e-5)

    assert browser.evaluate(RECT_JS)["viewShown"]
    browser.send("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        printed = browser.evaluate(RECT_JS)
        assert printed["stillShown"], printed
        assert not printed["viewShown"], printed
        clip = {"x": printed["x"], "y": printed["y"], "width": printed["width"], "height": printed["height"],
                "scale": 1}
        shot = browser.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
        (ARTIFACTS / f"motion3d-{name}-print.png").write_bytes(base64.b64decode(shot["data"]))
    finally:
        browser.send("Emulation.setEmulatedMedia", {"media": ""})


AXE_FIGURE_JS = (
    "axe.run(document.querySelector('figure.rbtutor-motion3d'), {resultTypes: ['violations']})"
    ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
    " nodes: v.nodes.map(n => n.html.slice(0, 160))})))"
)
# Elements of the figure that reach past the right edge of the screen.
OVERFLOW_JS = r"""
[...document.querySelectorAll('figure.rbtutor-motion3d, figure.rbtutor-motion3d *')]
  .filter(e => e.getClientRects().length && e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
  .map(e => e.tagName + '.' + e.className)
"""


@pytest.mark.parametrize("name", sorted(PAGES))
def test_viewer_passes_axe(browser, pages, name):
    """axe-core finds no serious or critical violation inside the figure, at desktop and at phone width,
    where nothing of the figure reaches past the screen."""
    if not AXE_JS.is_file():
        reason = f"axe-core not found at {AXE_JS}: run `make bootstrap`"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    for width, mobile in ((1280, False), (390, True)):
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile})
        try:
            _load(browser, pages[name].as_uri())
            browser.evaluate(AXE_JS.read_text(encoding="utf-8") + "\n;true")
            violations = browser.evaluate(AXE_FIGURE_JS, timeout=120)
            overflow = browser.evaluate(OVERFLOW_JS)
        finally:
            browser.send("Emulation.setDeviceMetricsOverride",
                         {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        serious = [v for v in violations if v["impact"] in {"serious", "critical"}]
        assert not serious, (width, serious)
        assert not overflow, (width, overflow)
