"""The HTML pages (rbtutor.grading.pages): student text escaped exactly once in every place, missing values fail.

Each page is rendered with one hostile string (a script tag, an ampersand, both quotes, a web address) in
every place a student controls. Parsed back, each of those places must hold the string exactly as it was
(escaped once: a second escape would show ``&lt;``, none would make a tag), and the page source must hold
no script tag and no escaped entity (``&amp;lt;``, ``&amp;amp;``).
"""

from __future__ import annotations

from collections import Counter

import jinja2
import pytest
from bs4 import BeautifulSoup
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from rbtutor.course.checks.stats import statistics, statistics_html
from rbtutor.course.class_report import AssignmentResult, PartResult, render_page
from rbtutor.course.similarity.report import Cell, Submissions, _prepare, _ranked, render_html
from rbtutor.grading.feedback import render_feedback
from rbtutor.grading.pages import render

HOSTILE = "<script>alert(\"x\")</script> & 'q' http://evil.example/a?b=1&c=2"


def _soup(page: str) -> BeautifulSoup:
    assert "<script" not in page.lower(), "a student's text became a tag"
    for twice in ("&amp;lt;", "&amp;gt;", "&amp;amp;", "&amp;#", "&amp;quot;"):
        assert twice not in page, f"escaped twice: {twice}"
    return BeautifulSoup(page, "html.parser")


def _holds(soup: BeautifulSoup, selector: str, text: str = HOSTILE) -> bool:
    """Whether an element matching ``selector`` has ``text`` in its text."""
    return any(text in element.get_text() for element in soup.select(selector))


def _attribute(soup: BeautifulSoup, selector: str, name: str) -> list[str]:
    return [element.get(name, "") for element in soup.select(selector)]


def _assert_places(page: str, places: list[str]) -> BeautifulSoup:
    soup = _soup(page)
    missing = [place for place in places if not _holds(soup, place)]
    assert not missing, f"not found as written in {missing}"
    return soup


# --------------------------------------------------------------------------- the feedback page


def _hostile_notebook():
    graded = {"nbgrader": {"grade": True, "solution": False, "grade_id": HOSTILE, "points": 2}}
    locked = {"nbgrader": {"grade": False, "solution": False, "locked": True, "grade_id": HOSTILE + " locked"}}
    test = {"nbgrader": {"grade": True, "solution": False, "grade_id": "p1_test", "points": 1}}
    return new_notebook(cells=[
        new_markdown_cell("Plain text: a & b < c, 'q' \"dq\""),
        new_code_cell("print(1)", metadata=graded, outputs=[
            new_output("stream", name="stdout", text=HOSTILE + " stdout"),
            new_output("stream", name="stderr", text=HOSTILE + " stderr"),
            new_output("error", ename="E", evalue="v", traceback=[HOSTILE + " error"]),
            new_output("execute_result", data={"text/plain": HOSTILE + " plain"}, execution_count=1),
            new_output("display_data", data={"text/html": "<b>x &amp; y</b>"})]),
        new_code_cell("x = 1", metadata=locked),
        new_code_cell("hand_in('p1.a.K', K)", metadata=test, outputs=[
            new_output("error", ename="AnswerNotAccepted", evalue=f"p1.a.K: {HOSTILE} verdict", traceback=[])]),
    ])


def test_feedback_page_escapes_student_text_once():
    scores = {HOSTILE: (1.0, 2.0, "Comment: a & b"), "p1_test": (0.0, 1.0, None)}
    page = render_feedback(_hostile_notebook(), scores, title=HOSTILE)
    soup = _assert_places(page, ["title", "h1", "h2.part", "header table a", "details summary", "pre.stdout",
                                 "pre.stderr", "pre.error", "pre.stream", "p.verdict.fail"])
    assert _holds(soup, "pre.stream", HOSTILE + " plain")
    assert _holds(soup, "p.verdict.fail", HOSTILE + " verdict")
    # sanitised HTML (markdown, an HTML output, the grader's comment) is put in as it is, not escaped again
    assert _holds(soup, "section.markdown p", "Plain text: a & b < c, 'q' \"dq\"")
    assert _holds(soup, "div.output.html b", "x & y")
    assert _holds(soup, "div.comment", "Comment: a & b")
    assert page.count("a &amp; b &lt; c") == 1


