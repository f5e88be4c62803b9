"""Feedback pages are bounded in time and size, and a cut is named (rbtutor.grading.feedback.render_bounded)."""

from __future__ import annotations

import time

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from rbtutor.grading import feedback

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


def test_a_cell_rendered_again_comes_from_the_cache_and_a_long_one_is_not_kept():
    """An assignment's own cells recur on every student's page: the second page reuses their
    rendering, and is the same page; a cell over CACHED_CHARS is rendered each time, never kept."""
    short = new_notebook(cells=[graded("p1"), new_markdown_cell("A short note on $x^2$, cached."),
                                new_code_cell("y = 2  # the same on every page")])
    first = feedback.render_feedback(short, SCORES, title="t")
    before = feedback._markdown_cell.cache_info(), feedback._highlight.cache_info()
    assert feedback.render_feedback(short, SCORES, title="t") == first
    after = feedback._markdown_cell.cache_info(), feedback._highlight.cache_info()
    assert after[0].hits == before[0].hits + 1
    assert after[1].hits == before[1].hits + 2  # both code cells
    long = "z = 1  # " + "x" * feedback.CACHED_CHARS
    page = feedback.render_feedback(new_notebook(cells=[new_code_cell(long)]), SCORES, title="t")
    assert "xxxx" in page
    assert feedback._highlight.cache_info().misses == after[1].misses  # not looked up, so never kept
