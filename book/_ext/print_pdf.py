"""Print the single-page HTML build of the book to a PDF with headless Chromium (`make pdf`).

Usage::

    python book/_ext/print_pdf.py SINGLEHTML_INDEX OUTPUT_PDF [--edition student|instructor|prose]
    python book/_ext/print_pdf.py SINGLEHTML_INDEX OUTPUT_FOLDER --edition all

The page is opened from file:// (no network is needed: MathJax and the fonts
come with the build), then this waits until MathJax has typeset every formula
(``MathJax.startup.promise``), every image has loaded and the fonts are ready.
With the print media and the printable width emulated, the page is made a
course text (book/_ext/print_layout.py: folded content printed, answers only in
the instructor edition, no cell code in the prose edition, animations as stills,
wide formulas scaled, a title page and contents list). With ``--edition all`` the
page is typeset once and each edition is made from a copy of the typeset page.
Each edition is printed twice with Chromium's own print engine (CDP
``Page.printToPDF``, the PDF read back as a stream) under the book's print
stylesheet (``rbtutor-print.css``): the first print
tells on which page each heading lands, the second carries those page numbers in
the contents list. Finally the PDF's outline is rebuilt from the contents,
formulas as text (book/_ext/pdf_outline.py). Links inside the book stay links in
the PDF. Exits non-zero with a message when anything is missing.

Laying out and printing a big book on a busy machine can take minutes for one
call, so no call has a fixed short limit: each is waited on while Chromium is
alive and working (book/_ext/chromium_cdp.py), up to ``--timeout`` seconds, and
the print fails, saying why, once Chromium exits or does nothing for ``--stall``
seconds.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from chromium_cdp import CHROMIUM, CDPError, Chromium, chromium_available, settle_js
from pdf_outline import entry_pages, replace_outline
from print_layout import EDITIONS, MARK_AND_KEEP_JS, RESTORE_JS, fill_pages_script, prepare_script

# Reported by the page once MathJax, images and fonts have settled (chromium_cdp.settle_js).
SETTLE_REPORT = r"""{
    mathjax: mathjax,
    math: document.querySelectorAll('.math').length,
    untypeset: [...document.querySelectorAll('.math')].filter(n => !n.querySelector('mjx-container')).length,
    images: document.images.length,
    broken: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(0, 120)),
  }"""

# A4 less the margins of rbtutor-print.css (14 mm each side), in CSS pixels: the
# layout width of the printed page, at which wide content is measured.
PRINT_WIDTH_PX = round((210 - 2 * 14) / 25.4 * 96)
# Page-number passes: the second print normally confirms the first.
MAX_PASSES = 3
# The file of each edition, as `make pdf` names them (``--edition all`` writes the three).
EDITION_FILES = {"student": "rbtutor.pdf", "instructor": "rbtutor-instructor.pdf", "prose": "rbtutor-prose.pdf"}

FOOTER = ('<div style="font-size:8px;width:100%;text-align:center;color:#444;">'
          '<span class="title"></span> &middot; page <span class="pageNumber"></span>'
          ' of <span class="totalPages"></span></div>')


def single_page(index: Path) -> Path:
    """The file that holds the whole book.

    jupyter-book's index.html only redirects to the root document (``book/intro.html``),
    but Sphinx's singlehtml builder writes every link in that page as seen from the
    top folder (``_static/...``, ``_images/...``). A copy of it in the top folder is
    the page whose links all resolve.
    """
    text = index.read_text(encoding="utf-8", errors="replace")
    match = re.search(r'http-equiv="Refresh"\s+content="\d+;\s*url=([^"]+)"', text, re.IGNORECASE)
    if not match:
        return index
    target = index.parent / match.group(1)
    if target.parent == index.parent:
        return target
    page = index.parent / "rbtutor-book.html"
    shutil.copyfile(target, page)
    return page


class Patience:
    """How long one call to Chromium may take: ``timeout`` at most, ``stall`` without progress."""

    def __init__(self, timeout: float, stall: float):
        self.timeout = timeout
        self.stall = stall

    def send(self, browser: Chromium, method: str, params: dict | None = None) -> dict:
        return browser.send(method, params, timeout=self.timeout, stall=self.stall)

    def evaluate(self, browser: Chromium, expression: str):
        return browser.evaluate(expression, timeout=self.timeout, stall=self.stall)


def print_editions(index: Path, outputs: dict[str, Path], timeout: float = 1800.0, stall: float = 120.0) -> dict:
    """Print index (a singlehtml build) as each edition of ``outputs`` ({edition: PDF}) into its file,
    loading and typesetting the book once; return what the page reported, by edition."""
    if not chromium_available():
        raise SystemExit(f"{CHROMIUM} not found or not executable: "
                         "`apt-get install -y --no-install-recommends chromium`")
    if not index.is_file():
        raise SystemExit(f"{index} not found: build the single-page HTML first")
    page = single_page(index)
    patience = Patience(timeout, stall)
    reports = {}
    with tempfile.TemporaryDirectory(prefix="rbtutor-pdf-") as tmp:
        browser = Chromium(CHROMIUM, Path(tmp) / "profile", Path(tmp) / "chromium.log")
        try:
            browser.open_page(width=1100, height=1400, timeout=timeout, stall=stall)
            _say(f"loading {page.name} and typesetting its formulas...")
            loaded = _load(browser, page, patience)
            _say(f"typeset {loaded['math']} formulas and loaded {loaded['images']} images in "
                 f"{loaded['seconds_to_settle']} s")
            patience.send(browser, "Emulation.setEmulatedMedia", {"media": "print"})
            patience.send(browser, "Emulation.setDeviceMetricsOverride", {
                "width": PRINT_WIDTH_PX, "height": 1100, "deviceScaleFactor": 1, "mobile": False})
            patience.evaluate(browser, MARK_AND_KEEP_JS)
            for number, (edition, output) in enumerate(outputs.items()):
                if number:
                    patience.evaluate(browser, RESTORE_JS)
                layout = patience.evaluate(browser, prepare_script(edition))
                report = dict(loaded)
                report.update({k: v for k, v in layout.items() if k != "entries"})
                report["contents"] = len(layout["entries"])
                started = time.monotonic()
                data, pages = _print_with_page_numbers(browser, layout["entries"], patience)
                report["passes"] = pages["passes"]
                printed = time.monotonic()
                output.parent.mkdir(parents=True, exist_ok=True)
                output.write_bytes(replace_outline(data, layout["entries"]))
                _say(f"{edition} edition: {pages['passes']} prints in {printed - started:.0f} s, the outline "
                     f"in {time.monotonic() - printed:.0f} s: {output}")
                reports[edition] = report
        except CDPError as exc:
            log = (Path(tmp) / "chromium.log").read_text(encoding="utf-8", errors="replace")[-3000:]
            raise SystemExit(f"Chromium failed: {exc}\n{log}") from exc
        finally:
            browser.close()
    return reports


def _say(line: str) -> None:
    """A line of progress on the standard error (a whole print takes minutes)."""
    print(line, file=sys.stderr, flush=True)


def _load(browser: Chromium, page: Path, patience: Patience) -> dict:
    """Open the page and wait until MathJax, the images and the fonts have settled; what it reported."""
    since = len(browser.events)
    patience.send(browser, "Page.navigate", {"url": page.resolve().as_uri()})
    browser.wait_event("Page.loadEventFired", since, timeout=patience.timeout, stall=patience.stall)
    started = time.monotonic()
    report = patience.evaluate(browser, settle_js(SETTLE_REPORT, int(patience.timeout * 1000), 30000))
    report["seconds_to_settle"] = round(time.monotonic() - started, 1)
    problems = []
    if report["math"] and report["mathjax"] != "ok":
        problems.append(f"MathJax did not finish: {report['mathjax']}")
    if report["untypeset"]:
        problems.append(f"{report['untypeset']} formulas not typeset")
    if report["broken"]:
        problems.append(f"images that did not load: {report['broken'][:5]}")
    if problems:
        raise SystemExit("cannot print the book: " + "; ".join(problems))
    return report


def _print_once(browser: Chromium, patience: Patience, tagged: bool = True) -> bytes:
    """One print as the print stylesheet says (A4, its margins), page numbers in the footer.

    ``tagged``: with the tags a screen reader follows and Chromium's own outline. A print made
    only to find the pages can go without them: the pages are the same, and the print takes
    18.5 s instead of 22.4-24.7 (the student edition, 2026-12-07)."""
    result = patience.send(browser, "Page.printToPDF", {
        "printBackground": True,
        "preferCSSPageSize": True,
        "displayHeaderFooter": True,
        "headerTemplate": "<div></div>",
        "footerTemplate": FOOTER,
        "generateDocumentOutline": tagged,
        "generateTaggedPDF": tagged,
        "transferMode": "ReturnAsStream",
    })
    return browser.read_stream(result["stream"], timeout=patience.timeout, stall=patience.stall)


def _print_with_page_numbers(browser: Chromium, entries: list[dict], patience: Patience):
    """Print until the page numbers written into the contents list are those the print has; the first
    print, which only finds them, is untagged, and only a tagged print is returned."""
    written: dict[int, int] = {}
    for passes in range(1, MAX_PASSES + 1):
        tagged = passes > 1
        data = _print_once(browser, patience, tagged=tagged)
        found = entry_pages(data, entries)
        if found == written and tagged:
            return data, {"passes": passes}
        if found == written:
            continue
        filled = patience.evaluate(browser, fill_pages_script(found))
        if filled != len(found):
            raise SystemExit(f"expected {len(found)} page numbers in the contents list, wrote {filled}")
        written = found
    raise SystemExit(f"the contents' page numbers did not settle after {MAX_PASSES} prints")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path, help="index.html of the singlehtml build")
    parser.add_argument("output", type=Path, help="the PDF to write; with --edition all, the folder for "
                        "the three (" + ", ".join(EDITION_FILES.values()) + ")")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds any one step (typesetting, layout, a print) may take at most")
    parser.add_argument("--stall", type=float, default=120.0,
                        help="seconds Chromium may go without progress (CPU used or a message) before "
                             "the print fails")
    parser.add_argument("--edition", choices=[*sorted(EDITIONS), "all"], default="student",
                        help="; ".join(f"{name}: {what}" for name, what in EDITIONS.items()) +
                             "; all: the three, from one typesetting of the book")
    args = parser.parse_args(argv)
    outputs = {name: args.output / file for name, file in EDITION_FILES.items()} if args.edition == "all" \
        else {args.edition: args.output}
    reports = print_editions(args.index, outputs, args.timeout, args.stall)
    for edition, report in reports.items():
        output = outputs[edition]
        print(f"{output}: {output.stat().st_size / 1e6:.1f} MB; {report['math']} formulas typeset, "
              f"{report['images']} images, settled in {report['seconds_to_settle']} s; "
              f"{edition} edition: {report['unfolded']} folded blocks printed, "
              f"{report['answersRemoved']} answers left out, {report['answersKept']} kept, "
              f"{report['codeRemoved']} code cells left out, "
              f"{report['stills']} animations as stills, {report['scaled']} wide items scaled, "
              f"{report['contents']} contents entries, {report['passes']} prints")
    return 0


if __name__ == "__main__":
    sys.exit(main())
