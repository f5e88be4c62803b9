"""Practice pages: the question bank ``book/questions.md`` and the "Check your understanding"
sections of the Euler-parameter pages, counted from their sources (no build needed).

A bank question starts with a bold marker ``**Q<n> (<kind>).**`` and runs to the next marker
or section heading. Its answer must be folded: a ``:::{dropdown} Answer`` block with text in
it, or a code cell tagged ``hide-cell`` (or both ``hide-input`` and ``hide-output``). What each
kind needs on top of that is listed in ``KIND_RULES``. Executing the page (and so every
``assert`` in it) is the book build's job; this file checks that nothing was left unanswered.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

from rbtutor.problems.question_bank import STATEMENTS

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "book" / "questions.md"
EULER_PAGES = [ROOT / "book" / "euler" / "index.md", ROOT / "book" / "euler" / "node.md"]
KINDS = ("conceptual", "numeric", "spot the error")
MIN_QUESTIONS = 40
MIN_PER_KIND = 8
MIN_EULER_QUESTIONS = 4

MARKER = re.compile(r"^\*\*Q(?P<number>\d+) \((?P<kind>[a-z ]+)\)\.\*\*", re.MULTILINE)
SECTION = re.compile(r"^## ", re.MULTILINE)
DROPDOWN = re.compile(r"^:::\{dropdown\}[ \t]*(?P<title>[^\n]*)\n(?P<body>.*?)^:::[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
TAGS = re.compile(r"^:tags:\s*\[(?P<tags>[^\]]*)\]", re.MULTILINE)
DERIVATION_LINE = re.compile(r"^(?P<n>\d+)\. ", re.MULTILINE)
# the numbered lines of a quiz question's derivation, glued in from rbtutor.problems.question_bank
GLUED_LINES = re.compile(r"^```\{glue:md\} q(?P<number>\d+)_lines\n(?::[^\n]*\n)*```[ \t]*$", re.MULTILINE)


class Question(NamedTuple):
    number: int
    kind: str
    text: str      # the statement, up to the first folded block
    chunk: str     # everything up to the next question or section


class CodeCell(NamedTuple):
    tags: frozenset[str]
    code: str      # the source without the option lines


def code_cells(text: str) -> list[CodeCell]:
    cells = []
    for match in CODE_CELL.finditer(text):
        body = match.group("body")
        tags = TAGS.search(body)
        tag_set = frozenset(t.strip().strip("\"'") for t in tags.group("tags").split(",")) if tags else frozenset()
        code = "\n".join(line for line in body.splitlines() if not line.startswith(":"))
        cells.append(CodeCell(tag_set, code))
    return cells


def folded_cells(text: str) -> list[CodeCell]:
    """Code cells whose input and output are both behind a click."""
    return [c for c in code_cells(text)
            if c.code.strip() and ("hide-cell" in c.tags or {"hide-input", "hide-output"} <= c.tags)]


def answer_dropdowns(text: str) -> list[str]:
    """Bodies of the ``:::{dropdown} Answer`` blocks that contain any text."""
    return [m.group("body") for m in DROPDOWN.finditer(text)
            if m.group("title").strip() == "Answer" and m.group("body").strip()]


def with_glued_lines(source: str) -> str:
    """The page with each glued derivation written out, as the built page shows it (the quiz's
    spot-the-error questions keep their text in rbtutor.problems.question_bank, for the page and the quiz)."""
    return GLUED_LINES.sub(lambda m: STATEMENTS[int(m.group("number"))].partition("\n\n")[2], source)


def questions(source: str) -> list[Question]:
    stops = sorted({m.start() for m in MARKER.finditer(source)} | {m.start() for m in SECTION.finditer(source)}
                   | {len(source)})
    found = []
    for match in MARKER.finditer(source):
        end = next(stop for stop in stops if stop > match.start())
        chunk = source[match.start():end]
        first_fold = min([i for i in (chunk.find(":::{dropdown}"), chunk.find("```{code-cell}")) if i >= 0],
                         default=len(chunk))
        found.append(Question(int(match.group("number")), match.group("kind"), chunk[:first_fold], chunk))
    return found


def _conceptual(q: Question) -> list[str]:
    return [] if answer_dropdowns(q.chunk) else ["no ':::{dropdown} Answer' with text"]


def _numeric(q: Question) -> list[str]:
    faults = []
    if not re.search(r"\{glue:(md|text)\}`q\d+_", q.text):
        faults.append("its numbers are not drawn from the seed (no glued q<n>_ value in the statement)")
    cells = folded_cells(q.chunk)
    if not any(re.search(r"\bq\d+_\w+", c.code) and "assert " in c.code for c in cells):
        faults.append("no folded worked answer that computes from the drawn numbers and asserts")
    return faults


def _spot_the_error(q: Question) -> list[str]:
    faults = []
    lines = [int(n) for n in DERIVATION_LINE.findall(q.text)]
    if len(lines) < 3 or lines != list(range(1, len(lines) + 1)):
        faults.append(f"the derivation needs numbered lines 1, 2, 3, ...; found {lines}")
    answers = answer_dropdowns(q.chunk)
    named = [int(n) for body in answers for n in re.findall(r"\bLine (\d+)\b", body)]
    if not answers:
        faults.append("no ':::{dropdown} Answer' with text")
    elif not named or named[0] not in lines:
        faults.append("the answer does not name the wrong line ('Line <n>' of the derivation)")
    if not any("sp." in c.code and "!=" in c.code and "assert " in c.code for c in folded_cells(q.chunk)):
        faults.append("no folded SymPy check that asserts the planted form differs (!=)")
    return faults


KIND_RULES = {"conceptual": _conceptual, "numeric": _numeric, "spot the error": _spot_the_error}


def bank_faults(source: str) -> list[str]:
    """Everything wrong with a bank page, one line per fault; empty when it is complete."""
    found = questions(source)
    faults = [f"Q{q.number}: unknown kind {q.kind!r}" for q in found if q.kind not in KINDS]
    numbers = [q.number for q in found]
    if numbers != list(range(1, len(numbers) + 1)):
        faults.append(f"questions are not numbered 1, 2, 3, ... in order: {numbers}")
    for q in found:
        if q.kind in KIND_RULES:
            faults += [f"Q{q.number} ({q.kind}): {fault}" for fault in KIND_RULES[q.kind](q)]
    return faults


def understanding_dropdowns(source: str) -> list[str]:
    """Dropdowns with a question title and an answer, in the page's last section, if it is the
    "Check your understanding" one."""
    sections = SECTION.split(source)
    last = sections[-1] if len(sections) > 1 else ""
    if not last.startswith("Check your understanding\n"):
        return []
    return [m.group("title") for m in DROPDOWN.finditer(last)
            if m.group("title").strip().endswith("?") and m.group("body").strip()]


# ----------------------------------------------------------------- the pages themselves


@pytest.fixture(scope="module")
def bank() -> str:
    return with_glued_lines(BANK.read_text(encoding="utf-8"))


def test_bank_has_enough_questions_of_every_kind(bank):
    """At least 40 questions, every kind present at least MIN_PER_KIND times."""
    counts = Counter(q.kind for q in questions(bank))
    assert sum(counts.values()) >= MIN_QUESTIONS, counts
    for kind in KINDS:
        assert counts[kind] >= MIN_PER_KIND, f"{kind}: {counts[kind]} questions"


def test_every_bank_question_has_a_folded_answer(bank):
    """Each question carries the folded answer its kind needs."""
    assert bank_faults(bank) == []


def test_bank_is_a_seeded_notebook_grouped_by_page(bank):
    """Front matter as on the chapter pages, a label, a SEED cell that feeds the generator, and
    every section of questions pointing to the page it practises."""
    front = (ROOT / "book" / "chapter" / "translational.md").read_text(encoding="utf-8").split("---\n")[1]
    assert bank.split("---\n")[1] == front
    assert "(question-bank)=\n# Question bank\n" in bank
    first_cell = code_cells(bank)[0]
    assert re.fullmatch(r"SEED = \d+\b.*", first_cell.code.strip()), first_cell.code
    assert "np.random.default_rng(SEED)" in bank
    assert not re.search(r"\b(rbtutor|ep)(\.\w+)*\._", bank), "a private name of rbtutor is used"
    sections = SECTION.split(bank)[1:]
    assert len(sections) >= 6
    for section in sections:
        assert re.search(r"\{doc\}`(chapter|euler)/\w+`", section), section.splitlines()[0]
        assert MARKER.search(section), f"no question in section {section.splitlines()[0]!r}"


@pytest.mark.parametrize("page", EULER_PAGES, ids=lambda p: p.name)
def test_euler_pages_check_understanding(page):
    """The Euler pages end with a "Check your understanding" section of answered questions."""
    titles = understanding_dropdowns(page.read_text(encoding="utf-8"))
    assert len(titles) >= MIN_EULER_QUESTIONS, titles


# ----------------------------------------------------------------- the checks can fail


def _first(bank: str, kind: str) -> Question:
    return next(q for q in questions(bank) if q.kind == kind)


@pytest.mark.parametrize("kind", KINDS)
def test_a_question_that_loses_its_answer_is_reported(bank, kind):
    """Removing every folded block of one question makes bank_faults name that question."""
    q = _first(bank, kind)
    stripped = DROPDOWN.sub("", CODE_CELL.sub("", q.chunk))
    faults = bank_faults(bank.replace(q.chunk, stripped))
    assert any(f.startswith(f"Q{q.number} ") for f in faults), faults


def test_an_unfolded_or_empty_answer_is_reported(bank):
    """An answer cell shown in the open, or an empty dropdown, does not count as folded."""
    numeric = _first(bank, "numeric")
    opened = numeric.chunk.replace(":tags: [hide-cell]", ":tags: []")
    assert any(f.startswith(f"Q{numeric.number} ") for f in bank_faults(bank.replace(numeric.chunk, opened)))
    conceptual = _first(bank, "conceptual")
    emptied = DROPDOWN.sub(":::{dropdown} Answer\n:::", conceptual.chunk)
    assert any(f.startswith(f"Q{conceptual.number} ") for f in bank_faults(bank.replace(conceptual.chunk, emptied)))


def test_a_spot_the_error_answer_must_name_the_line(bank):
    """The answer of a spot-the-error question is reported when it names no line."""
    q = _first(bank, "spot the error")
    vague = re.sub(r"\bLine \d+\b", "One line", q.chunk)
    assert any(f.startswith(f"Q{q.number} ") and "name the wrong line" in f
               for f in bank_faults(bank.replace(q.chunk, vague)))


def test_euler_check_fails_when_an_answer_goes():
    """Emptying one dropdown, or moving the section away from the end, drops the count."""
    source = EULER_PAGES[0].read_text(encoding="utf-8")
    count = len(understanding_dropdowns(source))
    first = next(DROPDOWN.finditer(source.split("## Check your understanding")[1]))
    emptied = source.replace(first.group(0), first.group(0).replace(first.group("body"), ""))
    assert len(understanding_dropdowns(emptied)) == count - 1
    moved = source + "\n## Something after\n\nText.\n"
    assert understanding_dropdowns(moved) == []
