"""Sanitising is bounded: what nh3 and the markdown renderer are given, the time one notebook's
cleaning may take, and the size of the notebook stored (rbtutor.grading.allowlist, .mathml, .sanitize).

Hostile notebooks are built here the way issue 33 describes them (nested ``<div>``, formatting
elements a parser re-opens, runs of markdown marks, a reference used thousands of times), only
smaller, so that today's parser takes milliseconds on them; each test checks the bound by what
reached the parser or what was stored, never by a clock.
"""

from __future__ import annotations

import copy
import os
import re
import select
import signal
import subprocess
import sys

import nh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from rbtutor.grading import allowlist, feedback, html_shape, mathml, sanitize
from rbtutor.grading.config import GRADING

LIMIT = GRADING.sanitize_max_html_depth
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
DEEP = "<div>" * 2_000 + "the words inside"


def deepest(fragment: str) -> int:
    """Nesting depth of HTML as nh3 writes it (every element closed, void elements aside)."""
    depth = best = 0
    for closing, name, self_closing in re.findall(r"<(/?)([A-Za-z][^\s/>]*)[^>]*?(/?)>", fragment):
        if closing:
            depth -= 1
        elif not self_closing and name.lower() not in VOID:
            depth += 1
            best = max(best, depth)
    return best


@pytest.fixture
def parsed(monkeypatch):
    """Every fragment nh3 is given, whichever cleaner is used."""
    seen: list[str] = []

    class Spy:
        def __init__(self, cleaner):
            self.cleaner = cleaner

        def clean(self, fragment):
            seen.append(fragment)
            return self.cleaner.clean(fragment)

    for kind, cleaner in list(allowlist._CLEANERS.items()):
        monkeypatch.setitem(allowlist._CLEANERS, kind, Spy(cleaner))
    return seen


# --------------------------------------------------------------------------- what nh3 is given


def test_deeply_nested_markdown_never_reaches_nh3_and_is_named(parsed):
    nb = new_notebook(cells=[new_markdown_cell(DEEP), new_markdown_cell("An honest *cell*.")])
    events = sanitize.sanitize_notebook(nb)
    assert all(fragment.count("<div") <= LIMIT for fragment in parsed)
    assert [e["cell"] for e in events] == [0]
    assert f"nested deeper than {LIMIT} levels" in events[0]["message"]
    assert "the words inside" in nb.cells[0].source  # its text is shown, escaped
    assert "<div><div>" not in nb.cells[0].source
    mathml.prerender_math(nb)
    assert "<em>cell</em>" in nb.cells[1].source


@pytest.mark.parametrize("mime", ["text/html", "image/svg+xml"])
def test_deeply_nested_outputs_never_reach_nh3_and_are_named(parsed, mime):
    body = DEEP if mime == "text/html" else "<svg>" + "<g>" * 2_000 + "</svg>"
    nb = new_notebook(cells=[new_code_cell("x", outputs=[new_output("display_data", data={mime: body})])])
    events = sanitize.sanitize_notebook(nb)
    assert all(deepest(fragment) <= LIMIT for fragment in parsed), "a deep fragment was parsed"
    assert len(events) == 1, events
    assert "nested deeper than" in events[0]["message"]
    kept = nb.cells[0].outputs[0].data.get(mime, "")
    assert deepest(kept) <= 2


def test_formatting_elements_reopened_at_every_block_are_not_parsed(parsed):
    """``<div><b id=k></div>`` k times: a parser re-opens every earlier <b> in each new block, so
    its output grows with the square of the input (6,000 of them: 126 MB, 30 s)."""
    fragment = "".join(f"<div><b id={k}>x</div>" for k in range(300))
    nb = new_notebook(cells=[new_code_cell("x", outputs=[new_output("display_data",
                                                                    data={"text/html": fragment})])])
    events = sanitize.sanitize_notebook(nb)
    assert parsed == []
    assert len(nb.cells[0].outputs[0].data["text/html"]) < 2 * len(fragment)
    assert events
    assert "shown as text" in events[0]["message"]


