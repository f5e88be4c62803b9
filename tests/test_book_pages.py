"""The book's pages as a reader meets them, read from the built HTML and from their sources.

Checks, in the order a reader would notice them:

* no TeX source is left in the visible text of any built page (math outside ``.math``
  elements is never typeset, so a stray ``$`` or ``\\vec`` there is what the reader sees);
* every numbered figure is referred to by its number ({numref}) somewhere in the book;
* each core chapter page links to the glossary, to the bibliography and to the exercises,
  and has folded self-check questions and a common-mistakes box;
* each derivation step on the derivation pages is a visible SymPy cell that asserts the
  step, the cells were executed (their outputs are in the built page), and the pages do
  not hand the algebra to ``rbtutor.symbolic``.

The built pages come from ``RBTUTOR_BOOK_HTML`` when it is set, otherwise from the
session's own offline build (fixture ``built_book`` in conftest.py).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CORE_PAGES = ["motivation", "translational", "rotational", "complete", "linearised"]
DERIVATION_PAGES = ["translational", "rotational", "complete", "linearised"]
# Names of rbtutor.symbolic a derivation page may import: helpers written out in full on
# the Translational page, where they are introduced and checked against the library.
SHARED_HELPERS = {"skew", "rotation_matrix"}
# Text that is TeX source, not prose: a dollar sign, a backslash command, \( \) \[ \].
RAW_TEX = re.compile(r"\$|\\[A-Za-z]+|\\[()\[\]]")
SKIPPED_TAGS = {"script", "style", "template", "noscript", "pre", "code", "textarea"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr"}
# A cell that does a derivation step, rather than set up symbols: it differentiates,
# simplifies, expands, multiplies out cross products, solves or shows a result.
ALGEBRA = re.compile(r"\b(?:display|sp\.(?:simplify|expand|solve|series|collect|factor_terms)"
                     r"|\w+\.(?:diff|cross|jacobian|coeff|xreplace|subs))\(")
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```$", re.S | re.M)


# --------------------------------------------------------------------------- helpers


class _VisibleText(HTMLParser):
    """Text a reader sees as prose: not code, not scripts, not math that MathJax typesets."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self._stack: list[bool] = []       # one entry per open element: is it skipped?
        self.chunks: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        classes = set((dict(attrs).get("class") or "").split())
        skipped = tag in SKIPPED_TAGS or "math" in classes
        self._stack.append(skipped or (bool(self._stack) and self._stack[-1]))

    def handle_endtag(self, tag):
        if tag not in VOID and self._stack:
            self._stack.pop()

    def handle_data(self, data):
        if not (self._stack and self._stack[-1]):
            self.chunks.append(data)


def raw_tex_in(html: str) -> list[str]:
    """Snippets of visible text around each piece of TeX source found in it."""
    parser = _VisibleText()
    parser.feed(html)
    text = " ".join(" ".join(parser.chunks).split())
    return [text[max(m.start() - 40, 0):m.end() + 40] for m in RAW_TEX.finditer(text)]


def built_pages(html_dir: Path) -> list[Path]:
    return sorted(p for p in html_dir.rglob("*.html")
                  if not p.relative_to(html_dir).parts[0].startswith(("_static", "_sources")))


def page_html(html_dir: Path, name: str) -> str:
    return (html_dir / "book" / "chapter" / f"{name}.html").read_text(encoding="utf-8")


def code_cells(source: str) -> list[tuple[dict, str]]:
    """(options, code) of each code cell of a MyST notebook page."""
    cells = []
    for match in CODE_CELL.finditer(source):
        body = match.group("body")
        options: dict = {}
        front = re.match(r"---\n(.*?)\n---\n", body, re.S)
        if front:
            options = yaml.safe_load(front.group(1)) or {}
            body = body[front.end():]
        lines = body.splitlines()
        while lines and lines[0].startswith(":"):
            key, _, value = lines.pop(0)[1:].partition(":")
            options[key.strip()] = yaml.safe_load(value) if value.strip() else None
        cells.append((options, "\n".join(lines)))
    return cells


