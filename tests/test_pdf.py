"""`make pdf` prints a course text: no web-only labels or raw TeX, answers only in the instructor
edition, a prose edition without the cells' code, no half-empty pages, a contents list with the
right page numbers, and a clean outline; and it waits on Chromium by progress, not by a fixed time.

The single-page HTML build is made once, as `make pdf` does (or taken from
RBTUTOR_BOOK_SINGLEHTML), and printed in the three editions by book/_ext/print_pdf.py, the book
typeset once (`make pdf EDITION=all`).
Printing needs Chromium: without it these tests are skipped locally and fail in CI.
"""

from __future__ import annotations

import doctest
import functools
import html
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pypdfium2
import pytest
from pypdf import PdfReader

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import pdf_outline  # noqa: E402
from chromium_cdp import CHROMIUM, CDPError, chromium_available  # noqa: E402
from conftest import Chromium  # noqa: E402
from print_pdf import single_page  # noqa: E402

# The same command as JB_SINGLEHTML in the Makefile (`make pdf`).
SINGLEHTML_ARGS = ["build", ".", "--all", "-W", "--keep-going", "--builder", "singlehtml",
                   "--path-output", "_build/pdf"]
SINGLEHTML_ENV = "RBTUTOR_BOOK_SINGLEHTML"

# TeX that MathJax should have typeset: seen as text, it was not. Delimiters never occur in the
# printed code; commands do (Matplotlib labels), so those are looked for in the prose only.
RAW_TEX = ["$$", "\\(", "\\)", "\\[", "\\]", "\\begin{"]
RAW_TEX_IN_PROSE = [*RAW_TEX, "$\\", "\\frac", "\\boldsymbol", "\\mathbf", "\\partial", "\\left",
                    "\\dot{", "\\vec", "\\top", "^{", "_{"]
# Labels that only make sense on a screen.
WEB_LABELS = ["Show code cell", "Hide code cell", "Show the ", "Hide the ", "Click to show",
              "Toggle", "Skip to main content", "Back to top", "Ctrl+K", "Copy to clipboard",
              "Download this page", "Decrease speed", "Increase speed", "Play backwards",
              "First frame", "Last frame"]
ANSWER_CAPTION = "Answers for the reference ship (Problem 1)"
EDITIONS = ["student", "instructor", "prose"]
# The printed area of a page (rbtutor-print.css: A4, margins 16 mm top and 18 mm bottom), and the
# largest share of it a page inside a chapter may leave empty below its last line.
PAGE_MARGINS_MM = (16, 18)
MAX_EMPTY_SHARE = 0.5
LEFT_OUT_NOTE = "The answers are printed in the instructor edition."


def test_outline_titles_write_formulas_as_text():
    """The TeX-to-text conversion of outline titles (its doctests) and a few headings of the book."""
    failures, _ = doctest.testmod(pdf_outline, verbose=False)
    assert failures == 0
    convert = pdf_outline.tex_to_text
    assert convert(r"\dot{\boldsymbol\theta} = \tfrac14 G^\top\vec\omega") == "θ̇ = 1/4 Gᵀω"
    assert convert(r"G_b") == "G_b"
    assert convert(r"G_0") == "G₀"
    assert convert(r"GM") == "GM"
    assert convert(r"z_G") == "z_G"
    title = pdf_outline.entry_title([{"text": "The matrices "}, {"tex": "G_b"}, {"text": " and "},
                                     {"tex": "G_0"}])
    assert title == "The matrices G_b and G₀"


