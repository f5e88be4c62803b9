"""Step: after collection, beside grading. Which students handed in the same code for one assignment.

``python -m rbtutor.course similarity problem03`` compares the code of every pair of
students and writes ``similarity/problem03.csv`` (``student_a,student_b,score``, then
``outside_solution_a,outside_solution_b``; most similar first) and
``similarity/problem03.html`` (the pairs, and the most similar ones side by side, cell by
cell, with the shared regions marked).

How code is compared
--------------------
* **What is read.** For each folder ``submitted/<student>/<assignment>/`` whose name is
  a valid student id, the submission is first copied by the intake
  (:func:`rbtutor.grading.intake.take_in`: no link is followed, sizes and cells are
  capped, malformed notebooks are dropped), and only that copy is read. Every code cell
  of every notebook is kept, in notebook order, notebooks in name order; a cell whose
  ``grade_id`` is a solution cell of the instructor's source notebook is a *solution
  cell*, any other is not (the student's own cells, and cells they were given). Copied
  code moved into cells of one's own is therefore still compared, and the report says
  how much of a pair's shared code lies outside the solution cells.
* **Normalising.** Each cell is parsed with :mod:`ast` (IPython magic lines are blanked
  if it does not parse otherwise). In the syntax tree every name and parameter becomes
  ``V`` (built-in names such as ``len`` stay, unless the student binds them), every number ``N``, every string ``S``; an
  attribute or keyword argument becomes ``V`` when the student's code binds that name
  and keeps its name otherwise (``np.cross``, ``key=``: what a library named cannot be
  renamed). Statements that do nothing are dropped (``pass``, a bare
  expression without a call, a docstring, ``x = x``, ``x += 0``, a constant stored in
  a name nothing reads). The statements of each block are put in one canonical order:
  each after the statements it depends on (through the names they read and write), and
  otherwise by their normalised text. Each statement is written back
  (:func:`ast.unparse`, which keeps only the parentheses the syntax needs) without blank
  space. Renaming, re-parenthesising, reformatting numbers, changing strings and
  comments, adding statements that do nothing and reordering independent statements
  therefore change nothing. A cell that is not Python even then, or a statement nested
  too deeply to walk, is reduced token by token (Pygments) in the same letters (there
  every attribute and keyword is ``V``).
* **Fingerprints.** The normalised text is cut into overlapping pieces of
  :data:`NOISE` characters, each piece hashed, and the hashes thinned by winnowing
  (the method of MOSS: Schleimer, Wilkerson and Aiken, SIGMOD 2003): any shared run
  of at least :data:`GUARANTEE` characters shares a fingerprint. The winnowing and
  the matching are those of the ``copydetect`` package (MIT licence). The hashing is
  done here, with BLAKE2b, so that a class gets the same scores on every run; so is
  the tokenising, because ``copydetect`` keeps numbers and maps matches back to the
  source only roughly. A match is traced back to whole statements of the original
  code (to tokens in a cell that is not Python).
* **Given code.** The code the students were given is the source notebook's code cells
  with their solution regions removed, and the stub nbgrader puts in their place.
  A student's top-level statement that is one of the given code's (the same syntax
  tree: only layout and comments may differ) is left out, and so is every piece of
  normalised code that also occurs in the given code.
* **Score.** For a pair, the share of each student's fingerprinted code that the other
  student's code also holds; the pair's score is the larger of the two shares, so a
  student who copied a classmate's whole answer and added code of their own is still
  found. Pairs at or above :data:`THRESHOLD` are flagged.

Per-student numbers make equal values impossible, so this finds shared *code*; a
short answer that every student writes the same way (one formula) scores high for
everyone and says nothing. The report is evidence for a person to read, never a verdict.
"""

from __future__ import annotations

import ast
import builtins
import copy
import csv
import hashlib
import heapq
import html
import io
import itertools
import json
import os
import re
import stat
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pygments import token
from pygments.lexers import PythonLexer

from rbtutor.grading.intake import take_in
from rbtutor.grading.student_ids import id_problem

from .layout import CourseError, CourseLayout

#: Length of one fingerprinted piece of normalised code, in characters.
NOISE = 12
#: Shared runs of normalised code at least this long always share a fingerprint.
GUARANTEE = 16
#: Pairs with a score at or above this are flagged in the report.
THRESHOLD = 0.6
#: Pairs shown side by side in the HTML report: the flagged pairs, at least this many ...
SHOWN_PAIRS = 10
#: ... and at most this many (the page stays small enough to open).
MAX_SHOWN_PAIRS = 50
#: Rows of the HTML report's table of pairs: all flagged pairs, and at least this many (the CSV has all).
TABLE_PAIRS = 100
#: Characters of one student's code shown in the report; the rest is left out (and said so).
SHOWN_CHARS = 20_000
#: Characters of one student's code that are compared (the intake already caps each cell).
MAX_CODE_CHARS = 400_000
#: The code nbgrader puts in place of a solution region in the released notebook.
RELEASE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()\n"

_SOLUTION_REGION = re.compile(r"^[ \t]*#+[ \t]*BEGIN SOLUTION[^\n]*\n.*?^[ \t]*#+[ \t]*END SOLUTION[^\n]*$",
                              re.M | re.S)


# --------------------------------------------------------------------------- normalising

