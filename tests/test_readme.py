"""The README is the front door: short, and every command and link in it is real.

It holds at most 150 lines (the manual lives in the book), every ``rbtutor VERB`` it shows
is a verb of the command, and every file it links to is in the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

from rbtutor.cli import ALIASES, VERBS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 150


def test_the_readme_fits_its_budget():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move text into the manual (book/manual/)"


def test_every_rbtutor_verb_in_the_readme_exists():
    text = README.read_text(encoding="utf-8")
    shown = set(re.findall(r"\brbtutor ([a-z][a-z-]*)\b", text))
    shown -= {"is", "and", "command"}  # prose: "rbtutor is ...", "rbtutor command"
    unknown = sorted(shown - set(VERBS) - set(ALIASES))
    assert shown, "the README shows no rbtutor verb"
    assert not unknown, f"README.md shows verbs the command does not have: {unknown}"


def test_every_link_of_the_readme_is_a_file_of_the_repository():
    text = README.read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert targets, "the README links to no page of the manual"
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).is_file()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_sends_each_reader_to_a_guide():
    text = README.read_text(encoding="utf-8")
    for guide in ("instructor", "student", "operator", "developer"):
        assert f"book/manual/{guide}/index.md" in text, f"the README does not link the {guide} guide"
