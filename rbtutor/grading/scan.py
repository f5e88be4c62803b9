"""Step: scan. Suspicious patterns in the student's code, before it runs (a flag, not a protection).

:class:`ScanSubmission` runs in the sanitize stage after RestoreCells; what it
finds goes into the integrity report. The sandbox and the grader-side judge are
what protect the grades; this scan only points the instructor at what to read.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from .protocol import DATA_ID
from .report import Events, event, grading_meta

# --------------------------------------------------------------------------- scan


_MODULES = r"(?:np|numpy|math|builtins|scipy|sympy|linalg|nbgrader|rbtutor|IPython|json|os|sys)"
PATTERNS = [
    ("patching", re.compile(rf"\b{_MODULES}(?:\.\w+)+\s*(?:=(?!=)|\+=)")),
    ("patching", re.compile(r"\bbuiltins\b|__builtins__")),
    ("patching", re.compile(rf"\b(?:setattr|delattr)\s*\(\s*{_MODULES}\b")),
    ("patching", re.compile(r"\bsys\.modules\b|\bimportlib\b|\b__import__\b|\bglobals\s*\(\s*\)\s*\[")),
    ("custom_comparison", re.compile(r"\bdef\s+__(?:eq|ne|lt|le|gt|ge|bool|array|array_ufunc|float|"
                                     r"abs|hash|instancecheck|getattr|getattribute)__\b")),
    ("process", re.compile(r"\b(?:socket|subprocess|ctypes|cffi|multiprocessing|pty|urllib|requests|"
                           r"http\.client|shutil)\b")),
    ("process", re.compile(r"\bos\s*\.\s*(?:system|popen|fork|forkpty|_exit|kill|killpg|exec\w*|spawn\w*|"
                           r"remove|unlink|rmdir|chmod|rename|setsid|symlink|link)\b")),
    ("process", re.compile(r"\bsys\s*\.\s*exit\b|(?<![\w.])(?:exit|quit)\s*\(|\bimport\s+signal\b|"
                           r"\bfrom\s+signal\b|\bsignal\s*\.\s*\w+|\.kill\s*\(|\bresource\s*\.\s*setrlimit")),
    ("dynamic_code", re.compile(r"(?<![\w.])(?:exec|eval|compile)\s*\(|\bget_ipython\s*\(")),
]
FORBIDDEN_PATH = re.compile(r"exercises|gradebook|submitted|autograded|solutions|release|feedback|"
                            r"exchange|nbgrader|answer_key|(?:^|[/\\])\.\.(?:[/\\]|$)|^~|^/")


_LITERAL = re.compile(r"""^[a-zA-Z]*('''|\"\"\"|'|\")(.*)\1$""", re.S)
_FOLDERS = {"exercises", "gradebook.db", "gradebook", "submitted", "autograded", "solutions", "release",
            "feedback", "exchange", "..", "~"}


def _strings_and_code(source: str):
    """(code without comments and strings, [string literals]) of Python source; a fallback if it does not tokenize."""
    code, strings = [], []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.STRING:
                strings.append(token.string)
                code.append('""')
            elif token.type == tokenize.COMMENT:
                continue
            else:
                code.append(token.string)
                code.append(" " if token.type in (tokenize.NAME, tokenize.NUMBER, tokenize.OP) else "")
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source, re.findall(r"""(['"]).*?\1""", source)
    return "".join(code).replace(" . ", ".").replace(" .", ".").replace(". ", "."), strings


def assigned_names(source: str) -> set[str]:
    """Names that a cell binds at top level or anywhere (assignment, del, for, with, import...)."""

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def scan_source(source: str) -> list[tuple[str, str]]:
    """Suspicious (category, evidence) found in one cell of student code."""
    if source.lstrip().startswith(("%", "!")) or "\n!" in source or "\n%" in source:
        shell = [line for line in source.splitlines() if line.lstrip().startswith(("!", "%"))]
        found = [("shell", line.strip()[:120]) for line in shell]
    else:
        found = []
    code, strings = _strings_and_code(source)
    for category, pattern in PATTERNS:
        for match in pattern.finditer(code):
            found.append((category, match.group(0).strip()[:120]))
    for literal in strings:
        match = _LITERAL.match(literal)
        text = match.group(2) if match else literal
        pathlike = ("/" in text or "\\" in text or text.strip() in _FOLDERS
                    or text.strip().endswith((".db", ".ipynb", ".yaml", ".json", ".csv", ".py")))
        if pathlike and FORBIDDEN_PATH.search(text.strip()):
            found.append(("forbidden_path", literal[:120]))
    seen, unique = set(), []
    for item in found:
        if item not in seen:
            seen.add(item)
            unique.append(item)
    return unique


class ScanSubmission(Events, NbGraderPreprocessor):
    """Flag suspicious code in the cells the student's kernel will run.

    Put it in the sanitize stage after RestoreCells: locked cells then carry their
    original source (RestoreCells has recorded any change), so only student code
    (answer cells, added cells, demoted duplicates) is scanned.
    """

    stage = "scan"

    report_dir = Unicode("", help="folder of the integrity events").tag(config=True)

    def preprocess(self, nb, resources):
        fresh = "rbtutor" not in resources
        events = []
        data_names = set()
        for cell in nb.cells:
            if grading_meta(cell).get("grade_id") == DATA_ID:
                data_names |= assigned_names(cell.source)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or grading_meta(cell).get("locked"):
                continue
            found = scan_source(cell.source)
            found += [("data_reassigned", name) for name in sorted(assigned_names(cell.source) & data_names)]
            for category, evidence in found:
                events.append(event(category, f"cell {index}: {category.replace('_', ' ')}: {evidence}",
                                     cell=index, grade_id=grading_meta(cell).get("grade_id"), pattern=evidence))
        self._store(resources, events, fresh=fresh)
        return nb, resources