#: What every name, number and string becomes in the normalised code.
NAME, NUMBER, STRING = "V", "N", "S"

#: Built-in names that stay as they are (``len``, ``range``, ``abs`` ...): they are part of a program's shape.
_BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_"))

_LINE_END = re.compile(r"\r\n|\r|\n")
_MAGIC_LINE = re.compile(r"^[ \t]*[%!?][^\r\n]*|^[^\r\n]*\?[ \t]*$", re.M)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases", "decorator_list")
_EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
_CONSTANT_PARTS = (ast.Constant, ast.UnaryOp, ast.BinOp, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.operator,
                   ast.unaryop, ast.expr_context)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_ORDER_STOPS = (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Global, ast.Nonlocal, ast.Yield,
                ast.YieldFrom, ast.Await)


@dataclass
class Normalised:
    """Code reduced to its shape, with each character traced back to the original.

    Attributes
    ----------
    text : str
        The normalised code (names ``V``, numbers ``N``, strings ``S``, no layout).
    starts, ends : ndarray of int, shape (len(text),)
        For each character of ``text``, the slice of the original code it stands for (its
        statement, or its token in a cell that is not Python).
    """

    text: str
    starts: np.ndarray
    ends: np.ndarray


@dataclass
class _Unit:
    """One statement (or a cell or statement read token by token), normalised, with what it reads and writes."""

    key: str
    chunks: list[tuple[str, int, int]]
    reads: frozenset = frozenset()
    writes: frozenset = frozenset()
    barrier: bool = False


@dataclass(frozen=True)
class _Context:
    """What a student's code names itself: the names it reads and binds, the attributes and parameters it binds."""

    read: frozenset = frozenset()
    bound: frozenset = frozenset()
    attributes: frozenset = frozenset()
    parameters: frozenset = frozenset()

    @classmethod
    def of(cls, trees, given: _Context | None = None) -> _Context:
        given = given or cls()
        read, bound = set(given.read), set(given.bound)
        attributes, parameters = set(given.attributes), set(given.parameters)
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.Name):
                    (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
                elif isinstance(node, (*_DEFINITIONS, ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
                    bound.add(node.name)
                elif isinstance(node, ast.alias):
                    bound.add((node.asname or node.name).split(".")[0])
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    read.add(node.attr)  # a class attribute is read as one
                elif isinstance(node, ast.Attribute):
                    attributes.add(node.attr)
                elif isinstance(node, ast.arg):
                    parameters.add(node.arg)
                if isinstance(node, ast.ClassDef):
                    attributes.update(_class_members(node))
        return cls(frozenset(read), frozenset(bound | parameters), frozenset(attributes), frozenset(parameters))


def _class_members(node: ast.ClassDef) -> set[str]:
    """The names a class body binds (methods, class attributes)."""
    members = set()
    for stmt in node.body:
        if isinstance(stmt, _DEFINITIONS):
            members.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            members.update(n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name))
    return members


@dataclass
class _Given:
    """The code every student was given: its top-level statements (syntax trees), what it names, its pieces."""

    statements: frozenset = frozenset()
    context: _Context = field(default_factory=_Context)
    hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def normalise(code: str) -> Normalised:
    """Reduce one piece of code to its shape (see :func:`normalise_cells`).

    Examples
    --------
    >>> normalise("speed = (3.5)  # knots\\nprint(f'{speed}')").text
    'V=Nprint(S)'
    """
    return normalise_cells([code])


def normalise_cells(cells: list[str], given: _Given | None = None) -> Normalised:
    """The shape of a student's code cells, joined with line breaks, leaving out the given statements.

    Each cell is parsed with :mod:`ast` (IPython magic lines are blanked first if it does not
    parse); in the syntax tree every name becomes ``V`` (built-in names stay), every number
    ``N``, every string ``S``; statements that do nothing (``pass``, a bare expression without
    a call, ``x = x``, a constant stored in a name that is never read) are dropped, and the
    statements of each block are put in a canonical order that keeps every statement after
    the ones it depends on. Each statement is written back with :func:`ast.unparse` (so
    redundant parentheses, comments and docstrings vanish) without blank space. A cell that
    does not parse is reduced token by token instead. Top-level statements that are given
    statements (the same syntax tree: only layout and comments may differ) are left out.
    """
    given = given or _Given()
    trees, sources, base = [], [], 0
    for code in cells:
        sources.append(_Source(code, base))
        trees.append(_parse(code))
        base += len(code) + 1
    context = _Context.of([tree for tree in trees if tree is not None], given.context)
    units: list[_Unit] = []
    for code, tree, source in zip(cells, trees, sources, strict=True):
        shaped = None
        if tree is not None:
            try:
                own = [stmt for stmt in tree.body if _dump(stmt) not in given.statements]
                shaped = _block_units(own, source, context)
            except RecursionError:  # nested too deeply to walk: read it token by token
                shaped = None
        units.extend(shaped if shaped is not None else _token_units(code, source.base))
    return _joined(_ordered(units))


def _dump(stmt: ast.stmt) -> str | None:
    """The statement's syntax tree as text (no positions), or None if it is nested too deeply to write."""
    try:
        return ast.dump(stmt)
    except RecursionError:
        return None


def _joined(units: list[_Unit]) -> Normalised:
    out, starts, ends = [], [], []
    for unit in units:
        for text, start, end in unit.chunks:
            out.append(text)
            starts.extend([start] * len(text))
            ends.extend([end] * len(text))
    return Normalised("".join(out), np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))


class _Source:
    """One cell's text, placed at ``base`` in the joined code: turns syntax-tree positions into offsets."""

    def __init__(self, text: str, base: int):
        self.text, self.base = text, base
        self.line_starts = [0] + [m.end() for m in _LINE_END.finditer(text)]

    def offset(self, line: int, column: int) -> int:
        """The offset of (1-based ``line``, ``column`` in UTF-8 bytes) in the joined code."""
        start = self.line_starts[line - 1]
        head = self.text[start:start + column].encode("utf-8", "surrogatepass")[:column]
        return self.base + start + len(head.decode("utf-8", "ignore"))

    def span(self, node) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)


