"""Step: intake, source copies. A submitted notebook that is the instructor's source, or holds its solutions, is named.

The notebook step (:mod:`.notebooks`) asks :class:`Submitted` whether a rebuilt
notebook copies one of the assignment's source notebooks; :func:`source_copy`
answers the same question for one pair of notebooks.

Source copies
-------------
A notebook earns nothing, is not written, and is named (``source_copy``) when

* any of its cells holds an nbgrader marker line (``### BEGIN SOLUTION``,
  ``### END SOLUTION``, ``### BEGIN HIDDEN TESTS``, ``### END HIDDEN TESTS``: a
  line starting with ``#`` marks followed by the marker), which only the
  instructor's source has; or
* it contains solution text of the instructor's source verbatim (up to
  whitespace): a solution text *matches* when its lines, with all whitespace
  removed and blank lines dropped, occur as consecutive lines of one submitted
  cell (any cell, whatever its ``grade_id``). A notebook is a copy when one
  *strong* text matches (at least :data:`STRONG_LINES` lines and
  :data:`STRONG_CHARS` non-blank characters, or :data:`PROSE_CHARS` characters: a
  paragraph of the model answer), or at least two *non-trivial* texts match
  (each at least :data:`NONTRIVIAL_LINES` lines and :data:`NONTRIVIAL_CHARS`
  characters). One short line, or a two-line computation that the problem all but
  dictates, never counts on its own: in problem 3 an honest student who writes
  every code answer exactly as the key does is not flagged (one of its three code
  answers is non-trivial, and none is strong); the key's model answers in prose
  are.
"""

from __future__ import annotations

import bisect
import re

from .limits import show_name

#: a strong match: this many lines and characters, or PROSE_CHARS characters in any number of lines
STRONG_LINES, STRONG_CHARS, PROSE_CHARS = 3, 120, 240
#: a non-trivial match: two of these make a copy
NONTRIVIAL_LINES, NONTRIVIAL_CHARS = 2, 60
#: nbgrader's marker lines (as in its ClearSolutions and ClearHiddenTests)
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
_MARKER_LINE = re.compile(r"^[ \t]*#+[ \t]*(" + "|".join(MARKERS) + r")\b", re.M)
_SOLUTION_REGION = re.compile(r"^[ \t]*#+[ \t]*BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*#+[ \t]*END SOLUTION",
                              re.M | re.S)


def _cell_text(cell) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _squeeze(text: str) -> list[str]:
    """The lines of ``text`` with all whitespace removed, blank lines dropped."""
    lines = ("".join(line.split()) for line in text.splitlines())
    return [line for line in lines if line]


def solution_texts(source_nb: dict) -> list[tuple[str, list[str]]]:
    """``(grade_id, squeezed lines)`` of each solution cell of an instructor's source notebook.

    The text of a cell is what lies between its ``BEGIN SOLUTION`` and ``END
    SOLUTION`` lines (all such regions), or the whole cell when it has no markers
    (nbgrader then replaces the whole cell in the release).
    """
    out = []
    for index, cell in enumerate(source_nb.get("cells", []) if isinstance(source_nb, dict) else []):
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        if not isinstance(meta, dict) or not meta.get("solution"):
            continue
        text = _cell_text(cell)
        regions = _SOLUTION_REGION.findall(text)
        lines = _squeeze("\n".join(regions) if regions else text)
        if lines:
            out.append((str(meta.get("grade_id", f"cell {index}")), lines))
    return out


def source_copy(nb: dict, source_nb: dict) -> dict | None:
    """Evidence that ``nb`` is or contains ``source_nb``'s solutions, or None (see the module docstring).

    Returns
    -------
    dict or None
        ``{"markers": [{"cell": i, "marker": "BEGIN SOLUTION"}, ...]}`` when marker
        lines were found, else ``{"cells": [{"grade_id", "cell", "lines", "chars"}, ...]}``
        for the matching solution texts, when they make a copy by the rule.
    """
    found = Submitted(nb).copy_of({"source": solution_texts(source_nb)})
    return found[1] if found else None


class Submitted:
    """A submitted notebook prepared once for comparison with any number of sources."""

    def __init__(self, nb: dict):
        cells = [_cell_text(c) for c in nb.get("cells", [])]
        self.markers = [{"cell": i, "marker": m.group(1)} for i, text in enumerate(cells)
                        for m in _MARKER_LINE.finditer(text)][:20]
        # one string, cells separated by a NUL line that no needle holds: one search per solution text
        parts, self.starts, at = [], [], 0
        for text in cells:
            part = "\n" + "\n".join(_squeeze(text)) + "\n\0"
            self.starts.append(at)
            parts.append(part)
            at += len(part)
        self.haystack = "".join(parts)

    def copy_of(self, solutions: dict[str, list[tuple[str, list[str]]]]) -> tuple[str | None, dict] | None:
        """``(source name, evidence)`` for the first source this notebook copies, or None.

        ``solutions`` maps a source name to its :func:`solution_texts`. Marker lines
        make a copy whatever the sources (the name is then None).
        """
        if self.markers:
            return None, {"markers": self.markers}
        for name, texts in solutions.items():
            strong, nontrivial = [], []
            for grade_id, lines in texts:
                needle = "\n" + "\n".join(lines) + "\n"
                found_at = self.haystack.find(needle) if "\0" not in needle else -1
                if found_at < 0:
                    continue
                where = bisect.bisect_right(self.starts, found_at) - 1
                chars = sum(len(line) for line in lines)
                match = {"grade_id": grade_id, "cell": where, "lines": len(lines), "chars": chars}
                if (len(lines) >= STRONG_LINES and chars >= STRONG_CHARS) or chars >= PROSE_CHARS:
                    strong.append(match)
                elif len(lines) >= NONTRIVIAL_LINES and chars >= NONTRIVIAL_CHARS:
                    nontrivial.append(match)
            if strong or len(nontrivial) >= 2:
                return name, {"cells": strong + nontrivial}
        return None


def copy_message(path: str, source: str | None, found: dict) -> str:
    if "markers" in found:
        first = found["markers"][0]
        return (f"{show_name(path)} contains the instructor's marker line '### {first['marker']}' (cell "
                f"{first['cell']}), which only a source notebook has; it was not taken.")
    ids = ", ".join(m["grade_id"] for m in found["cells"])
    return (f"{show_name(path)} contains the instructor's solution to {show_name(source)} verbatim ({ids}); "
            "it was not taken.")