def test_honest_html_is_cleaned_exactly_as_before(parsed):
    """Tables, lists twenty deep, an SVG of many paths, MathML and sloppy paragraphs pass the reading."""
    table = "<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody>" + \
        "".join(f"<tr><td>{k}</td><td><b>{k * k}</b></td></tr>" for k in range(500)) + "</tbody></table>"
    lists = "<ul><li>" * 20 + "deep item" + "</li></ul>" * 20
    svg = '<svg viewBox="0 0 10 10"><g>' + '<path d="M0 0 L1 1"/>' * 500 + "</g></svg>"
    sloppy = "<p>one<p>two<li>three<li>four" * 50 + "<b>bold</div>" * 30
    formula = mathml.math_to_mathml(r"$$\frac{a_1 + \sqrt{b^2}}{\sum_{i=1}^n x_i^2} \cdot " * 8 + "$$")
    for fragment, kind in ((table, "notebook"), (lists, "page"), (svg, "svg"), (sloppy, "notebook"),
                           (formula, "page")):
        assert html_shape.shape_problem(fragment) is None, fragment[:60]
        assert allowlist.clean_fragment(fragment, kind) == allowlist.clean_fragment(fragment, kind, checked=True)
    # each went to nh3, twice: read first, then as it was
    assert sum(f in (table, lists, svg, sloppy, formula) for f in parsed) == 10


@pytest.mark.parametrize("fragment", [
    '<div a="x"=" >' + "<div>" * 500 + ' "',  # a quote that opens no value
    '<div title="</div>">' * 500,  # an end tag inside a value
    "<svg><div>" + "<div/>" * 500,  # HTML after SVG: '/>' closes nothing
    "<div><table></div>" * 300,  # an end tag the table's scope hides
    "<table><td>" * 300,  # cells imply rows and row groups
    "<ul><li>" * 300,
], ids=["quote", "end-in-value", "svg-breakout", "table-scope", "implied", "lists"])
def test_tricks_that_hide_depth_from_a_simple_reader_are_caught(fragment):
    assert html_shape.shape_problem(fragment) is not None


_PIECES = ["<div>", "</div>", "<b>", "</b>", "<i id=1>", "</i>", "<a>", "</a>", "<p>", "</p>", "<li>", "<ul>",
           "</ul>", "<table>", "<td>", "<tr>", "</table>", "<span>", "</span>", "<svg>", "<g>", "</g>", "<g/>",
           "</svg>", "<em>", "x", " ", "<br>", "</br>", "<button>", "<h1>", "</h2>", "<select>", "<option>",
           "<textarea>", "</textarea>", "<!-- <div> -->", "<math>", "<mi>"]
_EVERY_TAG = nh3.Cleaner(tags={"div", "b", "i", "a", "p", "li", "ul", "table", "tbody", "td", "tr", "span", "svg",
                               "g", "em", "br", "button", "h1", "h2", "select", "option", "textarea", "math", "mi"},
                         attributes={}, link_rel=None, clean_content_tags=set())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=41, max_size=400))
def test_what_passes_the_reading_is_no_deeper_than_the_limit_when_parsed(pieces):
    """The reader is cautious: a fragment it lets through never parses deeper than the limit."""
    fragment = "".join(pieces)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(html_shape, "MAX_HTML_DEPTH", 12)
        passed = html_shape.shape_problem(fragment) is None
    if passed:
        assert deepest(_EVERY_TAG.clean(fragment)) <= 12


# --------------------------------------------------------------------------- what the markdown renderer is given


def test_a_paragraph_of_many_marks_is_shown_literally():
    """Runs of '[' or '*' cost markdown-it more than linear time (80,000 '[' took seconds)."""
    text = "[" * (mathml.MAX_INLINE_MARKS + 1) + " and *not emphasis*"
    html_, removed = mathml.markdown_html(text, "notebook")
    assert "<em>" not in html_
    assert "[[[[" in html_
    assert "*not emphasis*" in html_
    assert removed == [f"1 paragraph(s) with more than {mathml.MAX_INLINE_MARKS} marks (shown literally)"]
    assert "<em>" in mathml.markdown_html("[" * 10 + " and *emphasis*", "notebook")[0]


def test_a_reference_used_thousands_of_times_is_not_rendered():
    """A link definition is copied into every use: 85 kB of markdown once rendered as 100 MB."""
    text = "[a]: http://example.org/" + "y" * 5_000 + "\n\n" + "[a] " * 300
    html_, removed = mathml.markdown_html(text, "notebook")
    assert len(html_) < 2 * len(text)  # rendered, it would be 1.5 MB
    assert removed == [f"markdown that renders to more than {html_shape.MAX_HTML_CHARS} characters (shown as text)"]