def test_makefile_builds_the_pdf_the_same_way():
    """`make pdf` and these tests run the same jupyter-book command and the same printer."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^JB_SINGLEHTML\s*:=\s*(.+)$", makefile, re.MULTILINE)
    assert match, "JB_SINGLEHTML not found in Makefile"
    assert match.group(1).split() == ["jb", *SINGLEHTML_ARGS]
    assert "book/_ext/print_pdf.py _build/pdf/_build/singlehtml/index.html" in makefile


@pytest.fixture(scope="module")
def singlehtml(request) -> Path:
    """The singlehtml build of the book (built here as `make pdf` does unless given), after the
    run's HTML build: that one executes the notebooks into the cache both builds read, and this
    one then only renders (two builds at once would each execute them)."""
    if not chromium_available():
        message = f"{CHROMIUM} is missing: the PDF cannot be printed"
        if os.environ.get("CI"):
            pytest.fail(message + " (required in CI)", pytrace=False)
        pytest.skip(message)
    if os.environ.get(SINGLEHTML_ENV):
        return Path(os.environ[SINGLEHTML_ENV]).resolve()
    from conftest import VENV_BIN, build_env, offline_argv

    request.getfixturevalue("built_book")
    proc = subprocess.run(offline_argv([str(VENV_BIN / "jb"), *SINGLEHTML_ARGS]), cwd=ROOT,
                          env=build_env(), capture_output=True, text=True, check=False)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "pdf-singlehtml.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    assert proc.returncode == 0, f"singlehtml build failed:\n{proc.stderr[-3000:]}"
    return ROOT / "_build" / "pdf" / "_build" / "singlehtml" / "index.html"


@pytest.fixture(scope="module")
def printed(singlehtml: Path) -> dict[str, Path]:
    """The three editions, printed as `make pdf EDITION=all` does: the book typeset once."""
    from conftest import offline_argv
    from print_pdf import EDITION_FILES

    folder = ARTIFACTS / "pdf"
    folder.mkdir(parents=True, exist_ok=True)
    argv = offline_argv([sys.executable, str(ROOT / "book" / "_ext" / "print_pdf.py"), str(singlehtml), str(folder),
                         "--edition", "all"])
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, timeout=3600)
    assert proc.returncode == 0, f"print_pdf.py --edition all failed:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return {edition: folder / name for edition, name in EDITION_FILES.items()}


@dataclass(frozen=True, eq=False)
class Edition:
    """One printed edition: its file, whose text pdfium reads (:func:`page_runs`), and pypdf's
    reading of it for what the tests take from the PDF's structure (outline, links, named places)."""

    path: Path
    reader: PdfReader


@pytest.fixture(scope="module")
def student(printed) -> Edition:
    return Edition(printed["student"], PdfReader(printed["student"]))


@pytest.fixture(scope="module")
def instructor(printed) -> Edition:
    return Edition(printed["instructor"], PdfReader(printed["instructor"]))


@pytest.fixture(scope="module")
def prose(printed) -> Edition:
    return Edition(printed["prose"], PdfReader(printed["prose"]))


@functools.cache
def page_runs(edition: Edition) -> tuple[tuple[str, tuple[tuple[str, str, float], ...]], ...]:
    """Each page of an edition as its text and its runs of text (text, font name, distance of the
    run's left edge from the page's), read by pdfium in one pass: the student edition in 10.1-11.6
    CPU s, where pypdf's text extraction took 31.1-33.3 (2026-12-08, two runs each beside a test
    run). pdfium reads a page in the order its lines stand and writes ligatures as their letters
    ("fi", not "\ufb01"); both read the same words."""
    document = pypdfium2.PdfDocument(edition.path)
    try:
        pages = []
        for page in document:
            textpage = page.get_textpage()
            runs = tuple((run.extract(), run.get_font().get_base_name(), run.get_bounds()[0])
                         for run in page.get_objects(filter=[pypdfium2.raw.FPDF_PAGEOBJ_TEXT], max_depth=8,
                                                     textpage=textpage))
            pages.append((textpage.get_text_range(), runs))
        return tuple(pages)
    finally:
        document.close()


@functools.cache
def image_count(pdf: Path) -> int:
    """How many pictures a PDF's pages draw, those inside forms too. pdfium counts the student
    edition's in 1.8 CPU s, pypdf's ``page.images`` in 21.6 (41 both)."""
    document = pypdfium2.PdfDocument(pdf)
    try:
        return sum(1 for page in document
                   for _ in page.get_objects(filter=[pypdfium2.raw.FPDF_PAGEOBJ_IMAGE], max_depth=8))
    finally:
        document.close()


def page_texts(edition: Edition) -> tuple[str, ...]:
    """The text of each page of an edition."""
    return tuple(text for text, _ in page_runs(edition))


def pdf_text(edition: Edition) -> str:
    return "\n".join(page_texts(edition))


def prose_text(edition: Edition) -> list[str]:
    """The text of each page set in a proportional font: everything but the printed code."""
    return ["".join(text for text, font, _ in runs if "Mono" not in font and "Courier" not in font)
            for _, runs in page_runs(edition)]


def outline_entries(edition: Edition) -> list[tuple[int, str, int]]:
    """(depth, title, 1-based page) of every outline entry, in order."""
    reader = edition.reader
    found = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                found.append((depth, item.title, reader.get_destination_page_number(item) + 1))

    walk(reader.outline, 0)
    return found


