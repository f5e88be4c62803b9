"""The manual names files of the repository: every one it names exists, so a move cannot leave it behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "book" / "manual").rglob("*.md")) + [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
#: a path of the repository written in backticks: rbtutor/..., hub/..., tests/..., book/..., benchmarks/...
#: (exercises/... is left out: the manual also names the files a course folder gets there)
NAMED = re.compile(r"`((?:rbtutor|hub|tests|book|benchmarks)/[\w./-]*[\w/])`")


def named_paths(text: str) -> list[str]:
    return [path for path in NAMED.findall(text) if "*" not in path and "<" not in path]


def test_the_detector_reads_paths_in_backticks():
    assert named_paths("see `rbtutor/grading/judge/` and `hub/hubctl.py`, not rbtutor/x.py") == [
        "rbtutor/grading/judge/", "hub/hubctl.py"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_the_manual_names_exists(page: Path):
    missing = [path for path in named_paths(page.read_text(encoding="utf-8")) if not (ROOT / path).exists()]
    assert not missing, f"{page.relative_to(ROOT)} names files that do not exist: {missing}"