def _parse(code: str) -> ast.Module | None:
    """The syntax tree of a cell, trying again without IPython magic lines; None if it is not Python."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like are the student's business
        for attempt in (code, _MAGIC_LINE.sub("", code)):
            try:
                return ast.parse(attempt)
            # ValueError: null bytes or lone surrogates; MemoryError: CPython's "parser stack
            # overflowed" for code nested too deeply (a raised error, not memory running out)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
    return None


class _Abstract(ast.NodeTransformer):
    """Names to ``V`` (built-ins the student does not bind stay), numbers to ``N``, strings (f-strings too) to ``S``.

    An attribute keeps its name (``np.cross``, ``heels.append``) unless the student's code
    binds an attribute of that name; a keyword argument keeps its name (``key=``) unless the
    student's code has a parameter of that name. What the student named can be renamed,
    what a library named cannot.
    """

    def __init__(self, context: _Context):
        self.context = context

    def visit_Name(self, node):
        builtin = node.id in _BUILTINS and node.id not in self.context.bound  # ``sum = 0`` is a variable
        return ast.Name(id=node.id if builtin else NAME, ctx=node.ctx)

    def visit_Constant(self, node):
        if node.value is None or node.value is Ellipsis or isinstance(node.value, bool):
            return node
        return ast.Name(id=STRING if isinstance(node.value, (str, bytes)) else NUMBER, ctx=ast.Load())

    def visit_JoinedStr(self, node):
        return ast.Name(id=STRING, ctx=ast.Load())

    def generic_visit(self, node):
        super().generic_visit(node)
        if isinstance(node, ast.alias):  # the module's own name stays, the name it is bound to goes
            node.asname = NAME if node.asname else None
            return node
        if isinstance(node, ast.Attribute):
            node.attr = NAME if node.attr in self.context.attributes else node.attr
        elif isinstance(node, ast.keyword):
            node.arg = NAME if node.arg in self.context.parameters else node.arg
        else:
            for attr in ("arg", "name", "rest"):  # parameters, definitions, exceptions, patterns
                if isinstance(getattr(node, attr, None), str):
                    setattr(node, attr, NAME)
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            node.names = [NAME] * len(node.names)
        if isinstance(node, ast.MatchClass):
            node.kwd_attrs = [NAME] * len(node.kwd_attrs)
        return node


def _shape(node, context: _Context) -> str:
    """``node`` abstracted and written back as code, without blank space."""
    return "".join(ast.unparse(_Abstract(context).visit(copy.deepcopy(node))).split())


def _is_junk(stmt: ast.stmt, context: _Context) -> bool:
    """Whether a statement does nothing a reader of the program could notice."""
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr):
        return not any(isinstance(node, _EFFECTS) for node in ast.walk(stmt.value))
    if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
        if isinstance(stmt.value, ast.Name) and all(t.id == stmt.value.id for t in stmt.targets):
            return True
        return _is_constant(stmt.value) and not any(t.id in context.read for t in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return stmt.value is None and isinstance(stmt.target, ast.Name)
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) \
            and isinstance(stmt.value, ast.Constant) and not isinstance(stmt.value.value, bool):
        neutral = {ast.Add: 0, ast.Sub: 0, ast.Mult: 1, ast.Div: 1, ast.Pow: 1}.get(type(stmt.op))
        return neutral is not None and stmt.value.value == neutral
    return False


def _is_constant(node: ast.expr) -> bool:
    return all(isinstance(part, _CONSTANT_PARTS) for part in ast.walk(node))


def _block_units(body: list[ast.stmt], source: _Source, context: _Context) -> list[_Unit]:
    """The statements of one block that do something, each normalised.

    A statement nested too deeply to copy or write back (a sum of some hundreds of terms)
    is reduced token by token, alone: the rest of its cell is still read as a syntax tree.
    """
    units = []
    for stmt in body:
        if _is_junk(stmt, context):
            continue
        try:
            units.append(_statement_unit(stmt, source, context))
        except RecursionError:
            start, end = source.span(stmt)
            units.extend(_token_units(source.text[start - source.base:end - source.base], start))
    return units


def _statement_unit(stmt: ast.stmt, source: _Source, context: _Context) -> _Unit:
    reads, writes, barrier = _effects(stmt)
    start, end = source.span(stmt)
    if not any(getattr(stmt, name, None) for name in _BODIES):
        text = _shape(stmt, context)
        return _Unit(text, [(text, start, end)], reads, writes, barrier)
    chunks = []
    for decorator in getattr(stmt, "decorator_list", []):
        chunks.append(("@" + _shape(decorator, context), *source.span(decorator)))
    header = copy.copy(stmt)
    for name in _BODIES:
        if hasattr(header, name):
            setattr(header, name, [])
    first = stmt.body[0] if getattr(stmt, "body", None) else stmt.cases[0].pattern
    chunks.append((_shape(header, context), start, _header_end(source, first)))
    chunks.extend(_body_chunks(stmt, source, context))
    return _Unit("".join(c[0] for c in chunks), chunks, reads, writes, barrier)


def _body_chunks(stmt: ast.stmt, source: _Source, context: _Context) -> list[tuple[str, int, int]]:
    """The chunks of a compound statement after its header: its blocks, each in canonical order."""
    chunks = []
    if isinstance(stmt, ast.Match):
        for case in stmt.cases:
            header = copy.copy(case)
            header.body = []
            chunks.append((_shape(header, context), *source.span(case.pattern)))
            chunks.extend(_block_chunks(case.body, source, context))
        return chunks
    chunks.extend(_block_chunks(stmt.body, source, context))
    for handler in getattr(stmt, "handlers", []):
        header = copy.copy(handler)
        header.body = []
        chunks.append((_shape(header, context), source.span(handler)[0], _header_end(source, handler.body[0])))
        chunks.extend(_block_chunks(handler.body, source, context))
    for name, word in (("orelse", "else:"), ("finalbody", "finally:")):
        block = getattr(stmt, name, None)
        if block:
            at = source.span(block[0])[0]
            chunks.append((word, at, at))
            chunks.extend(_block_chunks(block, source, context))
    return chunks


def _block_chunks(body: list[ast.stmt], source: _Source, context: _Context) -> list[tuple[str, int, int]]:
    return [chunk for unit in _ordered(_block_units(body, source, context)) for chunk in unit.chunks]


def _header_end(source: _Source, first: ast.AST) -> int:
    """Where a compound statement's header ends: before its first inner statement, blank space left out."""
    end = source.offset(first.lineno, first.col_offset)
    while end > source.base and source.text[end - source.base - 1].isspace():
        end -= 1
    return end


