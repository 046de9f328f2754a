"""Method call sites that can prove a crash: ``self.m(...)``, ``super().m(...)``, ``C(...).m(...)``.

Walking every expression of a large tree costs more than parsing it, so the walk is guided:
a regular expression finds the lines that can hold an interesting call, and only the
statements spanning those lines are visited. Local receivers are recognised when the
function binds them exactly once to a constructor call (``x = C(...)``) or annotates a
parameter with a class (``x: Base``); anything that might rebind the name disqualifies it.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections.abc import Sequence
from enum import IntEnum
from typing import NamedTuple

from harness.overrides.signature import dotted_name


class Receiver(IntEnum):
    """What the object a method is called on is known to be."""

    SELF = 0
    """``self.m(...)`` / ``cls.m(...)``: dispatches on the runtime class of the instance."""
    SUPER = 1
    """``super().m(...)``: dispatches to the next class in the MRO."""
    CONSTRUCTED = 2
    """``C(...).m(...)`` or ``x = C(...); x.m(...)``: the exact class is ``C``."""
    ANNOTATED = 3
    """``x: Base`` then ``x.m(...)``: any subclass of ``Base``."""


class CallSite(NamedTuple):
    """The shape of one method call: enough to simulate Python's argument binding."""

    receiver: Receiver
    receiver_class: str | None
    """Dotted class expression for CONSTRUCTED/ANNOTATED receivers, and for
    ``super(C, self)``; ``None`` otherwise."""
    method: str
    caller: str
    """Name of the enclosing method (``""`` at module level or in a plain function)."""
    n_positional: int
    keywords: tuple[str, ...]
    star: bool
    starstar: bool
    line: int
    col: int
    text: str


_METHOD_CALL = re.compile(r"\.[ \t]*\w+[ \t]*\(")
_RECEIVER_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)[ \t]*$")
_RECEIVER_CALL = re.compile(r"(?<![\w.])(?:super|[A-Z]\w*)[ \t]*\([^()\n]*\)[ \t]*$")
_SELF_NAMES = ("self", "cls")
_CTOR_ASSIGN = re.compile(r"^[ \t]*(\w+)[ \t]*(?::[^=\n]*)?=[ \t]*([A-Za-z_][\w.]*)[ \t]*\(", re.M)
_TEXT_LIMIT = 200


