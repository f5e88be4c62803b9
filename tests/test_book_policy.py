"""The book's answer policy: no graded value is printed in the open text of a built page.

Every answer of the key (``rbtutor.problems.answer_key(load_data())``) may appear in the
built HTML only inside a container that the reader opens with a click: a ``<details>``
element (sphinx-design dropdowns and MyST-NB's folded cells, ``hide-cell``/``hide-output``)
or a sphinx-togglebutton admonition (``:class: dropdown``, ``div.dropdown``/``div.toggle``).

A value counts as printed when a number in the visible text (or in an ``alt``, ``title`` or
``aria-label`` attribute) carries at least as many significant digits as the published key
prints (``rbtutor.problems.PUBLISHED_KEY``) and is the answer correctly rounded to its own last
digit. Round-off answers (``kind: roundoff``) and exact zeros are not searched for: they
are not information. Answers the published key does not print are searched for at four
significant figures.

The pages are read from the build in ``RBTUTOR_BOOK_HTML`` when that is set (a folder with
the built ``index.html``), otherwise from the session's own offline build (``built_book``).
"""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from rbtutor.problems import PUBLISHED_KEY, answer_key, load_data, read_yaml

ROOT = Path(__file__).resolve().parents[1]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr"}
HIDING_CLASSES = {"dropdown", "toggle"}
SKIPPED = {"script", "style", "template", "noscript"}
#: the book's own numbering (section 1.3, figure 2.1, equation (4.2)) and the navigation that repeats the
#: numbered headings ("1.3. How the pages check" in the page's contents): never an answer
NUMBERING_CLASSES = {"section-number", "caption-number", "eqno", "nav-link"}
VISIBLE_ATTRIBUTES = ("alt", "title", "aria-label")

# A number as a page may print it: 0.779, -1.168, 2.1600e6, 2.16e+06, 2.16 \times 10^{6},
# 2.16×10⁶ is not produced by the pages (MathJax sources keep TeX), 16.4 %.
_NUMBER = re.compile(
    r"(?<![\w.])[-+\u2212]?(?P<mantissa>\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?:[eE](?P<exp>[-+\u2212]?\d+))|(?:\s*(?:\\times|\u00d7)\s*10\^\{?(?P<texp>[-+\u2212]?\d+)\}?))?"
    r"(?P<percent>\s*(?:%|\\%))?"
)


#: names that a version number follows: the number after them is the version, never an answer
VERSIONED = ("LTI ", "Python ", "Jupyter Book ")


class Target(NamedTuple):
    """One number of the key: its id, magnitude, the unit of its last printed digit, its digits."""

    name: str
    magnitude: float
    unit: float
    digits: int
    shown: str
    quantity: str = "1"  # the answer's physical unit as the key names it ("m", "deg", "N m", "1")


def _written_after(quantity: str) -> re.Pattern:
    """How a page writes ``quantity`` right after a number: its first unit symbol ("N m" -> N,
    "kg m^2" -> kg), or a degree sign for degrees."""
    first = re.split(r"[\s,/^·*]", quantity.strip())[0]
    spellings = ["°", "deg", "degrees"] if first.startswith("deg") else [re.escape(first)]
    return re.compile(r"\s*(?:" + "|".join(spellings) + r")(?![A-Za-z])")


def _significant(mantissa: str) -> int:
    digits = mantissa.replace(".", "").lstrip("0")
    return max(len(digits), 1)


def _precision(printed: str) -> tuple[float, int] | None:
    """(unit of the last digit, significant digits) of a printed number; None if it is none."""
    match = _NUMBER.fullmatch(printed.strip())
    if match is None:
        return None
    mantissa = match.group("mantissa")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int((match.group("exp") or "0").replace("\u2212", "-"))
    if match.group("percent"):
        exponent -= 2
    return 10.0 ** (exponent - decimals), _significant(mantissa)


def _default_format(value: float) -> str:
    return f"{value:.3e}"


def _flatten(value) -> list:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (str, list, tuple)):
        return [item for part in value for item in _flatten(part)]
    array = np.asarray(value, dtype=object if isinstance(value, (list, tuple)) else float)
    return list(array.ravel())


def answer_targets() -> tuple[list[Target], list[tuple[str, str]]]:
    """The numbers and the words of the key for the reference data, as the key prints them."""
    published = read_yaml(PUBLISHED_KEY.read_text(encoding="utf-8"))
    numbers: list[Target] = []
    words: list[tuple[str, str]] = []
    for name, answer in answer_key(load_data()).items():
        entry = published.get(name, {})
        if entry.get("kind") == "roundoff":
            continue
        if isinstance(answer.value, str):
            words.append((name, answer.value))
            continue
        values = [float(v) for v in np.asarray(answer.value, dtype=float).ravel()]
        printed = _flatten(entry["printed"]) if "printed" in entry else [None] * len(values)
        if len(printed) != len(values):
            printed = [printed[0]] * len(values) if len(printed) == 1 else [None] * len(values)
        for value, text in zip(values, printed, strict=True):
            if value == 0.0:
                continue
            text = text if isinstance(text, str) else _default_format(value)
            precision = _precision(text) or _precision(_default_format(value))
            unit, digits = precision
            if round(abs(value) / unit) == 0:
                continue  # prints as zero at the key's precision
            numbers.append(Target(name, abs(value), unit, digits, text, answer.unit or "1"))
    return numbers, words


