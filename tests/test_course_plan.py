"""The course plan (book/course/plan.md) and the instructor's notes (book/course/notes.md), from their sources.

The plan page checks itself with asserts when the book is built; these tests check the same
promises without a build, and re-derive what they compare against from other sources: the
pages to read from ``_toc.yml``, the problems from the headings of ``book/exercises.md``, the
reading time from an independent word count. The plan's data (the literal ``WEEKS`` and the
time assumptions) are read from the page's code cell with :mod:`ast`, never executed.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "book" / "course" / "plan.md"
NOTES = ROOT / "book" / "course" / "notes.md"
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```$", re.S | re.M)
# the parts of the toc whose pages a student reads (the last part, exercises and reference, is looked up)
READ_PREFIXES = ("book/chapter/", "book/euler/", "book/problems/")


def _literals(path: Path) -> dict:
    """Every top-level ``NAME = <literal>`` of the page's code cells, evaluated as a literal."""
    found = {}
    for cell in CODE_CELL.finditer(path.read_text(encoding="utf-8")):
        body = "\n".join(line for line in cell["body"].splitlines() if not line.startswith(":"))
        for node in ast.parse(body).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    found[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return found


@pytest.fixture(scope="module")
def plan() -> dict:
    return _literals(PLAN)


def _toc_files(entries):
    for entry in entries:
        yield entry["file"]
        yield from _toc_files(entry.get("sections", []))


def _reading_pages() -> set[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = {name for part in toc["parts"] for name in _toc_files(part["chapters"])}
    return {name.removeprefix("book/") for name in files if name.startswith(READ_PREFIXES)}


def _problems() -> list[str]:
    text = (ROOT / "book" / "exercises.md").read_text(encoding="utf-8")
    return [f"problem{int(n):02d}" for n in re.findall(r"^## Problem (\d+):", text, flags=re.M)]


def _words(page: str) -> int:
    """Words of a page outside its front matter and code cells, counted line by line."""
    lines = (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8").splitlines()
    if lines and lines[0] == "---":
        lines = lines[lines.index("---", 1) + 1:]
    count, in_code = 0, False
    for line in lines:
        if line.startswith("```{code-cell}"):
            in_code = True
        elif in_code and line == "```":
            in_code = False
        elif not in_code:
            count += len(line.split())
    return count


def test_every_chapter_page_is_read_in_exactly_one_week(plan):
    """Each chapter, Euler-parameter and problems-in-pictures page of the toc is read once."""
    pages = _reading_pages()
    assert {"chapter/translational", "euler/node", "problems/heel"} <= pages  # the toc was read
    read = Counter(page for week in plan["WEEKS"] for page in week["read"])
    assert {page: read[page] for page in pages if read[page] != 1} == {}


def test_every_problem_is_handed_in_exactly_once(plan):
    """The eleven problems and the quiz of the exercises page, each handed in once, and nothing else."""
    problems = _problems()
    assert problems == [f"problem{n:02d}" for n in range(1, 13)]
    handed_in = Counter(name for week in plan["WEEKS"] for name in week["hand_in"])
    assert handed_in == Counter(problems)


def test_twelve_weeks_within_the_self_study_budget(plan):
    """Reading (independent word count) plus the reasoned problem time stays within the budget."""
    assert [week["week"] for week in plan["WEEKS"]] == list(range(1, 13))
    per_kind, setup = plan["MINUTES_PER_KIND"], plan["SETUP_MINUTES"]
    for week in plan["WEEKS"]:
        minutes = sum(_words(page) for page in week["read"]) / plan["WORDS_PER_MINUTE"]
        minutes += sum(setup + sum(per_kind[kind] for kind in plan["PART_KINDS"][name]) for name in week["hand_in"])
        assert minutes / 60 <= plan["SELF_STUDY_BUDGET_HOURS"], week["week"]


def test_notes_list_the_mistakes_of_every_problem_once():
    """Every problem's known mistakes are listed in exactly one chapter section of the notes."""
    text = NOTES.read_text(encoding="utf-8")
    calls = [call for cell in CODE_CELL.finditer(text) for call in re.findall(r"^mistakes\(([\d, ]+)\)$",
                                                                             cell["body"], flags=re.M)]
    listed = Counter(int(n) for call in calls for n in call.split(","))
    assert listed == Counter(range(1, 13))
    for heading in ("Motivation", "Translational", "Rotational", "Complete", "Linearised", "Euler parameters",
                    "The problems in pictures"):
        assert re.search(rf"^## {heading}", text, flags=re.M), heading