# --------------------------------------------------------------------------- the class report


def _hostile_result() -> AssignmentResult:
    part = PartResult("p1_a", 2.0, graded=3, full=1, to_grade=1, diagnoses=Counter({HOSTILE + " diagnosis": 2}))
    return AssignmentResult(
        HOSTILE, 3.0, final_scores={HOSTILE: 1.5, "ann": 3.0}, pending={"ann": 1}, late=[HOSTILE],
        parts={part.grade_id: part}, not_graded={"bob": HOSTILE + " reason"},
        refused_hand_grades=[f"ann nb/p1_a: {HOSTILE}"],
        flags=[{"student": HOSTILE + " flagged", "events": [{"kind": "copy", "message": HOSTILE + " event"}]}])


def test_class_report_escapes_student_text_once():
    page = render_page([_hostile_result()], HOSTILE)
    soup = _assert_places(page, ["main > p", "nav a", "section h2", "figcaption", "caption", "td", "section p"])
    for text in (" diagnosis", " reason", " flagged", " event"):
        assert _holds(soup, "td", HOSTILE + text), text
    assert _attribute(soup, "nav a", "href") == ["#" + HOSTILE]
    assert _attribute(soup, "section", "id") == ["summary", HOSTILE]  # the class summary, then one a student
    alts = _attribute(soup, "figure img", "alt")
    assert len(alts) == 2
    assert all(HOSTILE in alt for alt in alts)


# --------------------------------------------------------------------------- the statistics of the checks


def test_statistics_page_escapes_student_text_once():
    records = [{"student": HOSTILE + " s", "id": HOSTILE + " id", "epoch": i, "passed": False,
                "diagnosis": HOSTILE + " d", "refused": None} for i in range(3)]
    records.append({"student": HOSTILE + " r", "id": HOSTILE + " id", "epoch": 9, "passed": None,
                    "diagnosis": None, "refused": "limit"})
    soup = _soup(statistics_html(statistics(records, stuck_after=3), 3))
    for text in (" s", " id", " d", " r"):
        assert _holds(soup, "td", HOSTILE + text), text


# --------------------------------------------------------------------------- the similarity report


def test_similarity_page_escapes_student_text_once():
    shared = "def f(a, b):\n    c = a * b + a\n    return [c + k for k in range(b)]\n" * 3
    cells = {name: [Cell(shared + f"# {HOSTILE} code\n", True, f"{HOSTILE} where"),
                    Cell("", False, f"{HOSTILE} empty")] for name in (HOSTILE, "bob")}
    students = _prepare(cells, "")
    pairs = _ranked(students)
    found = Submissions(cells, [HOSTILE + " note"])
    soup = _assert_places(render_html(HOSTILE, pairs, found, 0.5, students),
                          ["title", "h1", "td", "section h2", "caption", "th", "p.cell", "pre", "li"])
    assert _holds(soup, "pre", HOSTILE + " code")
    assert _holds(soup, "p.cell", HOSTILE + " where")
    assert _holds(soup, "td.code p", HOSTILE + " empty")
    assert _holds(soup, "li", HOSTILE + " note")
    assert soup.select("pre mark"), "the shared code is marked"


# --------------------------------------------------------------------------- the environment


def test_a_missing_value_is_an_error_not_an_empty_string():
    with pytest.raises(jinja2.UndefinedError, match="stuck_after"):
        render("stats.html", title="t", rows=[])
    with pytest.raises(jinja2.UndefinedError, match="generated"):
        render("class_report.html", title="t", sections=[])


def test_every_page_has_the_shared_frame():
    pages = [render_feedback(new_notebook(), {}, title="f"), render_page([], "now"), statistics_html([], 3),
             render_html("a", [], Submissions(), 0.5, {})]
    for page in pages:
        soup = _soup(page)
        assert page.startswith("<!DOCTYPE html>")
        assert soup.html["lang"] == "en"
        csp = soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"})["content"]
        assert csp.startswith("default-src 'none';")
        assert "script-src" not in csp
        assert soup.find("meta", attrs={"name": "viewport"})
        assert "color-scheme: light" in soup.style.get_text()