class _OpenText(HTMLParser):
    """Split a page's text into what a reader sees at once and what needs a click."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, hides, skipped)
        self.open: list[str] = []
        self.folded: list[str] = []

    def _hidden(self) -> bool:
        return any(hides for _, hides, _ in self.stack)

    def _skipped(self) -> bool:
        return any(skipped for _, _, skipped in self.stack)

    def _take(self, text: str) -> None:
        if text.strip() and not self._skipped():
            (self.folded if self._hidden() else self.open).append(text)

    def handle_starttag(self, tag, attrs):
        values = {k: v or "" for k, v in attrs}
        classes = set(values.get("class", "").split())
        hides = tag == "details" or (tag == "div" and bool(classes & HIDING_CLASSES))
        numbering = bool(classes & NUMBERING_CLASSES) or (tag == "a" and "#equation-" in values.get("href", ""))
        if tag not in VOID:
            self.stack.append((tag, hides, tag in SKIPPED or numbering))
        for key in VISIBLE_ATTRIBUTES:
            if values.get(key):
                self._take(values[key])

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        for depth in range(len(self.stack) - 1, -1, -1):
            if self.stack[depth][0] == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data):
        self._take(data)


def open_text(html: str) -> tuple[str, str]:
    """(text seen at once, text behind a click) of an HTML page."""
    parser = _OpenText()
    parser.feed(html)
    parser.close()
    return "\n".join(parser.open), "\n".join(parser.folded)


def printed_answers(text: str, numbers: list[Target], words: list[tuple[str, str]]) -> list[str]:
    """Every answer of the key that ``text`` prints, as 'id: as printed in the text'."""
    found = []
    for match in _NUMBER.finditer(text):
        if text[:match.start()].endswith(VERSIONED):
            continue  # "LTI 1.3" names a standard's version
        mantissa = match.group("mantissa")
        exponent = int((match.group("exp") or match.group("texp") or "0").replace("\u2212", "-"))
        if abs(exponent) > 300:  # 1e999, written to show an overflow: no answer is that large or small
            continue
        magnitude = float(mantissa) * 10.0**exponent
        if match.group("percent"):
            magnitude /= 100.0
        # Trailing zeros of a fraction are not taken as precision (numpy prints a rounded
        # 0.14176 as 1.4176000e-01): the text's own last digit is its last non-zero decimal.
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".") or "0"
        digits = _significant(mantissa)
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        own_unit = 10.0 ** (exponent - decimals) / (100.0 if match.group("percent") else 1.0)
        # A whole number of at most three digits with nothing after it but another word (120 s, 128
        # levels, "120 of 124 answers") is a count or a setting: it prints an answer with a unit only
        # when that unit follows it ("120 m", "128°").
        count = "." not in match.group("mantissa") and not match.group("exp") and not match.group("texp") \
            and not match.group("percent") and len(match.group("mantissa")) <= 3
        for target in numbers:
            if digits < target.digits:
                continue
            if count and target.quantity not in ("1", "") \
                    and not _written_after(target.quantity).match(text, match.end()):
                continue
            # The text prints the answer when its number is the answer rounded to the text's
            # own last digit (with a little room for another integrator's last digits).
            if math.isclose(magnitude, target.magnitude, rel_tol=1e-6, abs_tol=0.5 * own_unit * (1 + 1e-9)):
                found.append(f"{target.name} (key {target.shown}): {match.group(0).strip()!r}")
    lowered = text.lower()
    found += [f"{name}: {value!r}" for name, value in words if value.lower() in lowered]
    return found


# ----------------------------------------------------------------- the detector itself


def test_a_small_whole_number_is_an_answer_only_with_its_unit():
    """120 is Problem 10's displacement in metres: "120 m" prints it, "120 s" and "120 of 124" do not."""
    numbers, _ = answer_targets()
    assert any("p10.b.displacement" in hit for hit in printed_answers("it travelled 120 m in all", numbers, []))
    assert any("p10.b.heading_change_deg" in hit for hit in printed_answers("a turn of 128°", numbers, []))
    for text in ("a cell may run 120 s", "120 of 124 numeric answers", "128 levels of nesting", "128 MiB"):
        assert not printed_answers(text, numbers, []), text


