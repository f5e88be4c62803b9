"""Feedback pages are bounded in time and size, and a cut is named (rbtutor.grading.feedback.render_bounded)."""

from __future__ import annotations

import time

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from rbtutor.grading import feedback, mathml

SCORES = {"p1": (1.0, 2.0, None), "p2": (0.0, 3.0, None)}


def graded(grade_id: str):
    return new_code_cell("x = 1", metadata={"nbgrader": {"grade": True, "grade_id": grade_id, "points": 1}})


def notebook(cells: int):
    return new_notebook(cells=[graded("p1"), *[new_markdown_cell(f"Paragraph {k}: " + "words " * 200)
                                              for k in range(cells)], graded("p2")])


def test_an_unbounded_page_is_whole():
    page, cuts = feedback.render_bounded(notebook(20), SCORES, title="t")
    assert cuts == []
    assert "Paragraph 19" in page
    assert "cells not shown" not in page


def test_a_page_over_its_size_is_cut_and_says_so():
    page, cuts = feedback.render_bounded(notebook(2000), SCORES, title="t", max_bytes=50_000)
    assert len(cuts) == 1, cuts
    assert "size limit of 50000 bytes" in cuts[0], cuts
    assert "cells not shown" in page
    assert "Paragraph 1999" not in page
    assert len(page.encode()) < 120_000
    assert "Total: 1 / 5 points" in page
    assert "p2" in page  # every part is still counted


def test_a_slow_page_is_cut_between_cells(monkeypatch):
    render = feedback._markdown_cell

    def slow(*args, **kwargs):
        time.sleep(0.02)
        return render(*args, **kwargs)

    monkeypatch.setattr(feedback, "_markdown_cell", slow)
    started = time.monotonic()
    page, cuts = feedback.render_bounded(notebook(500), SCORES, title="t", time_limit=0.5)
    assert time.monotonic() - started < 3
    assert len(cuts) == 1, cuts
    assert "time limit of 0.5 s" in cuts[0], cuts
    assert "Total: 1 / 5 points" in page


def test_one_endless_cell_is_stopped_and_the_page_keeps_the_scores(monkeypatch):
    def endless(*args, **kwargs):
        while True:
            time.sleep(0.01)

    monkeypatch.setattr(feedback, "_markdown_cell", endless)
    started = time.monotonic()
    page, cuts = feedback.render_bounded(notebook(3), SCORES, title="t", time_limit=0.4)
    assert time.monotonic() - started < 0.4 * feedback.HARD_TIME_FACTOR + 2
    assert cuts, cuts
    assert "every cell left out" in cuts[-1], cuts
    assert "Total: 1 / 5 points" in page
    assert "Paragraph" not in page


def test_a_cell_rendered_again_comes_from_the_cache_and_the_same_page_results():
    """An assignment's own cells recur on every student's page: the second page reuses their
    rendering (markdown and highlighted code) and is the same page."""
    short = new_notebook(cells=[graded("p1"), new_markdown_cell("A short note on $x^2$, remembered."),
                                new_code_cell("y = 2  # the same on every page")])
    first = feedback.render_feedback(short, SCORES, title="t")
    before = mathml._rendered_markdown.hits, feedback._highlight.hits
    assert feedback.render_feedback(short, SCORES, title="t") == first
    assert mathml._rendered_markdown.hits == before[0] + 1
    assert feedback._highlight.hits == before[1] + 2  # both code cells


def test_what_is_remembered_stays_within_its_budget_and_a_large_rendering_is_not_kept():
    calls = []

    def render(text: str, times: int) -> tuple[str, tuple[str, ...]]:
        calls.append(text)
        return text * times, ("removed",)

    remembered = mathml.Remembered(render)
    remembered.BUDGET = 6_400  # an entry of at most 100 characters is kept
    assert remembered("a" * 10, 2) == ("a" * 20, ("removed",))
    assert remembered("a" * 10, 2) == ("a" * 20, ("removed",))
    assert (remembered.hits, remembered.misses, len(calls)) == (1, 1, 1)
    remembered("b" * 60, 2)  # 60 + 120 + 7 characters: rendered, not kept
    assert ("b" * 60, 2) not in remembered.kept
    for k in range(200):
        remembered(f"{k:04d}", 10)
        assert remembered.size <= remembered.BUDGET
    assert ("a" * 10, 2) not in remembered.kept  # the oldest went first
    assert ("0199", 10) in remembered.kept
    assert remembered.size == sum(size for _, size in remembered.kept.values())
