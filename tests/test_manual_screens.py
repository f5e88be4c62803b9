"""The guides' screenshots: tracked in git, taken by the hub test, described for those who cannot see them.

The pages of the Student guide (``book/manual/student/``) and of the Instructor guide
(``book/manual/instructor/``) show screenshots of the real hub. ``tests/test_hub.py`` takes them
(``Session.shot(name)`` saves ``test-artifacts/hub/<name>.png``), ``make screenshots`` copies the ones
a guide shows into its ``screens/`` folder, and the book builds from that copy. These tests read the
guides' pages and the hub test's source, so a page cannot show a screen that is not in the
repository, nor one the hub test no longer takes, nor a figure without a description.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: each guide with screens, and the fewest screens it shows
GUIDES = {ROOT / "book" / "manual" / "student": 5, ROOT / "book" / "manual" / "instructor": 4}
HUB_TEST = ROOT / "tests" / "test_hub.py"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: fewer words than this is a label, not a description of a screen
MIN_ALT_WORDS = 12

# a MyST directive fence (``` or :::) that opens a figure or an image, and its argument
DIRECTIVE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<kind>figure|image)\}\s*(?P<src>\S*)\s*$")
OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
MARKDOWN_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)[^)]*\)")
HTML_IMAGE = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
HTML_ATTRIBUTE = re.compile(r"""\b(?P<key>src|alt)\s*=\s*(?P<quote>["'])(?P<value>.*?)(?P=quote)""", re.IGNORECASE)


@dataclass(frozen=True)
class Shown:
    """One image a page of the guide shows."""

    page: Path
    line: int
    src: str
    alt: str | None
    caption: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def images_of(page: Path) -> list[Shown]:
    """Every image ``page`` shows: figure and image directives, markdown images and ``<img>`` tags."""
    lines = page.read_text(encoding="utf-8").splitlines()
    shown: list[Shown] = []
    k = 0
    while k < len(lines):
        opened = DIRECTIVE.match(lines[k].strip())
        if not opened:
            for match in MARKDOWN_IMAGE.finditer(lines[k]):
                shown.append(Shown(page, k + 1, match["src"], match["alt"].strip() or None, ""))
            for tag in HTML_IMAGE.findall(lines[k]):
                attributes = {m["key"].lower(): m["value"] for m in HTML_ATTRIBUTE.finditer(tag)}
                shown.append(Shown(page, k + 1, attributes.get("src", ""), attributes.get("alt"), ""))
            k += 1
            continue
        start, options, body = k, {}, []
        k += 1
        while k < len(lines) and (option := OPTION.match(lines[k].strip())):
            options[option["key"]] = option["value"].strip()
            k += 1
        while k < len(lines) and lines[k].strip() != opened["fence"]:
            body.append(lines[k].strip())
            k += 1
        shown.append(Shown(page, start + 1, opened["src"], options.get("alt") or None, " ".join(body).strip()))
        k += 1
    return shown


def guide_images(guides=GUIDES) -> list[Shown]:
    return [image for guide in guides for page in sorted(guide.glob("*.md")) for image in images_of(page)]


def shot_names(source: str) -> list[tuple[str, re.Pattern]]:
    """The names ``shot(...)`` is called with in ``source``, each as its text and a pattern.

    A literal name is matched as it is; in an f-string name each replacement field stands for
    one word of letters, digits, ``_`` or ``-`` (``f"01-{student}-logged-in"`` takes
    ``01-student1-logged-in``).
    """
    names = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if called != "shot":
            continue
        name = node.args[0]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            names.append((name.value, re.compile(re.escape(name.value))))
        elif isinstance(name, ast.JoinedStr):
            pattern = "".join(re.escape(part.value) if isinstance(part, ast.Constant) else r"[A-Za-z0-9_-]+"
                              for part in name.values)
            names.append((ast.unparse(name), re.compile(pattern)))
    return names


def taken_by_the_hub_test(stem: str, names) -> bool:
    return any(pattern.fullmatch(stem) for _, pattern in names)


# --------------------------------------------------------------------------- the parsers themselves


def test_the_parsers_read_figures_markdown_images_and_shot_calls(tmp_path):
    """The page parser finds each kind of image with its alt text; the shot parser reads literal and f-string names."""
    page = tmp_path / "page.md"
    page.write_text("(label)=\n# Title\n\n```{figure} screens/a.png\n:alt: what the screen shows\n:width: 100%\n\n"
                    "The caption.\n```\n\nText ![the b screen](screens/b.png) and <img src='screens/c.png'>.\n\n"
                    ":::{image} screens/d.png\n:::\n", encoding="utf-8")
    found = {image.src: (image.alt, image.caption) for image in images_of(page)}
    assert found == {"screens/a.png": ("what the screen shows", "The caption."),
                     "screens/b.png": ("the b screen", ""), "screens/c.png": (None, ""), "screens/d.png": (None, "")}

    names = shot_names('s.shot(f"01-{student}-logged-in")\nteacher.shot("07-instructor-x")\nshot("plain")\n'
                       'page.screenshot(path="99-other.png")\n')
    assert [text for text, _ in names] == ["f'01-{student}-logged-in'", "07-instructor-x", "plain"]
    assert taken_by_the_hub_test("01-student1-logged-in", names)
    assert taken_by_the_hub_test("07-instructor-x", names)
    assert not taken_by_the_hub_test("01-student1-logged-in-twice", names)
    assert not taken_by_the_hub_test("01-../student1-logged-in", names)  # a field is one word, not a path
    assert not taken_by_the_hub_test("99-other", names)


# --------------------------------------------------------------------------- the guide


@pytest.mark.parametrize("guide", list(GUIDES), ids=lambda guide: guide.name)
def test_the_guide_shows_screenshots(guide):
    """Each guide shows screens of the hub (so the checks below have something to check)."""
    assert guide.is_dir(), f"no guide at {guide.relative_to(ROOT)}"
    shown = guide_images([guide])
    assert len(shown) >= GUIDES[guide], [image.where for image in shown]


def test_every_image_of_the_guide_is_a_png_in_its_screens_folder():
    """Each image a page shows is a file of its guide's screens/ folder, in git, so the book builds without a hub."""
    for image in guide_images():
        path = (image.page.parent / image.src).resolve()
        screens = image.page.parent / "screens"
        assert path.parent == screens, f"{image.where}: {image.src} is not in {screens.relative_to(ROOT)}/"
        assert path.is_file(), f"{image.where}: {image.src} does not exist (make screenshots copies it)"
        assert path.read_bytes()[:8] == PNG_MAGIC, f"{image.where}: {image.src} is not a PNG file"


def test_every_screen_the_guide_shows_is_one_the_hub_test_takes():
    """A screen's name is one that tests/test_hub.py passes to shot(), so make screenshots can take it again."""
    names = shot_names(HUB_TEST.read_text(encoding="utf-8"))
    assert names, f"no shot(...) call found in {HUB_TEST.relative_to(ROOT)}"
    for image in guide_images():
        stem = Path(image.src).stem
        assert taken_by_the_hub_test(stem, names), (
            f"{image.where}: {image.src} is not a screen tests/test_hub.py takes; it takes "
            f"{[text for text, _ in names]}")


def test_every_figure_has_alt_text_that_describes_the_screen():
    """Each image has alt text of a sentence or more, which is neither its file name nor its caption."""
    for image in guide_images():
        assert image.alt, f"{image.where}: {image.src} has no alt text"
        words = re.findall(r"[A-Za-z0-9]+", image.alt)
        assert len(words) >= MIN_ALT_WORDS, (
            f"{image.where}: the alt text of {image.src} ({image.alt!r}) is too short to say what is on screen")
        assert Path(image.src).stem not in image.alt, f"{image.where}: the alt text of {image.src} is its file name"
        assert image.alt.strip().rstrip(".") != image.caption.strip().rstrip("."), (
            f"{image.where}: the alt text of {image.src} repeats its caption; say what the screen shows")


def test_no_screen_is_kept_that_the_guide_does_not_show():
    """Every file of a screens folder is shown by a page (make screenshots refreshes only those), and a
    guide keeps no image outside it."""
    shown = {(image.page.parent / image.src).resolve() for image in guide_images()}
    for guide in GUIDES:
        screens = guide / "screens"
        unshown = sorted(path.name for path in screens.iterdir() if path.resolve() not in shown)
        assert not unshown, f"files in {screens.relative_to(ROOT)}/ that no page of the guide shows: {unshown}"
        loose = sorted(path.name for path in guide.glob("*.png"))
        assert not loose, f"images in {guide.relative_to(ROOT)}/ outside screens/ (make screenshots cannot renew them)"


# --------------------------------------------------------------------------- make screenshots


def make_screenshots(course: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-C", str(course),
                           "screenshots"], capture_output=True, text=True, timeout=60)