def test_the_book_s_own_numbers_are_not_answers():
    """Section, figure and equation numbers (1.3, Fig. 2.1, (1.3)) are skipped; the same number in text is not."""
    numbers, _ = answer_targets()
    page = ('<h2><span class="section-number">1.3. </span>How the pages check</h2>'
            '<p>see <a class="reference internal" href="#equation-eq-x">(1.3)</a> and '
            '<span class="caption-number">Fig. 1.3 </span></p>'
            '<nav><a class="reference internal nav-link" href="#how">1.3. How the pages check</a></nav>')
    visible, _ = open_text(page)
    assert not printed_answers(visible, numbers, [])
    assert printed_answers(open_text("<p>|w| reaches 1.3 rad/s</p>")[0], numbers, [])


def test_a_standard_s_version_is_not_an_answer():
    """"LTI 1.3" names a version; 1.3 on its own, or after another word, is still found."""
    numbers, _ = answer_targets()
    assert not printed_answers("Log-in from the LMS (LTI 1.3)", numbers, [])
    assert printed_answers("the largest norm is 1.3", numbers, [])


def test_targets_follow_the_published_precision():
    """The key's numbers are searched for at the precision the key prints them."""
    numbers, words = answer_targets()
    by_name = {t.name: t for t in numbers}
    assert by_name["p3.d.phi_deg"].unit == pytest.approx(1e-3)
    assert by_name["p3.d.phi_deg"].digits == 3
    assert by_name["p3.b.K"].unit == pytest.approx(100.0)  # 2.1600e6
    assert by_name["p1.d.max_coupling_ratio"].unit == pytest.approx(1e-3)  # 16.4 %
    assert "p10.b.track_length" in by_name  # not in the printed key: four figures
    assert ("p1.d.strongest_pair", "sway-roll") in words
    assert not any(t.name == "p4.b.nuCnu" for t in numbers)  # round-off, not an answer


def test_detector_sees_open_values_and_ignores_folded_ones():
    """A key value in a paragraph, a table cell, alt text or TeX is found; in a dropdown,
    a folded cell, a toggle admonition or a script it is not."""
    numbers, words = answer_targets()
    page = """<html><body><main>
      <p>The heel is <span>0.779</span> degrees.</p>
      <table><tr><td>-1.1681</td></tr></table>
      <img alt="the coupling ratio is 16.4 %" src="x.png">
      <p>\\(K = 2.16 \\times 10^{6}\\)</p>
      <pre>[ 1.4176000e-01 -2.2190000e+00]</pre>
      <details class="sd-dropdown"><summary>Answer</summary><p>phi = 0.779 deg</p></details>
      <details class="hide above-input"><pre>assert abs(phi - 0.779) &lt; 5e-4</pre></details>
      <div class="admonition dropdown"><p>sway-roll</p></div>
      <script>var x = 0.779;</script>
      <p>A rounded 0.78 and the data 1.8 m are not answers at the key's precision,
         and 1.309 s is another quantity, although it rounds to the key's coarse 1.2 ... 1.3.</p>
    </main></body></html>"""
    visible, folded = open_text(page)
    hits = printed_answers(visible, numbers, words)
    names = {hit.split(" ")[0].rstrip(":") for hit in hits}
    assert {"p3.d.phi_deg", "p9.d.phi_unloaded_deg", "p1.d.max_coupling_ratio", "p10.b.nu1"} <= names
    assert "p3.c.phi_deg" in names  # -1.1681 also prints 3(c) to more digits than its key
    assert not any("sway-roll" in hit for hit in hits)
    assert "0.78" not in " ".join(hits)
    assert "1.309" not in " ".join(hits)
    assert "0.779 deg" in folded
    assert "sway-roll" in folded
    assert "var x" not in visible + folded
    # 2.16 x 10^6 has three figures, fewer than the key's 2.1600e6: not counted as printed.
    assert "p3.b.K" not in names


# ----------------------------------------------------------------- the built book


@pytest.fixture(scope="module")
def book_html(built_book) -> Path:
    """The built book (RBTUTOR_BOOK_HTML names one built elsewhere; see tests/conftest.py)."""
    return built_book


def _pages(html_dir: Path) -> list[Path]:
    return sorted(
        p for p in html_dir.rglob("*.html")
        if not p.relative_to(html_dir).parts[0].startswith(("_static", "_sources", "_images"))
        and p.name not in {"genindex.html", "search.html", "py-modindex.html"}
    )


def test_no_graded_value_in_the_open_text_of_the_book(book_html: Path):
    """Every answer of the key appears in the built pages only behind a click."""
    numbers, words = answer_targets()
    pages = _pages(book_html)
    assert len(pages) >= 10, f"expected the book's pages in {book_html}, found {len(pages)}"
    offences = []
    folded_somewhere = False
    for page in pages:
        visible, folded = open_text(page.read_text(encoding="utf-8"))
        folded_somewhere |= bool(printed_answers(folded, numbers, words))
        offences += [f"{page.relative_to(book_html)}: {hit}" for hit in printed_answers(visible, numbers, words)]
    assert not offences, "graded values printed in the open text:\n" + "\n".join(offences)
    # The worked solutions exist (behind clicks): the search above would find them.
    assert folded_somewhere
