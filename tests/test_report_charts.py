"""The class report's SVG charts (rbtutor.course.report_charts): what they draw is the data."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest

from rbtutor.course.report_charts import bars_svg, count_step, histogram_svg

SVG = "{http://www.w3.org/2000/svg}"


def _rects(svg: str) -> list[dict]:
    return [dict(r.attrib) for r in ElementTree.fromstring(svg).iter(f"{SVG}rect")][1:]  # after the background


def _texts(svg: str) -> list[str]:
    return [t.text for t in ElementTree.fromstring(svg).iter(f"{SVG}text")]


@pytest.mark.parametrize(("top", "step"), [(1, 1), (6, 1), (7, 2), (12, 2), (13, 5), (30, 5), (31, 10),
                                           (60, 10), (61, 20), (250, 50), (3000, 500)])
def test_count_step_is_one_two_or_five_times_a_power_of_ten(top, step):
    assert count_step(top) == step


def test_histogram_bars_are_as_tall_as_their_counts():
    counts = [(0, 0), (3, 0), (1, 2), (6, 0)]
    svg = histogram_svg(counts, [0.0, 1.0, 2.0, 3.0, 4.0], "final score (of 4)", ("final", "to grade"))
    bars = [r for r in _rects(svg) if float(r["height"]) > 0 and float(r["width"]) > 12]
    heights = [float(r["height"]) for r in bars]
    assert len(bars) == 4  # 3, 1 with 2 on top, 6; the empty bin draws nothing
    unit = heights[0] / 3
    assert heights == pytest.approx([3 * unit, unit, 2 * unit, 6 * unit], abs=0.15)
    first, second = bars[1], bars[2]  # the stacked bin: the second count sits on the first
    assert float(second["y"]) + float(second["height"]) == pytest.approx(float(first["y"]), abs=0.15)
    assert first["fill"] != second["fill"]
    assert {"final", "to grade", "final score (of 4)", "students"} <= set(_texts(svg))
    y_ticks = [t.text for t in ElementTree.fromstring(svg).iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert y_ticks == ["0", "1", "2", "3", "4", "5", "6"]


def test_histogram_without_legend_or_scores():
    svg = histogram_svg([(0, 0)] * 3, [0.0, 1.0, 2.0, 3.0], "x")
    assert _rects(svg) == []
    assert "final" not in _texts(svg)


def test_bars_are_as_long_as_their_percentages_and_text_is_escaped():
    names = ["p1_a", "<script>alert(1)</script>", "p1_c"]
    svg = bars_svg(names, [100.0, 50.0, 0.0], ["3/3", "1/2", "0/4"], "submissions with full points (%)")
    widths = [float(r["width"]) for r in _rects(svg)]
    assert widths[0] == pytest.approx(2 * widths[1], abs=0.15)
    assert widths[2] == 0
    assert "<script" not in svg
    texts = _texts(svg)
    assert names[1] in texts  # as text, escaped in the document
    assert {"3/3", "1/2", "0/4"} <= set(texts)
    tops = [float(r["y"]) for r in _rects(svg)]
    assert tops == sorted(tops)  # the first name at the top
