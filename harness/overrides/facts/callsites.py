"""Method call sites that can prove a crash: ``self.m(...)``, ``super().m(...)``, ``C(...).m(...)``.

Regular expressions find the lines that can hold such a call, and only the statements spanning them
are visited. A local receiver is recognised when the function binds it once to ``C(...)`` or
annotates a parameter with a class. Every text scan is linear in the text's length.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum
from itertools import accumulate
from typing import Any, NamedTuple, TypeVar

from harness.overrides.facts.blocks import inner_blocks
from harness.overrides.facts.signature import dotted_name


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
    CLS = 4
    """``cls.m(...)`` in a class method: dispatches on the class, not an instance."""


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


_SELF_CALL = re.compile(r"self[ \t]*\.[ \t]*\w+[ \t]*\(")
_CLS_CALL = re.compile(r"cls[ \t]*\.[ \t]*\w+[ \t]*\(")  # apart: a literal prefix is fast
_PAREN_CALL = re.compile(r"\)[ \t]*\.[ \t]*\w+[ \t]*\(")
_RECEIVER_WINDOW = 80
"""How far before ``).m(`` the receiver call ``C(...)`` / ``super(...)`` may start."""
_WORD = re.compile(r"\w+")
_CTOR_ASSIGN = re.compile(r"=[ \t]*([A-Za-z_][\w.]*)[ \t]*\(")
_ASSIGN_TARGET = re.compile(r"[ \t]*([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?$")
_DOT_CALL = re.compile(r"\.(?=[ \t]*\w+[ \t]*\()")
"""``.m(``: the name before the dot is read backwards (a lookbehind at every position of
the text cost a third of a parse)."""
_SCAN_BUDGET = 4
"""Once per-name scans of one file have read this many times its length, every ``name.m(``
of the file is indexed in one pass instead."""
_ID_CHARS_DOT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
_AFTER_DOT = re.compile(r"[ \t]*\w+[ \t]*\(")
_BLOCK_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
_LEAF_FIELDS = frozenset({"ctx", "id", "attr", "arg", "kind", "type_comment", "n", "s", "op"})


class _ChildFields(dict[type, tuple[str, ...]]):
    """Node class -> fields that can hold nested calls (empty for leaves and non-nodes)."""

    def __missing__(self, cls: type) -> tuple[str, ...]:
        fields = cls._fields if issubclass(cls, ast.AST) and cls is not ast.Constant else ()
        self[cls] = fields = tuple(f for f in fields if f not in _LEAF_FIELDS)
        return fields


_CHILD_FIELDS = _ChildFields()


_TEXT_LIMIT = 200
EXTERNAL = frozenset(
    {"torch", "numpy", "np", "typing", "typing_extensions", "collections", "transformers", "jax",
     "tensorflow", "triton", "PIL", "pydantic", "msgspec", "fastapi", "starlette", "ray", "zmq",
     "asyncio", "enum", "dataclasses", "abc", "builtins", "os", "pathlib", "re", "io", "logging",
     "json", "argparse", "functools", "itertools", "concurrent"}
)  # fmt: skip
"""Top-level packages that cannot hold project classes: annotated receivers typed with
their classes (``x: torch.Tensor``) are not worth walking for."""


def _name_calls(text: str, needle: str, pos: int, end: int) -> Iterator[int]:
    """Offsets of ``needle`` (``name.``) in ``text[pos:end]`` that start ``name.m(``."""
    start = text.find(needle, pos, end)
    while start != -1:
        if _starts_word(text, start) and _AFTER_DOT.match(text, start + len(needle)):
            yield start
        start = text.find(needle, start + 1, end)


def _starts_word(text: str, start: int) -> bool:
    """Whether no ``[\\w.]`` comes right before ``start``."""
    return not start or text[start - 1] not in _ID_CHARS_DOT


def _closes_receiver_call(text: str, close: int) -> bool:
    """Whether the ``)`` at ``close`` ends ``C(...)`` or ``super(...)`` (a capitalised or
    ``super`` name, then arguments without parentheses or newlines) starting at most
    ``_RECEIVER_WINDOW`` characters before it. Constant work per call."""
    low = max(0, close - _RECEIVER_WINDOW)
    open_ = text.rfind("(", low, close)
    if open_ == -1 or text.find(")", open_ + 1, close) != -1:
        return False
    if text.find("\n", open_ + 1, close) != -1:
        return False
    head = text[low:open_].rstrip(" \t")
    word = _WORD.match(head[::-1])  # the name right before the parenthesis, reversed
    if word is None:
        return False
    name = word.group()
    return name.startswith("repus") or any("A" <= c <= "Z" for c in name)


def _is_class_like(name: str) -> bool:
    return name.rpartition(".")[2][:1].isupper()


def _annotation_class(node: ast.expr | None) -> str | None:
    """``Base`` for ``Base``, ``Base[T]``, ``Optional[Base]``, ``Base | None`` or ``"Base"``."""
    while node is not None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value.strip()
            return value if value.replace(".", "").isidentifier() else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            none = isinstance(node.right, ast.Constant) and node.right.value is None
            node = node.left if none else None
            continue
        if isinstance(node, ast.Subscript):
            outer = dotted_name(node.value)
            optional = outer is not None and outer.rpartition(".")[2] == "Optional"
            node = node.slice if optional else node.value
            continue
        name = dotted_name(node)
        return name if name is not None and _is_class_like(name) else None
    return None


def _bindings(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """How often each name is bound in ``func``; parameters, imports, ``global``, ``except ... as``
    and assignments of anything but a plain ``C(...)`` count twice (never one constructor call)."""
    counts: dict[str, int] = {}
    stack: list[Any] = [func]
    children = _CHILD_FIELDS
    while stack:
        node = stack.pop()
        cls = node.__class__
        if cls is list:
            stack.extend(node)
            continue
        if cls is ast.Name:
            if not isinstance(node.ctx, ast.Load):
                counts[node.id] = counts.get(node.id, 0) + 1
            continue
        named: list[str] = []
        if cls is ast.arg:
            named = [node.arg]
        elif cls is ast.alias:
            named = [node.asname or node.name.partition(".")[0]]
        elif cls is ast.Global or cls is ast.Nonlocal:
            named = node.names
        elif cls is ast.ExceptHandler and node.name:
            named = [node.name]
        elif (cls is ast.Assign or cls is ast.AnnAssign) and not (
            isinstance(node.value, ast.Call) and dotted_name(node.value.func) is not None
        ):
            targets = node.targets if cls is ast.Assign else [node.target]
            named = [t.id for t in targets if isinstance(t, ast.Name)]
        for name in named:
            counts[name] = counts.get(name, 0) + 2
        stack.extend(getattr(node, f, None) for f in children[cls])
    return counts


class _Collector:
    """Collects call sites of one function, walking only statements on hit lines."""

    def __init__(
        self,
        hits: FileHits,
        caller: str,
        self_name: str | None,
        on_class: bool,
        local_receivers: dict[str, tuple[Receiver, str]],
    ) -> None:
        self.hits = hits
        self.caller = caller
        self.self_name = self_name
        self.on_class = on_class
        """True in a class method: ``self_name`` is the class."""
        self.locals = local_receivers
        self.out: list[CallSite] = []

    def visit_body(self, body: Sequence[ast.stmt], hits: Sequence[int]) -> None:
        """Walk the statements of ``body`` that span one of the ``hits`` lines."""
        stack: list[ast.stmt] = list(reversed(body))
        while stack:
            stmt = stack.pop()
            i = bisect_left(hits, stmt.lineno)
            if i == len(hits) or hits[i] > (stmt.end_lineno or stmt.lineno):
                continue  # no hit line in the statement's span
            if isinstance(stmt, ast.ClassDef):
                continue  # a nested class has its own `self`
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and self._rebinds_self(
                stmt.args
            ):
                continue  # `def helper(self): ...` inside a method: another object
            for name in stmt._fields:
                if name not in _BLOCK_FIELDS:
                    self._walk_expr(getattr(stmt, name))
            for block in reversed(inner_blocks(stmt)):
                stack.extend(reversed(block))

    def _walk_expr(self, root: object) -> None:
        stack: list[object] = [root]
        pop = stack.pop
        push = stack.append
        extend = stack.extend
        children = _CHILD_FIELDS
        while stack:
            node = pop()
            cls = node.__class__
            if cls is list:
                extend(node)  # type: ignore[arg-type]  # pyright: ignore[reportUnknownArgumentType]
                continue
            fields = children[cls]
            if not fields:
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                self._record(node, node.func)
            elif isinstance(node, ast.Lambda) and self._rebinds_self(node.args):
                continue
            for name in fields:
                push(getattr(node, name, None))

    def _rebinds_self(self, args: ast.arguments) -> bool:
        if self.self_name is None:
            return False
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        return any(a is not None and a.arg == self.self_name for a in every)

    def _receiver(self, value: ast.expr) -> tuple[Receiver, str | None] | None:
        if isinstance(value, ast.Name):
            if value.id == self.self_name:
                return (Receiver.CLS if self.on_class else Receiver.SELF), None
            return self.locals.get(value.id)
        if isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Name) and func.id == "super":
                return Receiver.SUPER, dotted_name(value.args[0]) if value.args else None
            name = dotted_name(func)
            if name is not None and _is_class_like(name):
                return Receiver.CONSTRUCTED, name
        return None

    def _record(self, call: ast.Call, func: ast.Attribute) -> None:
        receiver = self._receiver(func.value)
        if receiver is None:
            return
        self.out.append(
            CallSite(
                receiver=receiver[0],
                receiver_class=receiver[1],
                method=func.attr,
                caller=self.caller,
                n_positional=sum(1 for a in call.args if not isinstance(a, ast.Starred)),
                keywords=tuple(k.arg for k in call.keywords if k.arg is not None),
                star=any(isinstance(a, ast.Starred) for a in call.args),
                starstar=any(k.arg is None for k in call.keywords),
                line=call.lineno,
                col=call.col_offset + 1,
                text=self.hits.lines[call.lineno - 1].strip()[:_TEXT_LIMIT],
            )
        )


class FileHits:
    """A file's text and lines, and where in it interesting calls can be, found by regex (receiver
    names on demand)."""

    def __init__(self, text: str, external: frozenset[str] = frozenset()) -> None:
        self.text = text
        self.lines = text.split("\n")
        self._starts = [0, *accumulate(len(line) + 1 for line in self.lines)]
        """Offset of each line's first character, then ``len(text) + 1``."""
        self.self_lines = self._self_lines()
        """Lines with ``self.m(``, ``cls.m(``, ``super().m(`` or ``C(...).m(``."""
        self.assigns = self._assigns() if "=" in text else []
        """``(offset, name, Class)`` of each ``name = Class(...)`` (the first ``=`` of its line)."""
        self.external = external | EXTERNAL
        """Names that cannot be project classes (``torch``, ``Tensor`` from torch)."""
        self._index: dict[str, list[int]] | None = None
        self._scanned = 0
        self._self_assigned: list[tuple[int, str]] | None = None
        """``(offset, name)`` of each ``self.name =`` (:func:`_self_assignments`), once asked."""

    def start(self, lineno: int) -> int:
        """Offset of the first character of line ``lineno`` (``len(text)`` past the end)."""
        starts = self._starts
        return starts[lineno - 1] if lineno <= len(starts) else len(self.text)

    def line_of(self, offset: int) -> int:
        """The number of the line holding ``offset``."""
        return bisect_right(self._starts, offset)

    def lines_of(self, offsets: Iterable[int]) -> list[int]:
        """The distinct line numbers of ``offsets``, ascending."""
        starts = self._starts
        return sorted({bisect_right(starts, offset) for offset in offsets})

    def between(self, text: str, first: int, last: int) -> str:
        """Lines ``first..last`` of ``text``: this file's text, or one with the same line lengths
        (comments blanked)."""
        return text[self.start(first) : self.start(last + 1) - 1]

    def _self_lines(self) -> list[int]:
        text = self.text
        found = [m.start() for m in _SELF_CALL.finditer(text) if _starts_word(text, m.start())]
        if "cls" in text:
            found += (m.start() for m in _CLS_CALL.finditer(text) if _starts_word(text, m.start()))
        found += (
            m.start() for m in _PAREN_CALL.finditer(text) if _closes_receiver_call(text, m.start())
        )
        return self.lines_of(found)

    def name_lines(self, name: str, first: int, last: int) -> list[int]:
        """Lines ``first..last`` with ``name.m(`` calls: the span is searched for the name
        (``str.find``: no per-name regex) until the searches have read a few times the file, then
        one pass indexes all names."""
        if self._index is None:
            pos, end = self.start(first), self.start(last + 1)
            self._scanned += end - pos
            if self._scanned <= _SCAN_BUDGET * len(self.text):
                return self.lines_of(_name_calls(self.text, name + ".", pos, end))
            self._index = self._all_name_lines()
        return _between(self._index.get(name, []), first, last + 1)

    def _all_name_lines(self) -> dict[str, list[int]]:
        """Lines of ``name.m(`` calls by ``name``, in one pass over the text."""
        text = self.text
        starts = self._starts
        out: dict[str, list[int]] = {}
        for match in _DOT_CALL.finditer(text):
            dot = start = match.start()
            while start and (text[start - 1].isalnum() or text[start - 1] == "_"):
                start -= 1  # `\w`: what str.isalnum() says, and the underscore
            if start == dot or (start and text[start - 1] == "."):
                continue
            line = bisect_right(starts, start)
            lines = out.setdefault(text[start:dot], [])
            if not lines or lines[-1] != line:
                lines.append(line)
        return out

    def _assigns(self) -> list[tuple[int, str, str]]:
        text = self.text
        out: list[tuple[int, str, str]] = []
        for match in _CTOR_ASSIGN.finditer(text):
            callee = match.group(1)
            start = match.start()
            line_start = text.rfind("\n", 0, start) + 1
            if not _is_class_like(callee) or text.find("=", line_start) != start:
                continue
            target = _ASSIGN_TARGET.match(text, line_start, start)
            if target is not None:
                out.append((start, target.group(1), callee))
        return out

    def self_assigned(self, first: int, last: int) -> frozenset[str]:
        """Names assigned as ``self.x = ...`` (or ``self.x: T = ...``) on lines
        ``first..last`` (textual: cheap and conservative; one scan of the file)."""
        if self._self_assigned is None:
            self._self_assigned = _self_assignments(self.text)
        rows = _between(self._self_assigned, (self.start(first),), (self.start(last + 1),))
        return frozenset(name for _, name in rows)


_SELF_DOT = re.compile(r"self(?=[ \t]*\.[ \t]*(\w+)([ \t]*)[=:])")


def _self_assignments(text: str) -> list[tuple[int, str]]:
    """``(offset, name)`` of each ``self.name =`` / ``self.name: T =``, in order, in one linear
    scan."""
    out: list[tuple[int, str]] = []
    resume = 0
    next_eq = next_nl = -1
    size = len(text)
    for match in _SELF_DOT.finditer(text):
        if match.start() < resume:
            continue  # inside the annotation of the previous assignment
        end = match.end(2)
        mark = text[end : end + 1]
        eq = -1
        if mark == "=":
            eq = end
        elif mark == ":":
            if next_eq < end:
                next_eq = text.find("=", end)
                next_eq = size if next_eq == -1 else next_eq
            if next_nl < end:
                next_nl = text.find("\n", end)
                next_nl = size if next_nl == -1 else next_nl
            eq = next_eq if next_eq < next_nl else -1
        if eq == -1 or text[eq + 1 : eq + 2] == "=":
            continue
        out.append((match.start(), match.group(1)))
        resume = eq + 1
    return out


R = TypeVar("R", int, tuple[Any, ...])


def _between(items: list[R], low: Any, high: Any) -> list[R]:
    """The items of sorted ``items`` from ``low`` up to, not including, ``high`` (a copy): line
    numbers, or rows starting with an offset (``low`` and ``high`` then 1-tuples)."""
    i = bisect_left(items, low)
    return items[i : bisect_left(items, high, i)]


def collect(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    hits: FileHits,
    *,
    caller: str,
    self_name: str | None,
    on_class: bool = False,
) -> list[CallSite]:
    """Call sites in ``func`` (nested functions included, nested classes not); ``self_name`` names
    the implicit first parameter, ``on_class`` says it is a class."""
    first = func.body[0].lineno
    last = func.end_lineno or func.lineno
    own = _between(hits.self_lines, first, last + 1)
    local_receivers: dict[str, tuple[Receiver, str]] = {}
    for arg in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs):
        if arg.annotation is None or arg.arg == self_name:
            continue
        cls = _annotation_class(arg.annotation)
        if cls is None or cls.partition(".")[0] in hits.external:
            continue
        lines = hits.name_lines(arg.arg, first, last)
        if lines:
            local_receivers[arg.arg] = (Receiver.ANNOTATED, cls)
            own.extend(lines)
    bound: dict[str, int] | None = None
    assigns = _between(hits.assigns, (hits.start(first),), (hits.start(last + 1),))
    for _, name, callee in assigns:
        if name == self_name or name in local_receivers:
            continue
        lines = hits.name_lines(name, first, last)
        if not lines:
            continue
        if bound is None:
            bound = _bindings(func)
        if bound.get(name) != 1:
            continue
        local_receivers[name] = (Receiver.CONSTRUCTED, callee)
        own.extend(lines)
    if not own:
        return []
    collector = _Collector(hits, caller, self_name, on_class, local_receivers)
    collector.visit_body(func.body, sorted(set(own)))
    return sorted(collector.out, key=lambda c: (c.line, c.col))