def derivation_problems(source: str) -> list[str]:
    """What breaks the rule "every derivation step is visible SymPy that asserts it"."""
    problems = []
    for number, (options, code) in enumerate(code_cells(source)):
        tags = set(options.get("tags") or [])
        figure = "figure" in (options.get("mystnb") or {})
        folded = tags & {"hide-cell", "hide-input", "remove-cell", "remove-input"}
        if folded and not figure:
            problems.append(f"cell {number} is folded or removed ({sorted(folded)})")
        if ALGEBRA.search(code) and not figure and "assert" not in code:
            problems.append(f"cell {number} does SymPy algebra without an assert")
        if re.search(r"from rbtutor import symbolic|import rbtutor\.symbolic|\bsym\.", code):
            problems.append(f"cell {number} calls rbtutor.symbolic as a whole")
        for imported in re.findall(r"from rbtutor\.symbolic import ([\w, ]+)", code):
            extra = {name.split(" as ")[0].strip() for name in imported.split(",")} - SHARED_HELPERS
            if extra:
                problems.append(f"cell {number} imports {sorted(extra)} from rbtutor.symbolic")
    return problems


# ------------------------------------------------------------- detectors can fail


def test_raw_tex_detector_sees_the_problem_2a_slip():
    """The old source of Problem 2(a), a line inside $...$ starting with '+ ', becomes a
    list item when rendered; the detector reports its TeX, and the fixed source is clean."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    def render(markdown: str) -> str:
        md = MarkdownIt("commonmark").use(dollarmath_plugin)
        md.add_render_rule("math_inline", lambda self, tokens, idx, options, env:
                           f'<span class="math">{tokens[idx].content}</span>')
        return md.render(markdown)

    broken = ("- **(a)** show that\n  $\\vec a_P = \\dot{\\vec v} + \\vec\\alpha\\times\\vec r_P\n"
              "  + \\vec\\omega\\times(\\vec\\omega\\times\\vec r_P)$. Which terms drop out?\n")
    fixed = ("- **(a)** show that\n  $\\vec a_P = \\dot{\\vec v} + \\vec\\alpha\\times\\vec r_P +\n"
             "  \\vec\\omega\\times(\\vec\\omega\\times\\vec r_P)$. Which terms drop out?\n")
    assert raw_tex_in(render(broken)), "the broken source should leave TeX in the text"
    assert raw_tex_in(render(fixed)) == []
    assert raw_tex_in('<p>see <span class="math notranslate">\\(\\vec a\\)</span></p>') == []
    assert raw_tex_in("<p>costs $5</p><pre>$x</pre>") == ["costs $5"]


def test_derivation_rule_detects_hidden_and_unchecked_steps():
    """A folded check, a SymPy step without assert and a library call are all reported."""
    page = ("```{code-cell} python3\n:tags: [hide-cell]\nassert 1\n```\n\n"
            "```{code-cell} python3\nx = sp.Symbol('x')\ndisplay(sp.expand(x * x))\n```\n\n"
            "```{code-cell} python3\nfrom rbtutor.symbolic import rdot_rt\nassert rdot_rt\n```\n\n"
            "```{code-cell} python3\nfrom rbtutor.symbolic import skew\nassert sp.expand(skew) == 0\n```\n")
    problems = derivation_problems(page)
    assert len(problems) == 3, problems
    assert "cell 0 is folded" in problems[0]
    assert problems[1] == "cell 1 does SymPy algebra without an assert"
    assert "rdot_rt" in problems[2]


# ------------------------------------------------------------------ sources, no build


@pytest.mark.parametrize("name", DERIVATION_PAGES)
def test_each_derivation_step_is_visible_sympy_with_an_assert(name: str):
    """Every SymPy cell asserts its step; nothing but figures is folded; no hidden algebra."""
    source = (ROOT / "book" / "chapter" / f"{name}.md").read_text(encoding="utf-8")
    cells = code_cells(source)
    asserting = [code for _, code in cells if re.search(r"^\s*assert ", code, re.M)]
    assert len(asserting) >= 5, f"{name}: only {len(asserting)} cells assert a step"
    problems = derivation_problems(source)
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


def test_a_failing_assert_stops_the_build():
    """The book executes its pages and an exception (a failed step) fails the build."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    execute = config["execute"]
    assert execute["execute_notebooks"] in {"cache", "force", "auto"}, execute
    assert execute["raise_on_error"] is True, execute
    assert execute["allow_errors"] is False, execute


