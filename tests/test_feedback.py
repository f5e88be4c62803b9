"""Feedback and Formgrader pages run no student code and show math without MathJax (rbtutor.grading.feedback).

One hostile autograded notebook (:func:`hostile_notebook`) carries the usual injections in
a markdown cell and in every kind of rich output; each test parses what comes out with
BeautifulSoup and looks for anything that could run or load: script elements, ``on*``
attributes, ``javascript:`` (or other non-web) URLs, and URLs that leave the page. The
same notebook is loaded in headless Chromium by tests/test_feedback_browser.py.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup
from hypothesis import given, settings
from hypothesis import strategies as st
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from rbtutor.grading import grader_notes, mathml
from rbtutor.grading.feedback import render_feedback, write_feedback
from rbtutor.grading.mathml import math_to_mathml, prerender_math
from rbtutor.grading.sanitize import sanitize_notebook

ROOT = Path(__file__).resolve().parents[1]
# Every payload sets this marker (or the title) if it ever runs.
PWN = "window.pwned=1;document.title='PWNED'"
PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
JUDGE_SENTENCE = ("Every entry has the wrong sign: the roll moment K points the other way, so check the sign "
                  "of z_G (z is up, so G below the waterline has z_G < 0) and the direction of the turn rate r.")

HOSTILE_HTML = f"""
<script>{PWN}</script>
<img src=x onerror="{PWN}">
<a href="javascript:{PWN}">click me</a>
<a href=" JaVaScRiPt:{PWN}">spaced</a>
<a href="java&#x09;script:{PWN}">tabbed</a>
<svg onload="{PWN}"><circle r="4"/></svg>
<iframe src="javascript:parent.pwned=1"></iframe>
<iframe srcdoc="<script>parent.pwned=1</script>"></iframe>
<style>@import url(http://evil.example/x.css); body {{ background: url(https://evil.example/b.png) }}</style>
<meta http-equiv="refresh" content="0;url=http://evil.example/">
<object data="http://evil.example/x.swf"></object>
<embed src="http://evil.example/x.swf">
<form action="http://evil.example/"><input name=q autofocus onfocus="{PWN}"><button>go</button></form>
<div style="background-image:url(http://evil.example/track.png)">styled</div>
<img src="http://evil.example/track.png" alt="tracker">
<img src="data:image/svg+xml;base64,PHN2Zy8+" alt="svg data">
<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">data link</a>
<math><mtext><a href="javascript:{PWN}">m</a></mtext><style><img src=x onerror="{PWN}"></style></math>
<details open ontoggle="{PWN}"><summary>s</summary></details>
<base href="http://evil.example/">
<link rel="stylesheet" href="http://evil.example/s.css">
"""

HOSTILE_MARKDOWN = (
    "# My answer\n\n"
    "The moment is $K = -m z_G u r$ and, in display,\n\n"
    "$$\\mathbf{M}_{RB} \\dot{\\nu} + \\mathbf{C}_{RB}(\\nu) \\nu = \\tau$$\n\n"
    "also \\(\\phi < 0\\) and \\[\\frac{a}{b}\\] and\n\n"
    "\\begin{align} a &= b \\\\ c &= d \\end{align}\n\n"
    "A ship costs $5 and a boat $10. Code: `$not_math$`.\n\n"
    f"[md link](javascript:{PWN}) and <https://evil.example/auto>\n\n"
    + HOSTILE_HTML
)

HOSTILE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="20" '
    f'height="20" onload="{PWN}"><script>{PWN}</script><defs><path id="p" d="M 0 0 L 10 10"/></defs>'
    '<use xlink:href="#p"/><use href="http://evil.example/s.svg#x"/>'
    '<image href="http://evil.example/track.png"/><foreignObject><iframe src="javascript:1"></iframe>'
    '</foreignObject><rect width="5" height="5" style="fill: url(http://evil.example/f)"/>'
    '<rect width="5" height="5" style="fill: #ff0000"/></svg>'
)


def graded_meta(grade_id: str, points: float, *, solution: bool = False, locked: bool = True) -> dict:
    return {"nbgrader": {"grade": True, "grade_id": grade_id, "locked": locked, "points": points,
                         "schema_version": 3, "solution": solution, "task": False}}


def hostile_notebook():
    """An autograded notebook as a hostile student could leave it (scores in :data:`SCORES`)."""
    nb = new_notebook(metadata={"language_info": {"name": "python"},
                                "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}}})
    student = new_code_cell("K = 1.0\nprint('\\x1b[31mred\\x1b[0m and a very long line ' + 'x' * 400)",
                            metadata={"nbgrader": {"grade": False, "grade_id": "p3_b_K_answer", "locked": False,
                                                   "schema_version": 3, "solution": True, "task": False}})
    student.outputs = [
        new_output("stream", name="stdout", text="\x1b[31mred\x1b[0m and a very long line " + "x" * 400 + "\n"),
        new_output("display_data", data={"text/html": HOSTILE_HTML, "text/plain": "<html>"}),
        new_output("display_data", data={"application/javascript": PWN, "text/plain": "js"}),
        new_output("display_data", data={"application/javascript": PWN}),
        new_output("display_data", data={"text/html": f'<object data="http://evil.example/o">{PWN}</object>'
                                                     "<p>kept paragraph</p>"}),
        new_output("display_data", data={"image/svg+xml": HOSTILE_SVG}),
        new_output("display_data", data={"text/markdown": f"**bold** $x^2$ <img src=x onerror=\"{PWN}\">"}),
        new_output("display_data", data={"image/png": PNG_1PX, "text/plain": "<Figure>"}),
        new_output("display_data", data={"image/png": '"><script>alert(1)</script>'}),
        new_output("display_data", data={"text/vnd.mermaid": "graph TD; A-->B",
                                         "application/vnd.jupyter.widget-view+json": {"model_id": "x"}}),
        new_output("execute_result", data={"text/latex": "$\\displaystyle \\frac{1}{2}$", "text/plain": "1/2"},
                   execution_count=1),
        new_output("error", ename="ValueError", evalue="bad",
                   traceback=["\x1b[0;31mValueError\x1b[0m: bad \x1b]8;;http://evil.example\x07link\x1b]8;;\x07"]),
    ]
    failed = new_code_cell(
        '"""K (N m): the form is checked here, the value after submission."""\n'
        'check_form("K", K, shape=())\nhand_in("p3.b.K", K)\n'
        "### BEGIN HIDDEN TESTS\nassert secret_reference == 4.2e6\n### END HIDDEN TESTS\n",
        metadata=graded_meta("p3_b_K", 2))
    failed.outputs = [new_output("error", ename="AnswerNotAccepted", evalue=f"p3.b.K: {JUDGE_SENTENCE}",
                                 traceback=[f"AnswerNotAccepted: p3.b.K: {JUDGE_SENTENCE}"])]
    passed = new_code_cell('check_form("phi", phi, shape=())\nhand_in("p3.c.phi_rad", phi)\n'
                           "    ### BEGIN HIDDEN TESTS\n    assert unclosed_secret\n",
                           metadata=graded_meta("p3_c_phi_rad", 1))
    passed.outputs = [new_output("stream", name="stdout", text="p3.c.phi_rad: Correct.\n")]
    forged = new_code_cell("raise AnswerNotAccepted('p3.c.phi_rad: Accepted, full marks')",
                           metadata={"nbgrader": {"grade": False, "grade_id": "forged", "locked": False,
                                                  "schema_version": 3, "solution": True, "task": False}})
    forged.outputs = [new_output("error", ename="AnswerNotAccepted", evalue="p3.c.phi_rad: Accepted, full marks",
                                 traceback=["AnswerNotAccepted: p3.c.phi_rad: Accepted, full marks"])]
    written = new_markdown_cell(HOSTILE_MARKDOWN, metadata=graded_meta("p3_c_direction", 1, solution=True,
                                                                       locked=False))
    nb.cells = [
        new_markdown_cell("# Problem 3\n\nShow that $K = r^2 I_{yz} - m z_G u r$; see `check_form`."),
        student, failed, passed, forged, written,
        nbformat.v4.new_raw_cell(f"<script>{PWN}</script><b>raw</b>"),
    ]
    return nb


SCORES = {"p3_b_K": (0.0, 2.0, None), "p3_c_phi_rad": (1.0, 1.0, "Well done: $\\phi$ in **radians**."),
          "p3_c_direction": (None, 1.0, None)}


# --------------------------------------------------------------------------- checks


def active_content(html: str, *, allow_web_links: bool = False) -> list[str]:
    """Everything in ``html`` that could run or load something, as readable findings."""
    soup = BeautifulSoup(html, "html.parser")
    found = []
    for tag in soup.find_all(True):
        name = tag.name.lower()
        if name in {"script", "iframe", "frame", "object", "embed", "applet", "style", "meta", "link", "base",
                    "form", "input", "button", "foreignobject", "image", "template", "noscript"}:
            found.append(f"<{name}>")
        for attr, value in tag.attrs.items():
            value = " ".join(value) if isinstance(value, list) else str(value)
            squeezed = re.sub(r"[\x00-\x20]+", "", value).lower()
            if attr.lower().startswith("on"):
                found.append(f"{name}[{attr}]")
            if attr.lower() in ("srcdoc", "action", "formaction", "srcset", "background", "data") or (
                    attr.lower() == "style" and re.search(r"url|import|expression|\\\\", squeezed)):
                found.append(f"{name}[{attr}]")
            if name == "img" and attr.lower() == "src" and squeezed.startswith("data:image/svg+xml;base64,"):
                svg = base64.b64decode(value.split(",", 1)[1]).decode("utf-8")  # inert as an image; still
                found += [f"svg image: {f}" for f in active_content(svg)]  # nothing in it may run or load
            elif attr.lower() in ("href", "xlink:href", "src"):
                if attr.lower() == "src" and not re.match(r"data:image/(png|jpeg|gif);base64,", squeezed):
                    found.append(f"{name}[src={value[:40]}]")
                elif attr.lower() != "src" and not (squeezed.startswith("#") or (
                        allow_web_links and re.match(r"(https?|mailto):", squeezed))):
                    found.append(f"{name}[{attr}={value[:40]}]")
    return found


def rich_fragments(nb) -> list[tuple[int, str]]:
    """(cell index, HTML) of every markdown/raw source and every HTML-ish output of ``nb``."""
    fragments = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type in ("markdown", "raw"):
            fragments.append((index, cell.source))
        for output in cell.get("outputs", []):
            for mime in ("text/html", "image/svg+xml", "text/markdown"):
                if mime in output.get("data", {}):
                    fragments.append((index, output["data"][mime]))
    return fragments


# --------------------------------------------------------------------------- sanitize_notebook


def test_hostile_notebook_is_hostile_before_sanitising():
    """The checker finds the injections in the raw notebook (so its silence later means something)."""
    found = [f for _, html in rich_fragments(hostile_notebook()) for f in active_content(html)]
    for expected in ("<script>", "img[onerror]", "<iframe>", "<style>", "<meta>", "<object>", "svg[onload]"):
        assert expected in found
    assert any("javascript:" in f for f in found)


def test_sanitize_notebook_leaves_no_active_content():
    nb = hostile_notebook()
    events = sanitize_notebook(nb)
    for index, html in rich_fragments(nb):
        found = active_content(html, allow_web_links=True)
        assert not found, f"cell {index}: {found}\n{html[:2000]}"
    mimes = [m for cell in nb.cells for o in cell.get("outputs", []) for m in o.get("data", {})]
    for active in ("application/javascript", "text/vnd.mermaid", "application/vnd.jupyter.widget-view+json"):
        assert active not in mimes
    js_only = nb.cells[1].outputs[3]
    assert js_only.data == {"text/plain": "[output removed by the grader: application/javascript]"}
    assert "image/png" not in nb.cells[1].outputs[8].data  # not base64: dropped
    assert nb.cells[1].outputs[7].data["image/png"] == PNG_1PX  # a real image stays
    assert "widgets" not in nb.metadata
    # what a reader needs survives
    assert "kept paragraph" in nb.cells[1].outputs[4].data["text/html"]
    assert "<math" in nb.cells[5].source
    assert "<math" in nb.cells[1].outputs[6].data["text/markdown"]
    assert nb.cells[0].source.startswith("# Problem 3")  # plain markdown is left as written
    # events: one per affected cell, with what was removed
    assert {e["kind"] for e in events} == {"html_sanitised"}
    by_cell = {}
    for e in events:
        by_cell.setdefault(e["cell"], []).extend(e.get("removed", []))
    assert set(by_cell) == {None, 1, 5, 6}
    assert sorted(e["cell"] for e in events if e["cell"] is not None) == [1, 5, 6]  # one event per cell
    markdown_removed = " ".join(by_cell[5])
    for what in ("<script>", "onerror attribute", "javascript: URL", "<iframe>", "<style>", "<meta>",
                 "<object>", "onload attribute"):
        assert what in markdown_removed, what
    assert any("application/javascript" in r for r in by_cell[1])
    assert [e.get("grade_id") for e in events if e["cell"] == 5] == ["p3_c_direction"]
    json.dumps(events)  # events go into the JSON integrity files


def test_sanitize_notebook_is_quiet_for_an_honest_notebook():
    nb = nbformat.read(ROOT / "exercises" / "problem03" / "problem03.ipynb", as_version=4)
    before = [c.source for c in nb.cells]
    assert sanitize_notebook(nb) == []
    assert [c.source for c in nb.cells] == before


def test_markdown_images_from_elsewhere_do_not_load():
    nb = new_notebook(cells=[new_markdown_cell("![pixel](http://evil.example/p.png) ![ok](data:image/png;base64,"
                                               f"{PNG_1PX})")])
    assert sanitize_notebook(nb) != []
    soup = BeautifulSoup(nb.cells[0].source, "html.parser")
    assert [img.get("src", "")[:15] for img in soup.find_all("img")] == ["data:image/png;"]


def test_sanitised_svg_is_a_well_formed_image():
    """An SVG output stays an XML document a browser can show as an image (namespace, links to fragments)."""
    import xml.etree.ElementTree as ET

    nb = hostile_notebook()
    sanitize_notebook(nb)
    svg = nb.cells[1].outputs[5].data["image/svg+xml"]
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert 'href="#p"' in svg
    assert "evil" not in svg
    assert "fill: #ff0000" in svg


def test_svg_styles_that_load_or_run_are_removed_and_fragment_paints_kept():
    """In an SVG (the one place ``style`` is allowed) a style or paint that loads, runs or hides a URL
    behind a CSS escape goes; a gradient from the same image and a plain colour stay, as written.

    nh3's ``filter_style_properties`` is not used for this: a property it allows keeps
    ``expression(`` in its value, it does not see paints in attributes (``fill="url(...)"``), and it
    rewrites every honest style (``fill: #ff0000`` becomes ``fill:#ff0000``)."""
    from rbtutor.grading.allowlist import clean_fragment

    hostile = ['style="width: expression(alert(1))"', 'style="fill: u\\72l(https://evil.example/x)"',
               'fill="url(https://evil.example/x)"', 'style="background:url(https://evil.example/b)"',
               'style="fill: url(data:image/png;base64,AAAA)"']
    svg = ('<svg xmlns="http://www.w3.org/2000/svg">' + "".join(f"<rect {a}/>" for a in hostile)
           + '<rect fill="url(#g)" style="fill: url(#g); stroke: #000"/></svg>')
    cleaned = clean_fragment(svg, "svg")
    assert cleaned.count("<rect></rect>") == len(hostile), cleaned
    assert '<rect fill="url(#g)" style="fill: url(#g); stroke: #000"></rect>' in cleaned
    assert not re.search(r"expression|evil|\\\\|data:", cleaned), cleaned


def test_images_keep_their_alt_text_and_an_image_without_a_source_goes():
    """After nh3: an image keeps the alt text its author gave, gets an empty one when it had none, and an
    image whose source was removed disappears; an SVG keeps XML entities only and plain ``href``.

    nh3 has no option for these: ``set_tag_attribute_values={"img": {"alt": ""}}`` overwrites every alt
    text, and no option drops an element whose attribute was filtered out."""
    import xml.etree.ElementTree as ET

    from rbtutor.grading.allowlist import clean_fragment

    png = f"data:image/png;base64,{PNG_1PX}"
    page = clean_fragment(f'<p><img src="{png}" alt="a plot"><img src="{png}"><img src=x onerror="{PWN}" alt="gone">'
                  '<img></p>', "page")
    soup = BeautifulSoup(page, "html.parser")
    assert [img.get("alt") for img in soup.find_all("img")] == ["a plot", ""], page
    assert "gone" not in page
    assert "onerror" not in page
    svg = clean_fragment('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
                 '<text>a&nbsp;b</text><use xlink:href="#p"/></svg>', "svg")
    root = ET.fromstring(svg)  # parses as XML: no HTML-only entity, no unbound prefix
    assert root.find("{http://www.w3.org/2000/svg}text").text == "a\u00a0b"
    assert root.find("{http://www.w3.org/2000/svg}use").get("href") == "#p"


def test_sanitised_markdown_survives_a_markdown_renderer():
    """The rewritten cell is one raw HTML block: nbconvert's renderer passes it through unchanged."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    nb = hostile_notebook()
    sanitize_notebook(nb)
    source = nb.cells[5].source
    assert "\n" not in source
    assert source.startswith('<div class="rbtutor-sanitised tex2jax_ignore">')
    rendered = markdown2html_mistune(source)
    assert not active_content(rendered, allow_web_links=True)
    assert rendered.count("<math") == source.count("<math") >= 5


def formgrader_page(nb) -> str:
    """What nbgrader's Formgrader serves for ``nb`` (its exporter and template, without the server)."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {"assignment_id": "problem03", "notebook_id": "problem03", "submission_id": "x", "index": 0,
                 "total": 1, "base_url": "", "student": "s01", "last_name": "", "first_name": "",
                 "notebook_path": "autograded/s01/problem03/problem03.ipynb"}
    html, _ = HTMLExporter(config=config).from_notebook_node(nb, resources=resources)
    return html


def page_scripts(html: str) -> list[str]:
    soup = BeautifulSoup(html, "html.parser")
    return [s.get("src") or s.get_text()[:60] for s in soup.find_all("script")]


def test_formgrader_page_of_a_sanitised_notebook_runs_only_its_own_scripts():
    """Unsanitised, the Formgrader page carries the student's scripts; sanitised, only nbgrader's own."""
    honest = formgrader_page(new_notebook(cells=[new_markdown_cell("hello")]))
    raw = formgrader_page(hostile_notebook())
    assert any(PWN in s for s in page_scripts(raw)), "the Formgrader no longer runs output scripts: update"
    nb = hostile_notebook()
    sanitize_notebook(nb)
    prerender_math(nb)
    page = formgrader_page(nb)
    assert page_scripts(page) == page_scripts(honest)
    body = BeautifulSoup(page, "html.parser").find(id="notebook-container")
    rendered = body.select(".text_cell_render, .output_subarea")  # the student's part of the page
    assert len(rendered) >= 10
    for part in rendered:
        assert not active_content(str(part), allow_web_links=True), str(part)[:500]
    # the Formgrader asks a CDN for MathJax whatever the configuration says; MathML needs none of it
    assert any("cdnjs.cloudflare.com/ajax/libs/mathjax" in (s or "") for s in page_scripts(page))
    assert len(body.find_all("math")) >= 8
    latex_output = BeautifulSoup(page, "html.parser").select(".output_execute_result")
    assert [o.find("math") is not None for o in latex_output] == [True]  # SymPy's text/latex as MathML


def test_prerender_math_turns_every_markdown_cell_into_mathml():
    nb = nbformat.read(ROOT / "exercises" / "problem03" / "problem03.ipynb", as_version=4)
    markdown = [c for c in nb.cells if c.cell_type == "markdown"]
    assert prerender_math(nb) == len(markdown)
    assert prerender_math(nb) == 0  # already rewritten
    for cell in markdown:
        assert "$" not in BeautifulSoup(cell.source, "html.parser").get_text()
    assert sum(c.source.count("<math") for c in markdown) > 20


# --------------------------------------------------------------------------- math_to_mathml


def test_math_forms_become_mathml():
    out = math_to_mathml("a $x^2$ b $$y$$ c \\(z\\) d \\[w\\] e\n\n\\begin{equation}\nv = 1 \\label{eq:v}\n"
                         "\\end{equation}\n\n\\begin{align*} a &= b \\\\ c &= d \\end{align*}")
    soup = BeautifulSoup(out, "html.parser")
    maths = soup.find_all("math")
    assert [m["display"] for m in maths] == ["inline", "block", "inline", "block", "block", "block"]
    assert maths[0].find("msup") is not None
    assert "label" not in out
    assert "eq:v" not in out
    assert maths[5].find("mtable") is not None


def test_dollars_in_prices_and_code_are_not_math():
    text = ("It costs $5 and $10, or $3.50 with tax.\n\nInline `$HOME` and `` `$x$` ``.\n\n"
            "```bash\necho $PATH $x$\n```\n\n    indented $y$ code\n\nEscaped \\$z\\$.")
    assert math_to_mathml(text) == text


def test_failed_conversion_is_escaped_tex_in_code():
    for tex in ("\\unknowncommand{x}", "\\style{x}"):
        out = math_to_mathml(f"before ${tex}$ after")
        soup = BeautifulSoup(out, "html.parser")
        assert soup.find("math") is None
        assert soup.find("code").get_text() == tex
    out = math_to_mathml("$\\unknown{<img src=x onerror=alert(1)>}$")
    assert "<img" not in out
    assert "&lt;img" in out


def test_tex_cannot_inject_html():
    out = math_to_mathml("$\\text{<script>alert(1)</script>}$ $\\href{javascript:alert(1)}{x}$ $a<b>c$")
    assert not active_content(out)
    assert "javascript" not in out
    assert "<script" not in out
    assert len(BeautifulSoup(out, "html.parser").find_all("math")) == 3


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([*"$\\`{}()[]&\"' \nabx^_1", "\\begin{align}", "\\end{align}", "\\text{",
                                 "$$", "\\(", "\\)", "\\[", "\\]", "```\n", "\\\\"]), max_size=40).map("".join))
