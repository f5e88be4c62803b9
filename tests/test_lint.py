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


def _imports_of_each_module() -> dict[str, set[str]]:
    """``{module: rbtutor modules it imports}``, function-local imports included, from the syntax trees."""
    import ast

    package = ROOT / "rbtutor"
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges = {name: set() for name in modules}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    stem = here.split(".")[:len(here.split(".")) - node.level + 1]
                    base = ".".join(stem + ([node.module] if node.module else []))
                wanted = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                wanted = [alias.name for alias in node.names]
            else:
                continue
            edges[name] |= {w for w in wanted if w in modules and w != name}
    return edges


def test_no_module_of_rbtutor_imports_itself_round_a_circle():
    """No import circle, function-local imports included (issue: grade -> class_report -> export -> grade)."""
    edges = _imports_of_each_module()
    circles = []
    for start in edges:
        seen, frontier = set(), [(start, (start,))]
        while frontier:
            node, path = frontier.pop()
            for nxt in edges[node]:
                if nxt == start:
                    circles.append(" -> ".join((*path, start)))
                elif nxt not in seen and not nxt.startswith(start + "."):
                    seen.add(nxt)
                    frontier.append((nxt, (*path, nxt)))
    assert not circles, circles[:5]