def test_the_shared_helpers_are_written_out_where_introduced():
    """skew and the rotation matrix, imported by later pages, are typed in full on the
    Translational page and checked there (skew against the library's)."""
    source = (ROOT / "book" / "chapter" / "translational.md").read_text(encoding="utf-8")
    assert "def skew(a):" in source
    assert "library_skew(a_vec) == skew(a_vec)" in source
    assert "R = Rz(psi) * Ry(theta) * Rx(phi)" in source
    assert "assert sp.expand(rotation_matrix(phi, theta, psi) - R) == ZERO" in source


# -------------------------------------------------------------------- the built book


def test_no_raw_tex_in_the_visible_text_of_any_page(built_book: Path):
    """No built page shows TeX source ($, \\vec, \\( ...) outside the math MathJax typesets."""
    found = {}
    for page in built_pages(built_book):
        snippets = raw_tex_in(page.read_text(encoding="utf-8"))
        if snippets:
            found[page.relative_to(built_book).as_posix()] = snippets[:3]
    assert not found, "raw TeX in the visible text:\n" + "\n".join(
        f"{page}: {snippets}" for page, snippets in found.items())


def test_every_numbered_figure_is_referred_to_by_number(built_book: Path):
    """Each figure with a number is cited as "Fig. N" by a {numref} link on some page."""
    figures, referenced = set(), set()
    for page in built_pages(built_book):
        html = page.read_text(encoding="utf-8")
        figures |= set(re.findall(r'<figure[^>]*\bid="(fig-[\w-]+)"', html))
        referenced |= set(re.findall(
            r'href="[^"]*#(fig-[\w-]+)"[^>]*>\s*<span class="std std-numref">Fig\.', html))
    assert len(figures) >= 18, sorted(figures)
    missing = sorted(figures - referenced)
    assert not missing, f"figures never referred to by number: {missing}"


@pytest.mark.parametrize("name", CORE_PAGES)
def test_core_page_uses_the_apparatus(built_book: Path, name: str):
    """Glossary terms, citations and exercise links on each core page; folded self-checks
    and a common-mistakes box."""
    html = page_html(built_book, name)
    glossary = re.findall(r'href="[^"]*glossary\.html#term-[^"]*"', html)
    citations = re.findall(r'href="[^"]*references\.html#id\d+"', html)
    exercises = re.findall(r'href="[^"]*exercises\.html#ex-problem-\d+"', html)
    assert len(glossary) >= 2, f"{name}: {len(glossary)} glossary links"
    assert citations, f"{name}: no citation links to the references page"
    assert exercises, f"{name}: no link to an exercise"
    assert len(re.findall(r"<details[^>]*sd-dropdown", html)) >= 2, f"{name}: no self-check questions"
    assert "Common mistakes" in html, f"{name}: no common-mistakes box"