def _root(node: ast.AST) -> str | None:
    """The name an attribute or subscript chain starts from (``a`` for ``a.b[0].c``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _effects(stmt: ast.stmt) -> tuple[frozenset, frozenset, bool]:
    """The names a statement reads, the names it may change, and whether it must stay in place.

    A method call (``a.append(x)``) and a store into an item or attribute count as changing
    ``a``. Control flow (``return``, ``break``, ``raise`` ...) keeps a statement in place. A
    function or class definition changes only its own name and reads every name inside it;
    the variables of a comprehension and the parameters of a lambda are their own.
    """
    reads, writes, barrier = set(), set(), False
    stack = [(stmt, frozenset())]
    while stack:
        node, own = stack.pop()
        if isinstance(node, ast.Name):
            if node.id not in own:
                (reads if isinstance(node.ctx, ast.Load) else writes).add(node.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            writes.add(_root(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _root(node.func) not in own:
            writes.add(_root(node.func))
        elif isinstance(node, ast.alias):
            writes.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            writes.add(node.name)
        if isinstance(node, _DEFINITIONS):  # its body runs later: only its own name changes now
            writes.add(node.name)
            reads.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
            continue
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            own = own | {n.id for gen in node.generators for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Lambda):
            own = own | {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        barrier = barrier or isinstance(node, _ORDER_STOPS)
        stack.extend((child, own) for child in ast.iter_child_nodes(node))
    writes.discard(None)
    return frozenset(reads), frozenset(writes), barrier


def _ordered(units: list[_Unit]) -> list[_Unit]:
    """The units in canonical order: each after the ones it depends on, otherwise by normalised text.

    Of the units whose dependencies (:func:`_dependencies`) are all placed, the one with the
    smallest normalised text goes next (ties in original order), so independent statements
    come out in the same order however they were written.
    """
    needs = _dependencies(units)
    after: list[list[int]] = [[] for _ in units]
    for j, deps in enumerate(needs):
        for i in deps:
            after[i].append(j)
    waiting = [len(deps) for deps in needs]
    ready = [(units[j].key, j) for j in range(len(units)) if waiting[j] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(units[i])
        for j in after[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (units[j].key, j))
    return out


def _dependencies(units: list[_Unit]) -> list[set[int]]:
    """For each unit, the earlier units it must stay after.

    ``b`` depends on an earlier ``a`` when one writes a name the other reads or writes, or
    when either must stay in place.
    """
    needs: list[set[int]] = [set() for _ in units]
    last_write: dict[str, int] = {}
    reads_since: dict[str, list[int]] = {}
    last_stop, since_stop = None, []
    for j, unit in enumerate(units):
        deps = needs[j]
        if unit.barrier:
            deps.update(since_stop)
        if last_stop is not None:
            deps.add(last_stop)
        deps.update(last_write[name] for name in unit.reads | unit.writes if name in last_write)
        for name in unit.writes:
            deps.update(reads_since.get(name, ()))
        for name in unit.reads:
            reads_since.setdefault(name, []).append(j)
        for name in unit.writes:
            last_write[name] = j
            reads_since[name] = []
        if unit.barrier:
            last_stop, since_stop = j, []
        else:
            since_stop.append(j)
        deps.discard(j)
    return needs


def _token_units(code: str, base: int) -> list[_Unit]:
    """A cell that is not Python, reduced token by token (Pygments) into one unit that stays in place."""
    chunks = []
    last = None
    for index, kind, value in PythonLexer().get_tokens_unprocessed(code):
        letter = _letter(kind, value)
        if letter is None:
            continue
        end = base + index + len(value)
        if letter == STRING and last == STRING and kind in token.Literal.String:  # one string, many tokens
            chunks[-1] = (STRING, chunks[-1][1], end)
            continue
        last = letter if kind in token.Literal.String else None
        chunks.append((letter, base + index, end))
    if not chunks:
        return []
    return [_Unit("".join(c[0] for c in chunks), chunks, barrier=True)]


def _letter(kind, value: str) -> str | None:
    """What one token becomes in the normalised text (None: it is dropped)."""
    if kind in token.Comment or kind in token.Text or kind in token.Whitespace:
        return None
    if kind in token.Literal.String:
        return STRING
    if kind in token.Literal.Number:
        return NUMBER
    if kind in token.Name and kind not in token.Name.Builtin:
        return NAME
    stripped = "".join(value.split())
    return stripped or None


def read_given(given_code: str) -> _Given:
    """The given code's top-level statements (syntax trees), what it names, and every piece's hash.

    No given statement counts as one that does nothing: a constant the given code stores
    and never reads (``g = 9.81`` in a data cell) is there for the students to read.
    """
    tree = _parse(given_code)
    if tree is None:
        return _Given(hashes=np.unique(hashed_pieces(normalise(given_code).text)))
    context = _Context.of([tree])
    source = _Source(given_code, 0)
    try:
        units = [_statement_unit(stmt, source, context) for stmt in tree.body]
        statements = frozenset(_dump(stmt) for stmt in tree.body) - {None}
    except RecursionError:  # nested too deeply to walk: read it token by token
        units, statements = _token_units(given_code, 0), frozenset()
    return _Given(statements, context, np.unique(hashed_pieces(_joined(_ordered(units)).text)))


# --------------------------------------------------------------------------- fingerprints


@dataclass
class Fingerprints:
    """The winnowed fingerprints of one student's normalised code."""

    norm: Normalised
    hashes: set
    where: dict
    coverage: float