def test_many_code_blocks_are_read_once_for_math(monkeypatch):
    """The math scanner looked through every code block at every step: 5,000 blocks took 6 s."""
    reads = [0]

    class Counted(list):
        def __iter__(self):
            for item in super().__iter__():
                reads[0] += 1
                yield item

        def __getitem__(self, key):
            reads[0] += 1
            return super().__getitem__(key)

    found = mathml._code_regions
    monkeypatch.setattr(mathml, "_code_regions", lambda text: Counted(found(text)))
    text = "    code\n\ntext $b$ more\n\n" * 1_000
    _, formulas = mathml._scan_math(text)
    assert len(formulas) == 1_000
    assert reads[0] < 20 * 1_000


# --------------------------------------------------------------------------- the time bound


@pytest.fixture
def fresh_cleaner():
    """A cleaner forked after the test's replacements (a running one keeps the code it was forked with)."""
    sanitize.stop_cleaner()
    yield
    sanitize.stop_cleaner()


def test_sanitising_runs_in_a_child_that_is_killed_at_its_bound(monkeypatch, tmp_path, fresh_cleaner):
    """One call that stays in C (nh3 on 40,000 nested <div>, many seconds) cannot outlast the bound."""
    pid_file = tmp_path / "pid"

    def stuck_in_c(nb):
        pid_file.write_text(str(os.getpid()))
        allowlist._CLEANERS["notebook"].clean("<div>" * 40_000)
        return []

    monkeypatch.setattr(sanitize, "sanitize_notebook", stuck_in_c)
    monkeypatch.setattr(sanitize, "SANITIZE_TIME_LIMIT", 1.0, raising=False)
    nb = new_notebook(cells=[new_markdown_cell("*kept as it was*")])
    with pytest.raises(sanitize.SanitizeTimeLimit, match="longer than 1 s"):
        sanitize.SanitizeNotebook().preprocess(nb, {})
    child = int(pid_file.read_text())
    assert child != os.getpid()
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(child, 0)
    assert nb.cells[0].source == "*kept as it was*"
    assert sanitize.cleaner_pid() is None
    monkeypatch.undo()
    sanitize.stop_cleaner()
    there = new_notebook(cells=[new_markdown_cell("$x$ <script>x</script>")])
    assert [e["kind"] for e in sanitize.sanitize_bounded(there, time_limit=60)] == ["html_sanitised"]
    assert sanitize.cleaner_pid() not in (None, child)  # the next notebook gets a new cleaner
    assert "<math" in there.cells[0].source
    assert "<script" not in there.cells[0].source


def test_a_child_that_fails_is_a_clear_error_and_serves_the_next_notebook(monkeypatch, fresh_cleaner):
    def broken(nb):
        if nb.cells:
            raise ValueError("no such cell")
        return []

    monkeypatch.setattr(sanitize, "sanitize_notebook", broken)
    with pytest.raises(sanitize.SanitizeError, match="ValueError: no such cell"):
        sanitize.sanitize_bounded(new_notebook(cells=[new_markdown_cell("x")]), time_limit=30)
    cleaner = sanitize.cleaner_pid()
    assert sanitize.sanitize_bounded(new_notebook(), time_limit=30) == []
    assert sanitize.cleaner_pid() == cleaner


def test_one_cleaner_serves_notebook_after_notebook(fresh_cleaner):
    """The cleaner is kept: the second notebook goes to the same process, which is not this one."""
    first = new_notebook(cells=[new_markdown_cell("one $a$")])
    sanitize.sanitize_bounded(first, time_limit=60)
    cleaner = sanitize.cleaner_pid()
    assert cleaner not in (None, os.getpid())
    second = new_notebook(cells=[new_markdown_cell("two <b onclick=x>b</b>")])
    assert [e["kind"] for e in sanitize.sanitize_bounded(second, time_limit=60)] == ["html_sanitised"]
    assert sanitize.cleaner_pid() == cleaner
    assert "onclick" not in second.cells[0].source
    assert "<math" in first.cells[0].source


def test_a_cleaner_killed_from_outside_is_replaced_or_named(fresh_cleaner):
    """Killed while idle: the next notebook starts a new one. Killed while working: a clear error."""
    sanitize.sanitize_bounded(new_notebook(), time_limit=60)
    idle = sanitize.cleaner_pid()
    os.kill(idle, signal.SIGKILL)
    os.waitid(os.P_PID, idle, os.WEXITED | os.WNOWAIT)  # it has died (left for the grader to reap)
    nb = new_notebook(cells=[new_markdown_cell("$y$")])
    assert sanitize.sanitize_bounded(nb, time_limit=60) == []
    assert sanitize.cleaner_pid() not in (None, idle)
    assert "<math" in nb.cells[0].source
    with pytest.raises(ProcessLookupError):  # the dead one was reaped
        os.kill(idle, 0)