@pytest.mark.parametrize("edition", EDITIONS)
def test_no_raw_tex_and_no_web_labels(edition, request):
    """Neither edition shows TeX source or a label of the web page (buttons, fold toggles)."""
    printed = request.getfixturevalue(edition)
    text = pdf_text(printed)
    raw = {s: text.count(s) for s in RAW_TEX if s in text}
    assert not raw, f"raw TeX in the {edition} PDF: {raw}"
    raw_prose = [(number, s, page[max(0, page.find(s) - 40):page.find(s) + 40])
                 for number, page in enumerate(prose_text(printed), start=1) for s in RAW_TEX_IN_PROSE if s in page]
    assert not raw_prose, f"raw TeX in the prose of the {edition} PDF (page, what, where): {raw_prose[:8]}"
    labels = {s: text.count(s) for s in WEB_LABELS if s in text}
    assert not labels, f"web-only labels in the {edition} PDF: {labels}"


def test_answers_only_in_the_instructor_edition(student, instructor):
    """The instructor edition prints the answers and worked solutions; the student edition
    says where they are instead, and prints the hints."""
    student_text, instructor_text = pdf_text(student), pdf_text(instructor)
    for marker in [ANSWER_CAPTION, "Worked solution of Problem 8(d)"]:
        assert marker in instructor_text, f"{marker!r} missing from the instructor edition"
        assert marker not in student_text, f"{marker!r} printed in the student edition"
    assert student_text.count(LEFT_OUT_NOTE) >= 11, student_text.count(LEFT_OUT_NOTE)
    assert LEFT_OUT_NOTE not in instructor_text
    for text in (student_text, instructor_text):
        assert "Hints for Problem 1" in text
        assert "Hints for Problem 11" in text
    assert "Instructor edition" in instructor_text[:2000]
    assert "Student edition" in student_text[:2000]


def test_animation_printed_as_a_still(student):
    """The Problem 10 animation is one frame with a caption, not its controls."""
    text = pdf_text(student)
    assert "A still of the animation" in text