def hashed_pieces(text: str) -> np.ndarray:
    """The hash of every piece of :data:`NOISE` characters of ``text``, in order.

    BLAKE2b, not Python's ``hash()`` (which copydetect uses): ``hash()`` of a string is
    salted afresh in each process, so winnowing kept other pieces on every run and the
    same class got other scores each time the report was made.
    """
    pieces = (text[i:i + NOISE].encode() for i in range(len(text) - NOISE + 1))
    return np.fromiter((int.from_bytes(hashlib.blake2b(piece, digest_size=8).digest(), "little", signed=True)
                        for piece in pieces), dtype=np.int64)


def fingerprint(norm: Normalised, given: np.ndarray) -> Fingerprints:
    """Winnowed fingerprints of ``norm`` (copydetect's winnowing), leaving out those in ``given``."""
    # deferred: copydetect takes about 0.8 s to import, and only this step needs it
    from copydetect.utils import get_token_coverage, winnow

    if len(norm.text) < NOISE:
        return Fingerprints(norm, set(), {}, 0.0)
    hashes, at = winnow(hashed_pieces(norm.text), GUARANTEE - NOISE + 1, remove_duplicates=False)
    kept = ~np.isin(hashes, given)
    where: dict = {}
    for value, index in zip(hashes[kept], at[kept], strict=True):
        where.setdefault(value, []).append(index)
    return Fingerprints(norm, set(where), where, float(get_token_coverage(where, NOISE, len(norm.text))))


def given_hashes(given_code: str) -> np.ndarray:
    """Every piece's hash of the code all students were given (not winnowed: none may slip through)."""
    return read_given(given_code).hashes


@dataclass
class Match:
    """How much of two students' code is shared, and where."""

    share_a: float
    share_b: float
    regions_a: list[tuple[int, int]]
    regions_b: list[tuple[int, int]]

    @property
    def score(self) -> float:
        return max(self.share_a, self.share_b)


def compare(a: Fingerprints, b: Fingerprints) -> Match:
    """The shares of ``a`` and ``b`` found in the other, and the shared regions of the original code."""
    # deferred: copydetect takes about 0.8 s to import, and only this step needs it
    from copydetect.utils import find_fingerprint_overlap, get_copied_slices

    at_a, at_b = find_fingerprint_overlap(a.hashes, b.hashes, a.where, b.where)
    if len(at_a) == 0:
        return Match(0.0, 0.0, [], [])
    slices_a, slices_b = get_copied_slices(at_a, NOISE), get_copied_slices(at_b, NOISE)
    share_a = float(np.sum(slices_a[1] - slices_a[0])) / a.coverage
    share_b = float(np.sum(slices_b[1] - slices_b[0])) / b.coverage
    return Match(min(share_a, 1.0), min(share_b, 1.0), _regions(slices_a, a.norm), _regions(slices_b, b.norm))