def test_an_idle_cleaner_ends_and_the_next_notebook_gets_a_new_one(monkeypatch, fresh_cleaner):
    """A process that lives on between runs (the Formgrader's server) does not keep a cleaner for ever."""
    monkeypatch.setattr(sanitize, "CLEANER_IDLE_SECONDS", 0.3)  # read by the cleaner forked below
    sanitize.sanitize_bounded(new_notebook(), time_limit=60)
    idle = sanitize.cleaner_pid()
    os.waitid(os.P_PID, idle, os.WEXITED | os.WNOWAIT)  # it ends by itself (left for the grader to reap)
    nb = new_notebook(cells=[new_markdown_cell("$q$")])
    assert sanitize.sanitize_bounded(nb, time_limit=60) == []
    assert sanitize.cleaner_pid() not in (None, idle)
    assert "<math" in nb.cells[0].source


def test_a_notebook_sent_as_the_cleaner_ends_idle_goes_to_a_new_one(monkeypatch, fresh_cleaner):
    """The cleaner gave up waiting just as a notebook was sent (the check before sending saw it
    alive): it read nothing, so the notebook goes to a new cleaner instead of failing."""
    monkeypatch.setattr(sanitize, "CLEANER_IDLE_SECONDS", 0.3)
    sanitize.sanitize_bounded(new_notebook(), time_limit=60)
    idle = sanitize.cleaner_pid()
    os.waitid(os.P_PID, idle, os.WEXITED | os.WNOWAIT)
    monkeypatch.setattr(sanitize._Cleaner, "alive", lambda self: True)
    nb = new_notebook(cells=[new_markdown_cell("$r$ <script>x</script>")])
    assert [e["kind"] for e in sanitize.sanitize_bounded(nb, time_limit=60)] == ["html_sanitised"]
    assert sanitize.cleaner_pid() not in (None, idle)
    with pytest.raises(ProcessLookupError):  # the ended one was reaped
        os.kill(idle, 0)


def test_a_cleaner_killed_before_it_read_the_notebook_is_an_error_not_a_retry(monkeypatch, fresh_cleaner):
    """Only a cleaner that ended for want of work is known to have read nothing: any other end is
    the clear error it was."""
    sanitize.sanitize_bounded(new_notebook(), time_limit=60)
    killed = sanitize.cleaner_pid()
    os.kill(killed, signal.SIGKILL)
    os.waitid(os.P_PID, killed, os.WEXITED | os.WNOWAIT)
    monkeypatch.setattr(sanitize._Cleaner, "alive", lambda self: True)
    with pytest.raises(sanitize.SanitizeError, match=f"its process \\({killed}\\) ended without a result"):
        sanitize.sanitize_bounded(new_notebook(), time_limit=60)