def test_math_to_mathml_never_crashes_or_injects(text):
    """Any mix of delimiters converts without an exception and adds nothing active (``<`` is not in the
    alphabet, so every tag in the result was written by the converter)."""
    assert not active_content(math_to_mathml(text))


def test_unclosed_delimiters_cost_linear_time():
    """Thousands of openers without a closer are one scan each, not one per opener (was minutes).

    Measured here: about 0.3 to 0.9 s for each text below; the limit is only a safety net."""
    import time

    for text in ("\\(" * 100_000, "$$ " * 100_000, "\\$" * 100_000, "\\begin{align}" * 20_000, "$a " * 100_000):
        started = time.monotonic()
        assert math_to_mathml(text) == text
        assert time.monotonic() - started < 20, text[:20]


def test_unclosed_environments_one_a_paragraph_cost_linear_time():
    """``\\begin{align}`` without its end, each opening its own paragraph, is one scan for all of them.

    Measured here: about 0.5 s for 5,000 paragraphs; mdit-py-plugins' ``amsmath`` block rule looks for the
    end once per opener and took 28 s on the same text, which is why the scanner is not that plugin."""
    import time

    text = "\\begin{align} a\n\n" * 5000
    started = time.monotonic()
    assert math_to_mathml(text) == text
    assert time.monotonic() - started < 10