def _regions(slices: np.ndarray, norm: Normalised) -> list[tuple[int, int]]:
    """Slices of normalised text as merged, sorted slices of the original code.

    The normalised text is in canonical statement order, so one slice may stand for
    statements far apart in the original: each character's own slice is taken.
    """
    covered = np.zeros(len(norm.text), dtype=bool)
    for start, end in zip(slices[0], slices[1], strict=True):
        covered[start:end] = True
    spans = sorted(set(zip(norm.starts[covered].tolist(), norm.ends[covered].tolist(), strict=True)))
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


# --------------------------------------------------------------------------- reading the course


@dataclass(frozen=True)
class Cell:
    """One code cell of a student's notebook."""

    source: str
    solution: bool
    where: str = ""


@dataclass
class Submissions:
    """The code cells of one assignment's submissions, and what could not be read."""

    cells: dict[str, list[Cell]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def code(self) -> dict[str, str]:
        """Each student's code cells joined by line breaks (the text the report's offsets refer to)."""
        return {student: _joined_code(cells) for student, cells in self.cells.items()}


def _joined_code(cells: list[Cell]) -> str:
    return "\n".join(cell.source for cell in cells)


def _cell_source(cell) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _grade(cell) -> dict:
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    grade = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return grade if isinstance(grade, dict) else {}


def read_sources(layout: CourseLayout, assignment: str) -> tuple[set[str], str]:
    """The grade ids of the solution code cells, and the code every student was given."""
    folder = layout.exercises / assignment
    names = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
    if not names:
        raise CourseError(f"expected the source notebooks of {assignment} in {folder}, found none")
    solution_ids, given = set(), []
    for path in names:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            source, grade = _cell_source(cell), _grade(cell)
            if grade.get("solution") and isinstance(grade.get("grade_id"), str):
                solution_ids.add(grade["grade_id"])
                source = _SOLUTION_REGION.sub(RELEASE_STUB, source) if _SOLUTION_REGION.search(source) \
                    else RELEASE_STUB
            given.append(source)
    if not solution_ids:
        raise CourseError(f"expected solution code cells in the source notebooks of {assignment}, found none")
    return solution_ids, "\n".join(given)


def read_submissions(layout: CourseLayout, assignment: str, solution_ids: set[str]) -> Submissions:
    """Each student's code cells, read from an intake copy of their submission."""
    found = Submissions()
    root = layout.submitted()
    if not root.is_dir():
        return found
    with tempfile.TemporaryDirectory(prefix="rbtutor-similarity-") as scratch:
        for student in _students(root, found.notes):
            cells = _student_cells(root / student / assignment, Path(scratch) / student, solution_ids, found.notes,
                                   student)
            if cells is not None:
                found.cells[student] = cells
    return found


def _students(root: Path, notes: list[str]) -> list[str]:
    """Folder names of ``submitted/`` that are valid student ids (links and others are noted)."""
    students = []
    with os.scandir(root) as entries:
        for entry in entries:
            if not stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode):
                notes.append(f"{_shown(entry.name)}: not a folder (or a link); not read.")
                continue
            problem = id_problem(entry.name)
            if problem:
                notes.append(f"{_shown(entry.name)}: not a student id ({problem}); not read.")
                continue
            students.append(entry.name)
    return sorted(students)


def _shown(name: str) -> str:
    return ascii(name)[1:-1][:80]


def _student_cells(folder: Path, copy_to: Path, solution_ids: set[str], notes: list[str],
                   student: str) -> list[Cell] | None:
    """Every code cell of the intake's copy of ``folder``, in notebook order, or None (with a note)."""
    try:
        os.lstat(folder)
    except FileNotFoundError:
        return None  # no submission of this assignment
    try:
        intake = take_in(folder, copy_to)
    except ValueError as exc:
        notes.append(f"{student}: the submission could not be read ({exc}).")
        return None
    for kind in sorted(set(intake.kinds())):
        notes.append(f"{student}: the intake noted {kind} (see the grader's integrity report).")
    cells, size = [], 0
    for rel in sorted(name for name in intake.taken if name.endswith(".ipynb")):
        nb = json.loads((copy_to / rel).read_text(encoding="utf-8", errors="replace"))
        for number, cell in enumerate(nb["cells"], start=1):
            if cell.get("cell_type") != "code":
                continue
            grade_id = _grade(cell).get("grade_id")
            solution = isinstance(grade_id, str) and grade_id in solution_ids
            where = f"{rel}, cell {number}" + (f" (solution cell {grade_id})" if solution else
                                               f" ({grade_id})" if isinstance(grade_id, str) else " (own cell)")
            source = _cell_source(cell)
            if size + len(source) > MAX_CODE_CHARS:
                notes.append(f"{student}: more than {MAX_CODE_CHARS} characters of code; only the first "
                             f"{MAX_CODE_CHARS} compared.")
                source = source[:max(MAX_CODE_CHARS - size, 0)]
            cells.append(Cell(source, solution, _shown(where)[:200]))
            size += len(source) + 1
            if size >= MAX_CODE_CHARS:
                break
        if size >= MAX_CODE_CHARS:
            break
    if not any(cell.source.strip() for cell in cells):
        notes.append(f"{student}: no code in any code cell.")
        return None
    return cells


# --------------------------------------------------------------------------- the report