def test_outline_is_clean_and_nested(student):
    """Outline: parts, chapters and sections, none doubled, formulas as text, no TeX."""
    entries = outline_entries(student)
    titles = [t for _, t, _ in entries]
    assert len(entries) >= 60, len(entries)
    doubled = [t for t in titles if len(t) % 2 == 0 and len(t) > 2 and t[: len(t) // 2] == t[len(t) // 2:]]
    assert not doubled, f"doubled outline entries: {doubled}"
    assert not [t for t in titles if re.search(r"[\\${}]", t)], "TeX left in the outline"
    assert not [t for t in titles if t != t.strip() or "  " in t or not t], "outline titles with gaps"
    top = [t for d, t, _ in entries if d == 0]
    for part in ["Getting started", "Rigid-body dynamics", "Euler parameters", "Exercises and reference"]:
        assert part in top, f"part {part!r} not at the top of the outline: {top}"
    # formulas in headings are kept as text
    assert any("Ṙ" in t for t in titles), "the heading with Ṙ Rᵀ lost its formula"
    assert any("G_b" in t and "G₀" in t for t in titles), "the heading on G_b and G_0 lost its formulas"
    assert any(t.startswith("Euler parameters as second-order coordinates") for t in titles)


def test_contents_list_has_the_right_page_numbers(student):
    """The printed contents list gives, for each chapter, the page its outline entry points to."""
    entries = outline_entries(student)
    first_chapter = min(page for _, _, page in entries)  # the contents list runs until the book starts
    front = "\n".join(page_texts(student)[:first_chapter - 1])
    assert "Contents" in front
    checked, position = 0, 0
    for depth, title, page in entries:
        # the entries come in the same order in both; titles with formulas are compared as text elsewhere
        if depth != 1 or len(title) < 12 or not re.fullmatch(r"[\w ,’'()-]+", title):
            continue
        match = re.compile(re.escape(title) + r"\s*(\d+)\b").search(front, position)
        assert match, f"chapter {title!r} not in the contents list (after character {position})"
        assert int(match.group(1)) == page, f"{title!r}: contents says {match.group(1)}, it is on page {page}"
        position = match.end()
        checked += 1
    assert checked >= 8, f"only {checked} chapters checked"


def test_text_stays_inside_the_page(student):
    """No text runs past the right edge of the page (wide formulas and tables are scaled)."""
    pages = zip(student.reader.pages, page_runs(student), strict=True)
    overflow = [(number, round(x), text[:30]) for number, (page, (_, runs)) in enumerate(pages, start=1)
                for text, _, x in runs if text.strip() and x > float(page.mediabox.width) - 10]
    assert not overflow, f"text beyond the right margin: {overflow[:10]}"


def test_pdf_has_the_whole_book(student, printed):
    """The student edition has pages, the text of the chapters and the reference pages, figures,
    internal links (cross-references and the outline) and no raw TeX."""
    pages = page_texts(student)
    text = "\n".join(pages)
    assert len(pages) >= 40, f"only {len(pages)} pages"
    for needle in ["Euler parameters", "The 13-state model", "Coriolis", "Glossary", "References",
                   "Handbook of Marine Craft Hydrodynamics", "Metacentric height"]:
        assert needle in text, f"{needle!r} not in the PDF text"
    raw = [s for s in RAW_TEX if s in text]
    assert not raw, f"raw TeX in the PDF: {raw}"
    images = image_count(printed["student"])
    assert images >= 5, f"only {images} images in the PDF"
    links = [annot.get_object() for page in student.reader.pages for annot in page.get("/Annots") or []]
    internal = [a for a in links if (a.get("/Subtype") == "/Link" and "/Dest" in a)
                or (a.get("/A") or {}).get("/S") == "/GoTo"]
    assert len(internal) >= 50, f"only {len(internal)} internal links (cross-references)"
    assert student.reader.outline, "the PDF has no outline (bookmarks)"


def squeezed(text: str) -> str:
    """Text without any white space: a printed line may wrap where the HTML's does not."""
    return re.sub(r"\s+", "", text)


def plain(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


# A code cell of the single-page build and, when it printed text, its first output.
CELL = re.compile(r'<div class="cell_input[^"]*">\s*<div class="highlight-ipython3 notranslate">'
                  r'<div class="highlight"><pre>(.*?)</pre></div>\s*</div>\s*</div>\s*'
                  r'(?:<div class="cell_output docutils container">\s*<div class="output stream '
                  r'highlight-myst-ansi notranslate"><div class="highlight"><pre>(.*?)</pre>)?', re.S)


def cell_lines(index: Path) -> list[tuple[str, str]]:
    """(a line of code, a line it printed or '') for the book's code cells: the code line is one
    that occurs once in the whole page, so that it cannot be met outside its cell."""
    page = single_page(index).read_text(encoding="utf-8")
    whole = squeezed(plain(page))
    samples = []
    for code, output in CELL.findall(page):
        lines = [line.strip() for line in plain(code).splitlines() if 30 <= len(line.strip()) <= 70]
        lines = [line for line in lines if not line.startswith("#") and whole.count(squeezed(line)) == 1]
        printed = [line.strip() for line in plain(output).splitlines() if 12 <= len(line.strip()) <= 70]
        if lines:
            samples.append((lines[0], printed[0] if printed else ""))
    return samples


def test_prose_edition_prints_results_not_code(student, prose, singlehtml, printed):
    """The prose edition leaves out the code of every cell and keeps what the cells printed, their
    figures and the hints; it is shorter than the student edition and says what it is."""
    student_text, prose_text = pdf_text(student), pdf_text(prose)
    in_student, in_prose = squeezed(student_text), squeezed(prose_text)
    samples = [(code, printed) for code, printed in cell_lines(singlehtml) if squeezed(code) in in_student]
    assert len(samples) >= 50, f"only {len(samples)} cells whose code the student edition prints"
    code_left = [code for code, _ in samples if squeezed(code) in in_prose]
    assert not code_left, f"code printed in the prose edition: {code_left[:5]}"
    results = [printed for _, printed in samples if printed and squeezed(printed) in in_student]
    assert len(results) >= 10, f"only {len(results)} printed results to look for"
    lost = [printed for printed in results if squeezed(printed) not in in_prose]
    assert not lost, f"results missing from the prose edition: {lost[:5]}"
    images = [image_count(printed[edition]) for edition in ("student", "prose")]
    assert images[1] == images[0] >= 5, f"images (student, prose): {images}"
    pages = len(page_texts(prose)), len(page_texts(student))
    assert 40 <= pages[0] < pages[1], pages
    assert "Prose edition" in prose_text[:2000]
    assert "Hints for Problem 1" in prose_text
    assert LEFT_OUT_NOTE in prose_text


def chapter_start_pages(reader) -> set[int]:
    """The pages (1-based) on which a chapter starts: print_layout.py names each chapter's heading."""
    return {reader.get_destination_page_number(destination) + 1
            for name, destination in reader.named_destinations.items()
            if name.lstrip("/").startswith("rbtutor-chapter-")}


def empty_shares(pdf: Path) -> list[float]:
    """For each page, the share of its printed area below the last mark (text, line or picture)."""
    document = pypdfium2.PdfDocument(pdf)
    scale = 0.5  # 36 dots per inch
    shares = []
    for page in document:
        pixels = page.render(scale=scale, grayscale=True).to_numpy()
        pixels = pixels[..., 0] if pixels.ndim == 3 else pixels
        top, bottom = (round(mm / 25.4 * 72 * scale) for mm in PAGE_MARGINS_MM)
        area = pixels[top:pixels.shape[0] - bottom]
        marked = np.flatnonzero((area < 250).any(axis=1))
        shares.append(1 - (marked[-1] + 1) / area.shape[0] if marked.size else 1.0)
    document.close()
    return shares


@pytest.mark.parametrize("edition", ["student", "prose"])
def test_no_half_empty_pages(edition, request, printed):
    """Inside a chapter no page is left more than half empty (a figure or table that does not fit
    moves on, or breaks, without leaving a gap); only a chapter's last page may end early."""
    reader = request.getfixturevalue(edition).reader
    starts = chapter_start_pages(reader)
    assert len(starts) >= 40, f"only {len(starts)} chapter starts named in the PDF"
    shares = empty_shares(printed[edition])
    assert len(shares) == len(reader.pages)
    chapter_ends = {page - 1 for page in starts} | {len(shares)}
    gaps = [(page, round(share, 2)) for page, share in enumerate(shares, start=1)
            if page >= min(starts) and page not in chapter_ends and share > MAX_EMPTY_SHARE]
    assert not gaps, f"pages of the {edition} edition more than half empty (page, share): {gaps}"


# The waiting logic, with the real Chromium: a page script that keeps the browser busy.
BUSY_JS = ("(async () => { console.log('busy'); await new Promise(r => setTimeout(r, 0)); "
           "const end = Date.now() + %d; let n = 0; while (Date.now() < end) n++; return n > 0; })()")
FOREVER_BUSY_JS = ("(async () => { console.log('busy'); await new Promise(r => setTimeout(r, 0)); "
                   "while (true) {} })()")


@pytest.fixture
def browser(tmp_path):
    """A headless Chromium of this test's own (offline where possible), with one blank tab."""
    if not chromium_available():
        message = f"{CHROMIUM} is missing"
        if os.environ.get("CI"):
            pytest.fail(message + " (required in CI)", pytrace=False)
        pytest.skip(message)
    chromium = Chromium(CHROMIUM, tmp_path / "profile", tmp_path / "chromium.log")
    try:
        chromium.open_page()
        yield chromium
    finally:
        chromium.close()


def test_a_busy_browser_is_waited_for(browser):
    """A call that keeps Chromium working three times as long as the stall limit succeeds when
    waited on by progress; a fixed limit of that length (the old way) gives up on the same call."""
    stall = 2.0
    with pytest.raises(CDPError, match=r"no reply to Runtime\.evaluate within 2 s"):
        browser.evaluate(BUSY_JS % 6000, timeout=stall)
    assert browser.evaluate("1 + 1", timeout=120) == 2  # answered once the busy call is over
    started = time.monotonic()
    assert browser.evaluate(BUSY_JS % 6000, timeout=300, stall=stall) is True
    assert time.monotonic() - started >= 3 * stall


def test_a_stalled_browser_fails_clearly(browser):
    """A call the browser neither works on nor answers fails after the stall limit, saying so,
    long before the overall limit."""
    started = time.monotonic()
    stalled = r"Chromium stalled: no message and .* while waiting for the reply to Runtime\.evaluate"
    with pytest.raises(CDPError, match=stalled):
        browser.evaluate("new Promise(() => {})", timeout=600, stall=3)
    assert time.monotonic() - started < 60


def test_a_browser_that_dies_fails_at_once(browser):
    """When Chromium dies during a long call, the wait ends at once with the reason."""
    since = len(browser.events)

    def kill_when_busy():
        browser.wait_event("Runtime.consoleAPICalled", since, timeout=120)
        os.kill(browser.proc.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    started = time.monotonic()
    with pytest.raises(CDPError, match=r"closed the connection|exited"):
        browser.evaluate(FOREVER_BUSY_JS, timeout=600, stall=300)
    killer.join()
    assert time.monotonic() - started < 60