def test_a_forked_process_starts_its_own_cleaner(fresh_cleaner):
    """A worker forked from a process with a cleaner never writes to the parent's: it has its own."""
    sanitize.sanitize_bounded(new_notebook(), time_limit=60)
    parents = sanitize.cleaner_pid()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            unset = sanitize.cleaner_pid() is None
            sanitize.sanitize_bounded(new_notebook(cells=[new_markdown_cell("$z$")]), time_limit=60)
            os.write(write_end, f"{unset} {sanitize.cleaner_pid()}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        unset, childs = answer.read().split()
    os.waitpid(pid, 0)
    assert unset == "True"
    assert int(childs) not in (parents, pid, os.getpid())
    assert sanitize.cleaner_pid() == parents
    assert sanitize.sanitize_bounded(new_notebook(), time_limit=60) == []  # the parent's still answers it


def test_the_cleaner_holds_none_of_its_parents_pipes(fresh_cleaner):
    """A pipe this process had when the cleaner was forked ends when this process closes it (a
    subprocess waiting for its stdin to end would otherwise wait for the cleaner)."""
    read_end, write_end = os.pipe()
    try:
        sanitize.sanitize_bounded(new_notebook(), time_limit=60)
        assert sanitize.cleaner_pid() is not None
        os.close(write_end)
        readable, _, _ = select.select([read_end], [], [], 10)
        assert readable
        assert os.read(read_end, 1) == b""
    finally:
        os.close(read_end)


def test_the_cleaner_ends_with_its_process(tmp_path):
    """A grading worker that exits leaves no cleaner behind: its requests end and it exits."""
    code = ("from nbformat.v4 import new_notebook\n"
            "from rbtutor.grading import sanitize\n"
            "sanitize.sanitize_bounded(new_notebook(), time_limit=60)\n"
            "print(sanitize.cleaner_pid())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    try:
        ended = os.pidfd_open(int(done.stdout))
    except ProcessLookupError:
        return  # already gone and reaped
    try:
        readable, _, _ = select.select([ended], [], [], 30)  # a process's pidfd turns readable when it ends
    finally:
        os.close(ended)
    assert readable, f"cleaner {int(done.stdout)} still running 30 s after its process exited"


def test_the_bounded_cleaning_gives_what_cleaning_in_process_gives():
    cells = [new_markdown_cell("Text with $x^2$ and <script>alert(1)</script>"), new_markdown_cell(DEEP),
             new_code_cell("x", outputs=[new_output("display_data", data={"text/html": "<b onclick=x>b</b>",
                                                                          "application/javascript": "x"})])]
    here, there = new_notebook(cells=copy.deepcopy(cells)), new_notebook(cells=copy.deepcopy(cells))
    events = sanitize.sanitize_notebook(here)
    mathml.prerender_math(here)
    assert sanitize.sanitize_bounded(there, time_limit=60) == events
    assert there == here


# --------------------------------------------------------------------------- the stored size


def test_the_stored_notebook_is_capped_and_the_largest_student_cells_give_way():
    locked = new_markdown_cell("instructor text " * 2_000, metadata={"nbgrader": {"locked": True,
                                                                                 "grade_id": "intro"}})
    answer = new_markdown_cell("written answer " * 3_000, metadata={"nbgrader": {
        "grade": True, "solution": True, "grade_id": "p1_words", "points": 2}})
    pasted = new_markdown_cell("see picture", attachments={"big.png": {"image/png": "iVBORw0K" * 40_000}})
    small = new_code_cell("x = 1", metadata={"nbgrader": {"grade_id": "p1_code", "solution": True}})
    nb = new_notebook(cells=[locked, answer, pasted, small], metadata={"rbtutor": {"verdicts": ["kept"]}})
    events = sanitize.bound_stored_size(nb, max_bytes=60_000)
    assert len(sanitize.json.dumps(nb)) <= 60_000
    assert [e["cell"] for e in events] == [2, 1]  # the largest first; the locked cell stays
    assert all(e["kind"] == "stored_size_cut" for e in events)
    assert events[1]["grade_id"] == "p1_words"
    assert nb.cells[0].source.startswith("instructor text")
    assert "attachments" not in nb.cells[2]
    assert nb.cells[1].metadata["nbgrader"]["grade_id"] == "p1_words"
    assert nb.metadata["rbtutor"] == {"verdicts": ["kept"]}
    assert nb.cells[3].source == "x = 1"


def test_issue_33_notebook_is_cleaned_small_and_every_cell_named():
    """Nested-div cells as issue 33 built them (fewer here): each is named and stored as its text."""
    nb = new_notebook(cells=[new_markdown_cell("<div>" * 19_800 + f"cell {k}") for k in range(3)])
    events = sanitize.sanitize_bounded(nb, time_limit=120)
    assert [e["cell"] for e in events] == [0, 1, 2]
    assert all("nested deeper than" in e["message"] for e in events)
    assert len(sanitize.json.dumps(nb)) < 20_000
    assert all(f"cell {k}" in nb.cells[k].source for k in range(3))


# --------------------------------------------------------------------------- the feedback page


def test_the_feedback_page_gives_nh3_nothing_deep(parsed):
    nb = new_notebook(cells=[new_markdown_cell(DEEP), new_code_cell("x", outputs=[
        new_output("display_data", data={"text/html": DEEP}),
        new_output("display_data", data={"image/svg+xml": "<svg>" + "<g>" * 2_000 + "</svg>"})])])
    page, cuts = feedback.render_bounded(nb, {}, title="t")
    assert cuts == []
    assert all(deepest(fragment) <= LIMIT for fragment in parsed)
    assert page.count("nested deeper than") == 2  # markdown and HTML shown as text; the SVG dropped
    assert "the words inside" in page