def test_a_formula_may_wrap_onto_a_line_that_starts_like_a_list():
    """Math is found before markdown's blocks: a ``$...$`` whose second line starts with ``+ `` stays one
    formula (two model answers of the course wrap that way), and does not become a list item."""
    out = math_to_mathml("the rule: $a = b\n+ c$ holds")
    maths = BeautifulSoup(out, "html.parser").find_all("math")
    assert len(maths) == 1
    assert "$" not in out
    assert [mo.get_text() for mo in maths[0].find_all("mo")].count("+") == 1


def test_every_formula_of_the_course_converts():
    """All math in the exercise notebooks becomes MathML (none falls back to TeX)."""
    failed = []
    for path in sorted((ROOT / "exercises").glob("problem*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                _, formulas = mathml._scan_math(cell.source)
                failed += [f"{path.name}: {f}" for f in formulas if not f.startswith("<math")]
    assert not failed, failed[:10]


def test_math_to_mathml_refuses_non_text():
    with pytest.raises(TypeError, match="expected text to be str"):
        math_to_mathml(None)


# --------------------------------------------------------------------------- render_feedback


@pytest.fixture(scope="module")
def page() -> str:
    return render_feedback(hostile_notebook(), SCORES, title="problem03: feedback for s01")


def page_findings(page: str) -> list[str]:
    """Active content in the body, and anything in the head but the page's own four elements."""
    soup = BeautifulSoup(page, "html.parser")
    head = [(t.name, t.get("http-equiv") or t.get("name") or t.get("charset")) for t in soup.head.find_all(True)]
    extra = [h for h in head if h not in [("meta", "utf-8"), ("meta", "Content-Security-Policy"),
                                          ("meta", "viewport"), ("meta", "referrer"), ("title", None),
                                          ("style", None)]]
    return [f"head: {e}" for e in extra] + active_content(str(soup.body))


def test_page_has_no_active_content_and_no_url(page):
    assert not page_findings(page)
    assert "http://" not in page
    assert "https://" not in page
    soup = BeautifulSoup(page, "html.parser")
    assert soup.find("script") is None
    csp = soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"})["content"]
    assert "default-src 'none'" in csp
    assert "script-src" not in csp
    assert [m.get("http-equiv") for m in soup.find_all("meta") if m.get("http-equiv")] == [
        "Content-Security-Policy"]
    assert "\x1b" not in page
    assert "AnswerNotAccepted" not in soup.find(id="cell-3").get_text()
    # a web address the student wrote is plain text, not a link
    assert "https://evil.example/auto" in soup.get_text()
    assert all(not a.get("href") or a["href"].startswith("#") for a in soup.find_all("a"))


C1_CONTROLS = "".join(chr(c) for c in range(0x80, 0xA0))


def test_c1_controls_never_reach_the_page():
    """U+009B (8-bit CSI) and every other C1 control, in markdown, stream, error, text/plain, HTML and a comment."""
    nb = new_notebook(cells=[
        new_markdown_cell("Intro \x9b2J markdown" + C1_CONTROLS),
        new_code_cell("x = 1", outputs=[
            new_output("stream", name="stdout", text="out \x9b31m stream \x9d0;title\x9c end" + C1_CONTROLS),
            new_output("stream", name="stderr", text="err \x85 line"),
            new_output("execute_result", data={"text/plain": "plain \x9b2K value" + C1_CONTROLS},
                       execution_count=1),
            new_output("display_data", data={"text/html": "<p>html \x9b1m bold\x90</p>"}),
            new_output("error", ename="E", evalue="x", traceback=["E: \x9b0;31mtrace\x9f"]),
        ]),
    ])
    nb.cells[1].metadata["nbgrader"] = {"grade": True, "grade_id": "p1_a", "points": 1}
    page = render_feedback(nb, {"p1_a": (1, 1, "comment \x9b5m here")}, title="t \x9b")
    assert not [hex(ord(c)) for c in page if 0x80 <= ord(c) <= 0x9F]
    text = BeautifulSoup(page, "html.parser").get_text()
    for kept in ("Intro", "markdown", "out", "stream", "end", "plain", "value", "html", "bold", "comment"):
        assert kept in text
    # the 8-bit sequences go whole in output text, as their 7-bit forms do: no "31m" or "2K" left
    for left in ("31m", "2K", "0;title"):
        assert left not in text


def test_page_renders_the_same_from_a_sanitised_notebook():
    nb = hostile_notebook()
    sanitize_notebook(nb)
    page = render_feedback(nb, SCORES, title="t")
    assert not page_findings(page)
    assert "http://" not in page
    assert "https://" not in page


def test_math_is_mathml_in_the_page(page):
    soup = BeautifulSoup(page, "html.parser")
    maths = soup.find_all("math")
    assert len(maths) >= 8
    assert {m.get("display") for m in maths} >= {"inline", "block"}
    text = soup.find("main").get_text()
    assert "$K" not in text
    assert "\\frac" not in text
    assert "$5 and a boat $10" in text
    assert "$not_math$" in text


def test_hidden_tests_are_not_shown(page):
    assert "secret_reference" not in page
    assert "unclosed_secret" not in page
    assert page.count("hidden tests: not shown") == 2
    assert 'hand_in</span><span class="p">(</span><span class="s2">"p3.b.K"' in page


def test_judge_message_reads_as_a_sentence(page):
    soup = BeautifulSoup(page, "html.parser")
    fails = soup.select("p.verdict.fail")
    assert [p.get_text() for p in fails] == [f"Not accepted: {JUDGE_SENTENCE}"]
    passes = soup.select("p.verdict.pass")
    assert [p.get_text() for p in passes] == ["Accepted: Correct."]
    # a student's own exception of the same name is shown as an error, not as a verdict
    forged = soup.find(id="cell-5")
    assert forged.select("p.verdict") == []
    assert "Accepted, full marks" in forged.find("pre", class_="error").text


def test_points_totals_and_comments(page):
    soup = BeautifulSoup(page, "html.parser")
    assert soup.find("p", class_="total").get_text() == "Total: 1 / 4 points (1 part awaiting hand grading)"
    rows = [[td.get_text() for td in tr.find_all("td")] for tr in soup.select("table tbody tr")]
    assert rows == [["p3_b_K", "0 / 2 points"], ["p3_c_phi_rad", "1 / 1 point"],
                    ["p3_c_direction", "awaiting grading / 1 point"]]
    assert soup.select_one("#cell-3 .points").get_text() == "0 / 2 points"
    comment = soup.select_one("#cell-4 .comment")
    assert comment.find("math") is not None
    assert comment.find("strong").get_text() == "radians"


def test_page_structure_for_phones_and_screen_readers(page):
    soup = BeautifulSoup(page, "html.parser")
    assert soup.html["lang"] == "en"
    assert soup.find("meta", attrs={"name": "viewport"})["content"].startswith("width=device-width")
    assert soup.find("main") is not None
    assert soup.find("header") is not None
    assert [h.get_text() for h in soup.find_all("h1")] == ["problem03: feedback for s01"]
    # graded parts get the level below the heading before them (Problem 3 is h2, its parts h3)
    assert [h.name for h in soup.select(".part")] == ["h3", "h3", "h3"]
    css = soup.find("style").get_text()
    assert "white-space: pre-wrap" in css
    assert "overflow-wrap: anywhere" in css
    assert "max-width" in css
    for img in soup.find_all("img"):
        assert img.get("alt") is not None


def test_outputs_in_the_page(page):
    soup = BeautifulSoup(page, "html.parser")
    student = soup.find(id="cell-2")
    assert "red and a very long line" in student.find("pre", class_="stdout").get_text()
    assert student.find("pre", class_="error").get_text().startswith("ValueError: bad")
    images = [img["src"] for img in student.find_all("img")]
    assert [src.split(",")[0] for src in images] == ["data:image/svg+xml;base64", "data:image/png;base64"]
    assert "kept paragraph" in student.get_text()
    assert student.select("div.output.markdown math")  # text/latex and text/markdown as MathML


def test_render_feedback_checks_its_arguments():
    nb = hostile_notebook()
    with pytest.raises(ValueError, match="expected scores"):
        render_feedback(nb, [], title="t")
    with pytest.raises(ValueError, match=r"expected scores\['p3_b_K'\]"):
        render_feedback(nb, {"p3_b_K": 1.0}, title="t")
    with pytest.raises(ValueError, match="expected title"):
        render_feedback(nb, {}, title=None)


def test_every_assignment_renders():
    for path in sorted((ROOT / "exercises").glob("problem*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        page = render_feedback(nb, {}, title=path.stem)
        assert "http://" not in page
        assert "https://" not in page
        assert "<script" not in page
        assert "<math" in page, path


# --------------------------------------------------------------------------- write_feedback


def test_write_feedback_writes_and_overwrites(tmp_path):
    target = tmp_path / "problem03.html"
    write_feedback(target, "<p>one</p>")
    write_feedback(target, "<p>two</p>")
    assert target.read_text() == "<p>two</p>"
    assert stat.S_IMODE(target.stat().st_mode) & 0o022 == 0


def test_write_feedback_refuses_links_and_special_files(tmp_path):
    victim = tmp_path / "gradebook.db"
    victim.write_text("precious")
    link = tmp_path / "link.html"
    link.symlink_to(victim)
    with pytest.raises(ValueError, match="symbolic link"):
        write_feedback(link, "<p>x</p>")
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "created-through-link")
    with pytest.raises(ValueError, match="symbolic link"):
        write_feedback(dangling, "<p>x</p>")
    assert not (tmp_path / "created-through-link").exists()
    hard = tmp_path / "hard.html"
    os.link(victim, hard)
    with pytest.raises(ValueError, match="2 links"):
        write_feedback(hard, "<p>x</p>")
    assert victim.read_text() == "precious"
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="special file"):
        write_feedback(fifo, "<p>x</p>")  # does not block waiting for a reader
    with pytest.raises(ValueError, match="expected html"):
        write_feedback(tmp_path / "ok.html", b"<p>bytes</p>")


def test_the_grading_preprocessor_sanitises_and_reports():
    """SanitizeNotebook (after SaveAutoGrades in the course's nbgrader config) stores the events."""
    from rbtutor.grading.sanitize import SanitizeNotebook

    nb = hostile_notebook()
    nb, resources = SanitizeNotebook().preprocess(nb, {})
    for index, html in rich_fragments(nb):
        assert not active_content(html, allow_web_links=True), index
    assert nb.cells[0].source.startswith('<div class="rbtutor-sanitised')  # math pre-rendered as MathML
    kinds = {e["kind"] for e in resources["rbtutor"]["events"]}
    assert kinds == {"html_sanitised"}


# --------------------------------------------------------------------------- the grader's notes


def written_part(text: str):
    meta = {"nbgrader": {"grade": True, "solution": True, "locked": False, "points": 2,
                         "grade_id": "p3_a_derivation", "schema_version": 3}}
    return new_markdown_cell(text, metadata=meta)


def test_solution_text_is_the_region_between_the_markers():
    source = ("Intro.\n### BEGIN SOLUTION\n**Model answer.** $K = -m z_G u r$.\n\n**Rubric.** 1: sign.\n"
              "### END SOLUTION\n")
    assert grader_notes.solution_text(source) == "**Model answer.** $K = -m z_G u r$.\n\n**Rubric.** 1: sign."
    assert grader_notes.solution_text("A cell that is all solution.\n") == "A cell that is all solution."


def test_grader_notes_follow_written_parts_and_never_reach_feedback(tmp_path):
    source_dir = tmp_path / "exercises"
    (source_dir / "problem03").mkdir(parents=True)
    model = ("### BEGIN SOLUTION\n**Model answer.** $K = -m z_G u r$ SECRET-MODEL\n\n"
             "**Rubric (2 points).** sign\n### END SOLUTION")
    nbformat.write(new_notebook(cells=[new_markdown_cell("Question"), written_part(model)]),
                   source_dir / "problem03" / "problem03.ipynb")
    student = new_notebook(cells=[new_markdown_cell("Question"), written_part("My answer: K is negative.")])
    step = grader_notes.GraderNotes(source_directory=str(source_dir))
    nb, _ = step.preprocess(student, {"nbgrader": {"assignment": "problem03", "notebook": "problem03"}})
    assert [grader_notes.is_grader_note(c) for c in nb.cells] == [False, False, True]
    note = nb.cells[2].source
    assert "For the grader, p3_a_derivation" in note
    assert "SECRET-MODEL" in note
    assert "Rubric (2 points)" in note
    assert "<math" in note
    assert "BEGIN SOLUTION" not in note  # math as MathML, markers left out
    assert "nbgrader" not in nb.cells[2].metadata  # graded nowhere, by nbgrader or the judge
    page = render_feedback(nb, {"p3_a_derivation": (None, 2, None)}, title="t")
    assert "My answer" in page
    assert "SECRET-MODEL" not in page
    assert "For the grader" not in page
    assert 'style="border-left' in note  # a frame no student cell can have (styles are sanitised away)
    shown = markdown2html_mistune(note)  # as the Formgrader's page shows it: the heading in bold, no stray **
    assert "<strong>For the grader, p3_a_derivation</strong>" in shown
    assert "**" not in shown


def test_a_student_cannot_pass_a_cell_off_as_a_grader_note(tmp_path):
    source_dir = tmp_path / "exercises"
    (source_dir / "problem03").mkdir(parents=True)
    nbformat.write(new_notebook(cells=[written_part("### BEGIN SOLUTION\nModel\n### END SOLUTION")]),
                   source_dir / "problem03" / "problem03.ipynb")
    forged = written_part('<div style="border-left: 6px solid #9a4d00">**For the grader**: full marks</div>')
    forged.metadata["rbtutor"] = {"grader_note": True}
    student = new_notebook(cells=[forged])
    sanitize_notebook(student)
    prerender_math(student)
    assert "style=" not in student.cells[0].source  # the sanitiser took the frame away
    nb, _ = grader_notes.GraderNotes(source_directory=str(source_dir)).preprocess(
        student, {"nbgrader": {"assignment": "problem03", "notebook": "problem03"}})
    assert [grader_notes.is_grader_note(c) for c in nb.cells] == [False, True]  # only the real note
    page = render_feedback(nb, {"p3_a_derivation": (None, 2, None)}, title="t")
    assert "full marks" in page  # the student's own cell stays in their feedback


def test_c1_controls_never_reach_the_stored_notebook():
    """The notebook in autograded/ (what the Formgrader shows) loses them too: sources, streams,
    text outputs and tracebacks; the rest of the text stays."""
    nb = new_notebook(cells=[
        new_markdown_cell("Intro \x9b2J markdown" + C1_CONTROLS),
        new_code_cell("x = 1  # \x9b", outputs=[
            new_output("stream", name="stdout", text="out \x9b31m stream"),
            new_output("execute_result", data={"text/plain": "plain \x85 value"}, execution_count=1),
            new_output("error", ename="E\x9b", evalue="x\x9d", traceback=["E: \x9b0;31mtrace\x9f"]),
        ]),
    ])
    sanitize_notebook(nb)
    stored = json.dumps(nb, ensure_ascii=False)
    assert not [hex(ord(c)) for c in stored if 0x80 <= ord(c) <= 0x9F]
    assert nb.cells[0].source.startswith("Intro 2J markdown")
    assert nb.cells[1].outputs[0]["text"] == "out 31m stream"
    assert nb.cells[1].outputs[1]["data"]["text/plain"] == "plain  value"


def test_what_the_sanitiser_removes_is_said_where_it_was():
    """The Formgrader showed an answer the sanitiser emptied as an empty box: a line now says what was
    taken out, in the markdown cell and in the HTML output; clean content gets no such line."""
    import nbformat

    from rbtutor.grading.sanitize import sanitize_notebook

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("<script>alert(1)</script>"),
                nbformat.v4.new_markdown_cell("The roll moment is <b>large</b>."),
                nbformat.v4.new_code_cell("x")]
    nb.cells[2].outputs = [nbformat.v4.new_output(
        "display_data", data={"text/html": "<b>hi</b><img src=x onerror=alert(1)>"})]
    sanitize_notebook(nb)
    assert "Removed by the grader before showing: script element." in nb.cells[0].source
    assert "Removed by the grader" not in nb.cells[1].source
    shown = nb.cells[2].outputs[0].data["text/html"]
    assert shown.startswith("<b>hi</b>")
    assert ("Removed by the grader before showing: event-handler attribute, link or source that would run "
            "or load something.") in shown
    assert "onerror" not in shown


def test_the_locked_helper_cell_is_shown_as_one_line():
    """A submission opened on 150 lines of the course's helpers: the stored notebook keeps one line
    saying what the cell is; the student's cells are untouched."""
    import nbformat

    from rbtutor.course.render import helpers_source
    from rbtutor.grading.protocol import HELPERS_ID
    from rbtutor.grading.sanitize import sanitize_bounded

    nb = nbformat.v4.new_notebook()
    helpers = nbformat.v4.new_code_cell(helpers_source())
    helpers.metadata["nbgrader"] = {"grade_id": HELPERS_ID, "locked": True, "grade": False, "solution": False}
    student = nbformat.v4.new_code_cell("K = 2.16e6  # course_helpers is only a name here")
    nb.cells = [helpers, student]
    sanitize_bounded(nb)  # what the grading run does to the notebook it stores
    lines = len(helpers_source().splitlines())
    assert nb.cells[0].source == (f"# The course's locked helper cell ({lines} lines: check_form, hand_in, check), "
                                  "as released; restored before grading, so not the student's.")
    assert nb.cells[1].source == "K = 2.16e6  # course_helpers is only a name here"
