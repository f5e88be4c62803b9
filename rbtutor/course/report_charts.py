"""The class report's two charts, drawn as SVG text: a stacked histogram and a bar chart.

Written out by hand because they are simple and the report is made after every grading run:
matplotlib drew the 22 figures of an 11-assignment class in 3.4 s of a 27 s run of 30
notebooks (0.07 s a figure at best, plus 0.5 s to import it); these take milliseconds. Each
function returns a complete SVG document, put into the page as a ``data:`` image, so it runs
nothing and loads nothing. Every piece of text in it goes through :func:`_e`.
"""

from __future__ import annotations

import html
import math

FONT = 'font-family="system-ui, sans-serif" font-size="12"'
INK, GRID, BAR, SECOND = "#1a1a1a", "#d0d0d0", "#1f5f99", "#e0a030"
CHAR_WIDTH = 7.2  # px of a 12 px sans-serif character, a little above the average, for the label column


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _tick(value: float) -> str:
    return f"{value:.4g}"


def _svg(width: float, height: float, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" {FONT} fill="{INK}">'
            f'<rect width="100%" height="100%" fill="#fff"/>{"".join(body)}</svg>')


def count_step(top: int, most: int = 6) -> int:
    """A step of 1, 2 or 5 times a power of ten giving at most ``most`` intervals up to ``top``."""
    step = 1
    while math.ceil(top / step) > most:
        for factor in (2, 5 / 2, 2):  # 1 -> 2 -> 5 -> 10 -> 20 ...
            step = round(step * factor)
            if math.ceil(top / step) <= most:
                break
    return step


def histogram_svg(counts: list[tuple[int, int]], edges: list[float], xlabel: str,
                  legend: tuple[str, str] | None = None) -> str:
    """Stacked bars, one per bin between ``edges``: ``(first, second)`` counts, the second on top.

    The y axis counts in whole numbers; ``legend`` names the two stacks (shown when given)."""
    width, height, left, right, top, bottom = 640, 320, 52, 16, 34 if legend else 14, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    highest = max((a + b for a, b in counts), default=0) or 1
    step = count_step(highest)
    y_top = step * math.ceil(highest / step)
    lo, hi = edges[0], edges[-1]

    def x(value: float) -> float:
        return left + plot_w * (value - lo) / ((hi - lo) or 1)

    def y(count: int) -> float:
        return top + plot_h * (1 - count / y_top)

    body = []
    for k in range(0, y_top + 1, step):
        body.append(f'<line x1="{left}" x2="{width - right}" y1="{y(k):.1f}" y2="{y(k):.1f}" stroke="{GRID}"/>'
                    f'<text x="{left - 6}" y="{y(k) + 4:.1f}" text-anchor="end">{k}</text>')
    for (first, second), a, b in zip(counts, edges, edges[1:], strict=False):
        for base, n, colour in ((0, first, BAR), (first, second, SECOND)):
            if n:
                body.append(f'<rect x="{x(a) + 1:.1f}" y="{y(base + n):.1f}" width="{x(b) - x(a) - 2:.1f}" '
                            f'height="{y(base) - y(base + n):.1f}" fill="{colour}"/>')
    labelled = edges if len(edges) <= 11 else edges[::2]
    for v in labelled:
        body.append(f'<text x="{x(v):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_tick(v)}</text>')
    body.append(f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="{INK}"/>'
                f'<text x="{left + plot_w / 2:.0f}" y="{height - 8}" text-anchor="middle">{_e(xlabel)}</text>'
                f'<text transform="translate(14 {top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle">'
                "students</text>")
    if legend:
        at = width - right - 330
        for k, (name, colour) in enumerate(zip(legend, (BAR, SECOND), strict=True)):
            body.append(f'<rect x="{at + 165 * k}" y="10" width="12" height="12" fill="{colour}"/>'
                        f'<text x="{at + 165 * k + 17}" y="20">{_e(name)}</text>')
    return _svg(width, height, body)


def bars_svg(names: list[str], percents: list[float], notes: list[str], xlabel: str) -> str:
    """One horizontal bar per name, from 0 to its percentage, with its note just past its end;
    the first name at the top."""
    rows = max(len(names), 1)
    label_w = CHAR_WIDTH * max((len(n) for n in names), default=4) + 12
    width, right, top, bottom, row_h = 640, 16, 10, 44, 26
    left = min(label_w, width / 2)
    plot_w, height = width - left - right, top + row_h * rows + bottom

    def x(percent: float) -> float:
        return left + plot_w * percent / 115  # room past 100 % for the notes

    body = []
    for p in range(0, 101, 20):
        body.append(f'<line x1="{x(p):.1f}" x2="{x(p):.1f}" y1="{top}" y2="{top + row_h * rows}" stroke="{GRID}"/>'
                    f'<text x="{x(p):.1f}" y="{top + row_h * rows + 16}" text-anchor="middle">{p}</text>')
    for k, (name, percent, note) in enumerate(zip(names, percents, notes, strict=True)):
        middle = top + row_h * k + row_h / 2
        body.append(f'<text x="{left - 6:.1f}" y="{middle + 4:.1f}" text-anchor="end">{_e(name)}</text>'
                    f'<rect x="{left:.1f}" y="{middle - 8:.1f}" width="{x(percent) - left:.1f}" height="16" '
                    f'fill="{BAR}"/><text x="{x(percent) + 4:.1f}" y="{middle + 4:.1f}">{_e(note)}</text>')
    body.append(f'<line x1="{left:.1f}" x2="{left:.1f}" y1="{top}" y2="{top + row_h * rows}" stroke="{INK}"/>'
                f'<text x="{left + plot_w / 2:.0f}" y="{height - 8}" text-anchor="middle">{_e(xlabel)}</text>')
    return _svg(width, height, body)