class LineIndex:
    """Offsets of line starts, to turn regex match positions into line numbers."""

    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0]
        find = text.find
        pos = find("\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        self.starts = starts

    def line_of(self, offset: int) -> int:
        """1-based line number of a character offset."""
        return bisect_left(self.starts, offset + 1)

    def segment(self, first: int, last: int) -> str:
        """Source text of lines ``first..last`` (1-based, inclusive)."""
        starts = self.starts
        end = starts[last] if last < len(starts) else len(self.text)
        return self.text[starts[first - 1] : end]

    def line(self, lineno: int) -> str:
        """One source line without its newline."""
        return self.segment(lineno, lineno).rstrip("\r\n")

    def call_lines(self) -> tuple[list[int], dict[str, list[int]]]:
        """Lines of ``self.m(``/``super().m(``/``C(...).m(`` calls, and receiver name -> lines."""
        text = self.text
        index: dict[str, list[int]] = {}
        special: list[int] = []
        line = 1
        pos = 0
        count = text.count
        for match in _METHOD_CALL.finditer(text):
            start = match.start()
            line += count("\n", pos, start)
            pos = start
            before = text[max(0, start - 80) : start]
            name = _RECEIVER_NAME.search(before)
            if name is not None:
                lines = index.setdefault(name.group(1), [])
                if not lines or lines[-1] != line:
                    lines.append(line)
            elif before.endswith(")") and _RECEIVER_CALL.search(before):
                special.append(line)
        for name in _SELF_NAMES:
            special.extend(index.get(name, ()))
        return sorted(set(special)), index


def _spans(lines: Sequence[int], first: int, last: int) -> bool:
    i = bisect_left(lines, first)
    return i < len(lines) and lines[i] <= last


def _is_class_like(name: str) -> bool:
    return name.rpartition(".")[2][:1].isupper()


def _annotation_class(node: ast.expr | None) -> str | None:
    """``Base`` for ``Base``, ``Base[T]``, ``Optional[Base]``, ``Base | None`` or ``"Base"``."""
    while node is not None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value.strip()
            return value if value.replace(".", "").isidentifier() else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            right = node.right
            none = isinstance(right, ast.Constant) and right.value is None
            node = node.left if none else None
            continue
        if isinstance(node, ast.Subscript):
            outer = dotted_name(node.value)
            if outer is not None and outer.rpartition(".")[2] == "Optional":
                node = node.slice
                continue
            node = node.value
            continue
        name = dotted_name(node)
        return name if name is not None and _is_class_like(name) else None
    return None


def _binds(node: ast.AST, name: str) -> int:
    """How many bindings of ``name`` the node makes (2 for forms we never trust)."""
    if isinstance(node, ast.Name):
        return int(node.id == name and not isinstance(node.ctx, ast.Load))
    if isinstance(node, ast.arg):
        return 2 * (node.arg == name)
    if isinstance(node, ast.alias):
        return 2 * ((node.asname or node.name.partition(".")[0]) == name)
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return 2 * (name in node.names)
    if isinstance(node, ast.ExceptHandler):
        return 2 * (node.name == name)
    return 0


def _bound_once(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """True when ``name`` is bound exactly once in ``func`` (and never as a parameter)."""
    return sum(_binds(node, name) for node in ast.walk(func)) == 1


class _Collector:
    """Collects call sites of one function, walking only statements on hit lines."""

    def __init__(self, lines: LineIndex, caller: str) -> None:
        self.lines = lines
        self.caller = caller
        self.self_name: str | None = None
        self.locals: dict[str, tuple[Receiver, str]] = {}
        self.out: list[CallSite] = []

    def visit_body(self, body: Sequence[ast.stmt], hits: Sequence[int]) -> None:
        stack: list[ast.stmt] = list(reversed(body))
        while stack:
            stmt = stack.pop()
            end = stmt.end_lineno or stmt.lineno
            if not _spans(hits, stmt.lineno, end):
                continue
            if isinstance(stmt, ast.ClassDef):
                continue  # a nested class has its own `self`
            blocks: list[list[ast.stmt]] = []
            for field, value in ast.iter_fields(stmt):
                if field in ("body", "orelse", "finalbody") and isinstance(value, list):
                    blocks.append(value)  # type: ignore[arg-type]
                elif field == "handlers" and isinstance(value, list):
                    for handler in value:  # pyright: ignore[reportUnknownVariableType]
                        if isinstance(handler, ast.ExceptHandler):
                            blocks.append(handler.body)
                elif field == "cases" and isinstance(value, list):
                    for case in value:  # pyright: ignore[reportUnknownVariableType]
                        if isinstance(case, ast.match_case):
                            blocks.append(case.body)
                elif isinstance(value, ast.AST):
                    self._walk_expr(value)
                elif isinstance(value, list):
                    for item in value:  # pyright: ignore[reportUnknownVariableType]
                        if isinstance(item, ast.AST):
                            self._walk_expr(item)
            for block in reversed(blocks):
                stack.extend(reversed(block))

    def _walk_expr(self, root: ast.AST) -> None:
        for node in ast.walk(root):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                self._record(node, node.func)

    def _receiver(self, value: ast.expr) -> tuple[Receiver, str | None] | None:
        if isinstance(value, ast.Name):
            if value.id == self.self_name:
                return Receiver.SELF, None
            known = self.locals.get(value.id)
            return (known[0], known[1]) if known is not None else None
        if isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Name) and func.id == "super":
                if not value.args:
                    return Receiver.SUPER, None
                return Receiver.SUPER, dotted_name(value.args[0])
            name = dotted_name(func)
            if name is not None and _is_class_like(name):
                return Receiver.CONSTRUCTED, name
        return None

    def _record(self, call: ast.Call, func: ast.Attribute) -> None:
        receiver = self._receiver(func.value)
        if receiver is None:
            return
        star = any(isinstance(a, ast.Starred) for a in call.args)
        n_positional = sum(1 for a in call.args if not isinstance(a, ast.Starred))
        keywords = tuple(k.arg for k in call.keywords if k.arg is not None)
        starstar = any(k.arg is None for k in call.keywords)
        text = self.lines.line(call.lineno).strip()[:_TEXT_LIMIT]
        self.out.append(
            CallSite(
                receiver=receiver[0],
                receiver_class=receiver[1],
                method=func.attr,
                caller=self.caller,
                n_positional=n_positional,
                keywords=keywords,
                star=star,
                starstar=starstar,
                line=call.lineno,
                col=call.col_offset + 1,
                text=text,
            )
        )


class FileHits(NamedTuple):
    """Where in a file interesting calls can be, found once per file by regex."""

    lines: LineIndex
    self_lines: list[int]
    """Lines with ``self.m(``, ``cls.m(``, ``super(`` or ``C(...).m(``."""
    by_name: dict[str, list[int]]
    """Receiver name -> lines with ``name.m(``."""

    @classmethod
    def scan(cls, text: str) -> FileHits:
        """Index ``text``."""
        lines = LineIndex(text)
        special, by_name = lines.call_lines()
        return cls(lines, special, by_name)


def _lines_in(lines: Sequence[int], first: int, last: int) -> list[int]:
    i = bisect_left(lines, first)
    out: list[int] = []
    while i < len(lines) and lines[i] <= last:
        out.append(lines[i])
        i += 1
    return out


def collect(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    hits: FileHits,
    *,
    caller: str,
    self_name: str | None,
) -> list[CallSite]:
    """Call sites in ``func`` (including nested functions, excluding nested classes)."""
    first = func.body[0].lineno if func.body else func.lineno
    last = func.end_lineno or func.lineno
    collector = _Collector(hits.lines, caller)
    collector.self_name = self_name
    extra: list[int] = []
    params = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
    for arg in params:
        lines = hits.by_name.get(arg.arg)
        if lines is None or arg.arg == self_name or not _spans(lines, first, last):
            continue
        cls = _annotation_class(arg.annotation)
        if cls is not None:
            collector.locals[arg.arg] = (Receiver.ANNOTATED, cls)
            extra.extend(_lines_in(lines, first, last))
    text = hits.lines.segment(first, last)
    if "=" in text:
        for match in _CTOR_ASSIGN.finditer(text):
            name, callee = match.group(1), match.group(2)
            lines = hits.by_name.get(name)
            if (
                lines is None
                or not _is_class_like(callee)
                or name == self_name
                or name in collector.locals
                or not _spans(lines, first, last)
                or not _bound_once(func, name)
            ):
                continue
            collector.locals[name] = (Receiver.CONSTRUCTED, callee)
            extra.extend(_lines_in(lines, first, last))
    own = _lines_in(hits.self_lines, first, last)
    if extra:
        own = sorted({*own, *extra})
    if not own:
        return []
    collector.visit_body(func.body, own)
    return collector.out