def _scratch_guides(tmp_path: Path) -> tuple[list[Path], Path, list[Path]]:
    """A copy of the guides' pages in ``tmp_path``, an empty hub-test folder beside it, and the screens
    the guides show (each as its path under ``tmp_path``)."""
    copies = []
    for guide in GUIDES:
        copy = tmp_path / guide.relative_to(ROOT)
        (copy / "screens").mkdir(parents=True)
        for page in guide.glob("*.md"):
            shutil.copy2(page, copy / page.name)
        copies.append(copy)
    shots = tmp_path / "test-artifacts" / "hub"
    shots.mkdir(parents=True)
    screens = sorted({tmp_path / image.page.parent.relative_to(ROOT) / "screens" / Path(image.src).name
                      for image in guide_images()})
    return copies, shots, screens


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_screenshots_copies_every_screen_the_guide_shows(tmp_path):
    """In a copy of the guides, make screenshots replaces each shown screen by the hub test's file of that name."""
    guides, shots, screens = _scratch_guides(tmp_path)
    for screen in screens:
        screen.write_bytes(PNG_MAGIC + b"old " + screen.name.encode())
        (shots / screen.name).write_bytes(PNG_MAGIC + b"new " + screen.name.encode())
    (shots / "99-not-shown.png").write_bytes(PNG_MAGIC)

    done = make_screenshots(tmp_path)
    assert done.returncode == 0, done.stderr
    for screen in screens:
        assert screen.read_bytes() == PNG_MAGIC + b"new " + screen.name.encode(), screen
    assert sorted(path for guide in guides for path in (guide / "screens").iterdir()) == screens
    assert all(any(s.parent == guide / "screens" for s in screens) for guide in guides), "a guide got no screen"
    assert f"{len(screens)} screens copied" in done.stdout, done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_screenshots_names_a_missing_screen_and_copies_nothing(tmp_path):
    """When the hub test did not take one of the screens, make screenshots fails, names it and changes no file."""
    _, shots, screens = _scratch_guides(tmp_path)
    for screen in screens:
        screen.write_bytes(PNG_MAGIC + b"old")
        (shots / screen.name).write_bytes(PNG_MAGIC + b"new")
    gone = screens[-1].name
    (shots / gone).unlink()

    failed = make_screenshots(tmp_path)
    assert failed.returncode != 0, failed.stdout
    assert f"test-artifacts/hub/{gone} is missing" in failed.stderr, failed.stderr
    assert all(screen.read_bytes() == PNG_MAGIC + b"old" for screen in screens)
