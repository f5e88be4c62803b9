"""Step: beside grading, the similarity report. A student's code reduced to its shape (see the package docstring)."""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import heapq
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
from pygments import token
from pygments.lexers import PythonLexer

#: Length of one fingerprinted piece of normalised code, in characters.
NOISE = 12
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


def hashed_pieces(text: str) -> np.ndarray:
    """The hash of every piece of :data:`NOISE` characters of ``text``, in order.

    BLAKE2b, not Python's ``hash()`` (which copydetect uses): ``hash()`` of a string is
    salted afresh in each process, so winnowing kept other pieces on every run and the
    same class got other scores each time the report was made.
    """
    pieces = (text[i:i + NOISE].encode() for i in range(len(text) - NOISE + 1))
    return np.fromiter((int.from_bytes(hashlib.blake2b(piece, digest_size=8).digest(), "little", signed=True)
                        for piece in pieces), dtype=np.int64)