@pytest.mark.parametrize("name", DERIVATION_PAGES)
def test_derivation_cells_were_executed(built_book: Path, name: str):
    """Every cell that displays a step has its output in the built page, and the page's
    asserting cells are all there, unfolded."""
    source = (ROOT / "book" / "chapter" / f"{name}.md").read_text(encoding="utf-8")
    html = page_html(built_book, name)
    cells = re.split(r'<div class="cell docutils container', html)[1:]

    def source_text(cell: str) -> str:   # the highlighted input, without its markup
        return re.sub(r"<[^>]+>", "", cell.split('class="cell_output', 1)[0])

    shown = [c for c in cells if "display(" in source_text(c)]
    with_output = [c for c in shown if 'class="cell_output' in c]
    expected = sum("display(" in code for options, code in code_cells(source)
                   if "figure" not in (options.get("mystnb") or {}))
    assert len(shown) >= expected > 0, (name, len(shown), expected)
    assert len(with_output) == len(shown), f"{name}: cells without output"
    asserting = [c for c in cells if re.search(r"^\s*assert ", source_text(c), re.M)]
    assert len(asserting) >= 5, f"{name}: only {len(asserting)} asserting cells in the page"
    folded = [c for c in asserting if re.search(r"tag_(?:hide|remove)-", c.split(">", 1)[0])]
    assert not folded, f"{name}: {len(folded)} asserting cells are folded"


def test_conventions_box_and_compass(built_book: Path):
    """The notation page states the axes against Fossen's, the compass orientation and the
    sign table; the recap's heading example says north-west for psi = +45 degrees."""
    notation = (built_book / "book" / "notation.html").read_text(encoding="utf-8")
    assert 'id="sec-conventions"' in notation
    for needle in ["north-east-down", "north-west", "Fossen (BODY/NED)", "y_0"]:
        assert needle in notation, needle
    recap = (built_book / "book" / "recap.html").read_text(encoding="utf-8")
    assert "north-west" in recap
    assert "north-east" not in recap


def test_every_page_states_the_licences_and_the_package_names_its_own(built_book: Path):
    """A department can adopt the course: the code is MIT (LICENSE, pyproject.toml), the text and
    figures CC BY 4.0 (LICENSE-TEXT.md and the footer of every built page)."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    assert (root / "LICENSE").read_text().startswith("MIT License")
    assert "Creative Commons Attribution 4.0 International" in (root / "LICENSE-TEXT.md").read_text()
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert (project["license"], project["license-files"]) == ("MIT", ["LICENSE", "LICENSE-TEXT.md"])
    pages = sorted(built_book.rglob("*.html"))
    assert pages
    unlicensed = [p.relative_to(built_book) for p in pages
                  if "_static" not in p.parts and p != built_book / "index.html"  # that one only redirects
                  and "creativecommons.org/licenses/by/4.0/" not in p.read_text(encoding="utf-8")]
    assert not unlicensed, f"pages without the licence footer: {unlicensed[:5]}"


def _objectives_styles(text: str) -> set[str]:
    """How a page sets out its learning objectives: as a tip box, as a section, or not at all."""
    styles = set()
    if re.search(r"^```\{admonition\} Learning objectives\n:class: tip\n", text, re.M):
        styles.add("box")
    if re.search(r"^#+\s+Learning objectives\s*$", text, re.M | re.I):
        styles.add("section")
    return styles


def test_the_objectives_detector_tells_the_two_styles_apart():
    assert _objectives_styles("```{admonition} Learning objectives\n:class: tip\n\n- x\n```\n") == {"box"}
    assert _objectives_styles("## Learning objectives\n\n- x\n") == {"section"}


def test_learning_objectives_have_one_style_on_every_page():
    """Every chapter, Euler-parameter and problem page opens with its objectives in the same tip box."""
    pages = [*(f"book/chapter/{n}.md" for n in CORE_PAGES), "book/euler/index.md", "book/euler/node.md",
             *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "book" / "problems").glob("*.md")))]
    styles = {page: _objectives_styles((ROOT / page).read_text(encoding="utf-8")) for page in pages}
    odd = {page: sorted(found) for page, found in styles.items() if found != {"box"}}
    assert not odd, f"learning objectives not in the one tip-box style: {odd}"


@pytest.mark.parametrize("page", [*(f"chapter/{n}" for n in CORE_PAGES), "euler/index", "euler/node"])
def test_every_chapter_page_links_glossary_terms(page: str):
    """A reader meeting a defined term on any chapter page can reach its glossary entry."""
    text = (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")
    assert len(re.findall(r"\{term\}`", text)) >= 2, f"book/{page}.md links fewer than two glossary terms"