@dataclass
class Pair:
    """Two students, how much code they share, and how much of it lies outside each one's solution cells."""

    student_a: str
    student_b: str
    match: Match
    outside_a: float = 0.0
    outside_b: float = 0.0


@dataclass
class _Student:
    cells: list[Cell]
    prints: Fingerprints
    solution_spans: list[tuple[int, int]]


def _prepare(code: dict[str, str | list[Cell]], given_code: str) -> dict[str, _Student]:
    """Each student's cells normalised and fingerprinted, the given code left out."""
    given = read_given(given_code)
    prepared = {}
    for student, cells in code.items():
        cells = [Cell(cells, True)] if isinstance(cells, str) else list(cells)
        spans, at = [], 0
        for cell in cells:
            if cell.solution:
                spans.append((at, at + len(cell.source)))
            at += len(cell.source) + 1
        norm = normalise_cells([cell.source for cell in cells], given)
        prepared[student] = _Student(cells, fingerprint(norm, given.hashes), spans)
    return prepared


def _outside(regions: list[tuple[int, int]], solution_spans: list[tuple[int, int]]) -> float:
    """The share of the marked characters that lie outside the solution cells."""
    marked = sum(end - start for start, end in regions)
    if marked == 0:
        return 0.0
    inside = sum(max(0, min(end, b) - max(start, a)) for start, end in regions for a, b in solution_spans)
    return (marked - inside) / marked


def _ranked(students: dict[str, _Student]) -> list[Pair]:
    pairs = []
    for a, b in itertools.combinations(sorted(students), 2):
        match = compare(students[a].prints, students[b].prints)
        pairs.append(Pair(a, b, match, _outside(match.regions_a, students[a].solution_spans),
                          _outside(match.regions_b, students[b].solution_spans)))
    pairs.sort(key=lambda p: (-p.match.score, p.student_a, p.student_b))
    return pairs


def rank_pairs(code: dict[str, str | list[Cell]], given_code: str) -> list[Pair]:
    """Every pair of students, most similar first (ties by name).

    ``code`` maps each student to their code cells, or to one text taken as one solution cell.
    """
    return _ranked(_prepare(code, given_code))


