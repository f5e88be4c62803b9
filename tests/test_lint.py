"""The whole repository passes `ruff check` with the configuration in pyproject.toml."""

import subprocess
import sys

from conftest import ROOT


def test_ruff_check_passes():
    """`ruff check .` reports nothing."""
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, f"ruff check . failed:\n{proc.stdout}\n{proc.stderr}"


def test_the_grading_package_imports_nothing_of_the_course_package():
    """Imports flow one way: rbtutor.course builds on rbtutor.grading, never the reverse."""
    import ast

    found = []
    for path in sorted((ROOT / "rbtutor" / "grading").rglob("*.py")):
        package = path.relative_to(ROOT).with_suffix("").parts[:-1]  # ('rbtutor', 'grading', ...)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else ()
                names = [".".join([*base, *(node.module or "").split(".")]).strip(".")]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names
                      if name == "rbtutor.course" or name.startswith("rbtutor.course.")]
    assert found == []