def similarity_report(layout: CourseLayout, assignment: str, threshold: float = THRESHOLD) -> tuple[Path, Path]:
    """Write ``similarity/<assignment>.csv`` and ``.html``; return their paths."""
    if assignment not in layout.assignments():
        raise CourseError(f"expected one of the course's assignments {layout.assignments()}, got {assignment!r}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"expected a threshold in (0, 1], got {threshold}")
    solution_ids, given_code = read_sources(layout, assignment)
    found = read_submissions(layout, assignment, solution_ids)
    students = _prepare(found.cells, given_code)
    for student, prepared in students.items():
        if prepared.prints.norm.text and not _in_solution_cells(prepared):
            found.notes.append(f"{student}: the solution cells hold no code of their own; "
                               "the code in the other cells was compared.")
    pairs = _ranked(students)
    out = layout.root / "similarity"
    out.mkdir(exist_ok=True)
    csv_path, html_path = out / f"{assignment}.csv", out / f"{assignment}.html"
    _write(csv_path, _csv_text(pairs))
    _write(html_path, render_html(assignment, pairs, found, threshold, students))
    return csv_path, html_path


def _in_solution_cells(student: _Student) -> bool:
    """Whether any of the student's normalised code comes from a solution cell."""
    starts = student.prints.norm.starts
    return any(bool(np.any((starts >= a) & (starts < b))) for a, b in student.solution_spans)


def _write(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def _csv_text(pairs: list[Pair]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student_a", "student_b", "score", "outside_solution_a", "outside_solution_b"])
    for pair in pairs:
        writer.writerow([pair.student_a, pair.student_b, f"{pair.match.score:.3f}", f"{pair.outside_a:.3f}",
                         f"{pair.outside_b:.3f}"])
    return buffer.getvalue()


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #111; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #888; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
td.code { width: 50%; }
pre { white-space: pre-wrap; word-break: break-word; margin: 0 0 0.6rem 0; font-size: 0.9rem; }
p.cell { margin: 0.3rem 0 0.1rem 0; font-size: 0.85rem; color: #333; }
mark { background: #ffe08a; color: #000; outline: 1px solid #b58900; }
.flag { font-weight: bold; }
"""


def render_html(assignment: str, pairs: list[Pair], found: Submissions, threshold: float,
                students: dict[str, _Student]) -> str:
    """The report page: one self-contained HTML document, all student text escaped."""
    e = html.escape
    flagged = sum(p.match.score >= threshold for p in pairs)
    shown = pairs[:min(max(flagged, SHOWN_PAIRS), MAX_SHOWN_PAIRS)]
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>Code similarity: {e(assignment)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
        "<main>", f"<h1>Code similarity: {e(assignment)}</h1>",
        f"<p>{len(found.cells)} students with code, {len(pairs)} pairs; {flagged} at or above the threshold "
        f"{threshold:.2f}. A score is the larger of the two shares of fingerprinted code that the other "
        "student's code also holds. All of each student's code cells are compared, after names, numbers, "
        "strings, layout, comments and redundant parentheses were made uniform, statements that do nothing "
        "were dropped, independent statements were put in one order, and the code every student was given was "
        "left out. A high score is a reason to look, not a finding. "
        f"The {len(shown)} most similar pairs are shown side by side below the table.</p>",
        _pair_table(pairs, threshold), *(_side_by_side(rank, pair, students, threshold)
                                         for rank, pair in enumerate(shown, start=1)),
        _notes(found.notes), "</main>", "</body>", "</html>", "",
    ]
    return "\n".join(parts)


def _outside_text(pair: Pair) -> str:
    """Who has shared code outside their solution cells, and how much of it (empty: nobody)."""
    return "; ".join(f"{name}: {share:.0%}" for name, share in ((pair.student_a, pair.outside_a),
                                                                (pair.student_b, pair.outside_b)) if share > 0)


def _pair_table(pairs: list[Pair], threshold: float) -> str:
    flagged = sum(p.match.score >= threshold for p in pairs)
    listed = pairs[:max(flagged, TABLE_PAIRS)]
    rows = []
    for rank, pair in enumerate(listed, start=1):
        m = pair.match
        flag = '<span class="flag">flagged</span>' if m.score >= threshold else ""
        rows.append(f"<tr><td>{rank}</td><td>{html.escape(pair.student_a)}</td><td>{html.escape(pair.student_b)}</td>"
                    f"<td>{m.score:.3f}</td><td>{m.share_a:.0%}</td><td>{m.share_b:.0%}</td><td>{flag}</td>"
                    f"<td>{html.escape(_outside_text(pair))}</td></tr>")
    head = ("<tr><th scope=\"col\">Rank</th><th scope=\"col\">Student A</th><th scope=\"col\">Student B</th>"
            "<th scope=\"col\">Score</th><th scope=\"col\">Share of A found in B</th>"
            "<th scope=\"col\">Share of B found in A</th><th scope=\"col\">Flag</th>"
            "<th scope=\"col\">Shared code outside the solution cells</th></tr>")
    return (f"<h2>The {len(listed)} most similar pairs</h2><p>All {len(pairs)} pairs are in the CSV file "
            "beside this page.</p><table><caption>Pairs of students by code similarity, most similar first"
            f"</caption><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>")


def _side_by_side(rank: int, pair: Pair, students: dict[str, _Student], threshold: float) -> str:
    a, b, m = pair.student_a, pair.student_b, pair.match
    e = html.escape
    status = "flagged" if m.score >= threshold else "below the threshold"
    outside = "".join(
        f'<p class="flag">{share:.0%} of the code {e(name)} shares lies outside the solution cells of {e(name)} '
        "(in cells of their own or in cells they were given).</p>"
        for name, share in ((a, pair.outside_a), (b, pair.outside_b)) if share > 0)
    return (f"<section><h2>Pair {rank}: {e(a)} and {e(b)} (score {m.score:.3f}, {status})</h2>{outside}"
            "<p>Marked text (between the labels “shared from here” and “to here” for screen readers) is code "
            "that the other student's answer also holds.</p>"
            f"<table><caption>Code cells of {e(a)} and {e(b)}, side by side</caption><thead><tr>"
            f'<th scope="col">{e(a)}</th><th scope="col">{e(b)}</th></tr></thead><tbody><tr>'
            f'<td class="code">{_cells_marked(students[a], m.regions_a)}</td>'
            f'<td class="code">{_cells_marked(students[b], m.regions_b)}</td></tr></tbody></table></section>')


_HIDDEN = 'style="position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)"'


def _cells_marked(student: _Student, regions: list[tuple[int, int]]) -> str:
    """The student's cells with code of their own, each under its label, marked; cut at :data:`SHOWN_CHARS`."""
    starts = student.prints.norm.starts
    out, hidden, at, budget, cut = [], [], 0, SHOWN_CHARS, False
    for cell in student.cells:
        end = at + len(cell.source)
        if not np.any((starts >= at) & (starts < end)):
            hidden.append(cell.where)
        elif budget > 0:
            shown = cell.source[:budget]
            local = [(max(s, at) - at, min(t, end) - at) for s, t in regions if s < end and t > at]
            out.append(f'<p class="cell">{html.escape(cell.where)}</p>{_marked(shown, local)}')
            budget -= len(shown)
            cut = cut or len(shown) < len(cell.source)
        else:
            cut = True
        at = end + 1
    if cut:
        out.append(f"<p>Only the first {SHOWN_CHARS} characters of code are shown.</p>")
    if hidden:
        out.append(f"<p>Not shown (only code they were given, or nothing): {html.escape(', '.join(hidden))}.</p>")
    return "".join(out)


def _marked(shown: str, regions: list[tuple[int, int]]) -> str:
    """``shown`` escaped in a ``<pre>``, the regions in ``<mark>``."""
    out, at = [], 0
    for start, end in regions:
        start, end = min(start, len(shown)), min(end, len(shown))
        if start >= end:
            continue
        out.append(html.escape(shown[at:start]))
        out.append(f'<mark><span {_HIDDEN}>[shared from here]</span>{html.escape(shown[start:end])}'
                   f'<span {_HIDDEN}>[to here]</span></mark>')
        at = end
    out.append(html.escape(shown[at:]))
    return f"<pre>{''.join(out)}</pre>"


def _notes(notes: list[str]) -> str:
    if not notes:
        return "<h2>Notes</h2><p>Every submission was read.</p>"
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return f"<h2>Notes</h2><ul>{items}</ul>"
