"""Dispatch facts found by scanning text with comments blanked: escapes, dynamic lookups, typed
``self.attr``, calls on other receivers (calls in strings count too: more calls only mean more
reach).
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Sequence

from harness.overrides.facts.blocks import class_functions
from harness.overrides.facts.callsites import FileHits
from harness.overrides.facts.guards import rejected_classes
from harness.overrides.facts.records import ANY_NAME, MIN_PREFIX, ForeignCall
from harness.overrides.facts.uses import COLLECTED, inert_lookups

_METHOD_CALL = re.compile(r"\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_SELF_TAIL = re.compile(r"(?<![\w.])(?:self|cls)$")
_COMMENT_RUN = re.compile(r"#[^\n]*")
_SUPER_TAIL = re.compile(r"\bsuper\([^()\n]*\)[ \t]*$")
_AFTER_DOT_REF = r"[ \t]*\.[ \t]*([A-Za-z_]\w*)\b(?![ \t]*(?:\(|=(?!=)))"
# A literal first character keeps these scans fast; the lookbehind then checks the word start.
_SELF_REF = re.compile(r"s(?<![\w.]s)elf" + _AFTER_DOT_REF)
_CLS_REF = re.compile(r"c(?<![\w.]c)ls" + _AFTER_DOT_REF)
_ATTR_ASSIGN = re.compile(
    r"s(?<![\w.]s)elf[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*(?::[^=\n]{0,200})?=(?!=)[ \t]*"
    r"([A-Za-z_][\w.]{0,200}[ \t]*\()?"
)
_GETATTR = re.compile(r"g(?<![\w.]g)etattr\([ \t]*(self|cls|[A-Za-z_][\w.]*)[ \t]*,[ \t]*")
_STRING_HEAD = re.compile(r"""([rRbBuU]?[fF]?[rR]?)(['"])""")
_RAISE_GUARD = ("isinstance(", "raise")


class Locator:
    """Line numbers of offsets (counting newlines from the previous one, as scans go in order), and
    the innermost class or function holding a line."""

    def __init__(self, text: str, spans: Sequence[tuple[int, int]]) -> None:
        self.text = text
        self.spans = sorted([(*span, i) for i, span in enumerate(spans)], key=lambda s: s[0])
        self.firsts = [first for first, _, _ in self.spans]
        self.parents: list[int] = []
        """Per sorted span: the position of the nearest span enclosing it, or -1."""
        open_: list[int] = []
        for position, (first, last, _) in enumerate(self.spans):
            while open_ and self.spans[open_[-1]][1] < first:
                open_.pop()
            self.parents.append(open_[-1] if open_ else -1)
            if last >= first:
                open_.append(position)
        self._pos = 0
        self._line = 1

    def line(self, offset: int) -> int:
        if offset < self._pos:
            self._pos, self._line = 0, 1
        self._line += self.text.count("\n", self._pos, offset)
        self._pos = offset
        return self._line

    def owner(self, line: int) -> int | None:
        """Index (into the spans given) of the innermost span holding ``line``: the last span
        starting at or before it, else the nearest enclosing one (spans nest, as statements
        do)."""
        at = bisect_right(self.firsts, line) - 1
        while at >= 0:
            first, last, index = self.spans[at]
            if first <= line <= last:
                return index
            at = self.parents[at]
        return None


def _name_argument(source: str) -> tuple[bool, str]:
    """``(True, name)`` for a constant name (``"name")``), else ``(False, prefix)``: the literal
    text the computed name starts with (``"_visit_" + x`` -> ``_visit_``; ``f"_m_{k}"`` -> ``_m_``;
    ``name`` -> :data:`ANY_NAME`)."""
    match = _STRING_HEAD.match(source)
    end = -1 if match is None else source.find(match.group(2), match.end())
    if match is None or end == -1:
        return False, ANY_NAME
    literal = source[match.end() : end]
    closed = source[end + 1 :].lstrip()[:1] in (")", ",")
    if "f" in match.group(1).lower():
        brace = literal.find("{")
        return False, literal if brace == -1 and closed else literal[: max(brace, 0)]
    if closed:
        return True, literal
    for mark in ("%", "{"):
        if mark in literal:
            return False, literal[: literal.index(mark)]
    return False, literal


_SELF_CALL = re.compile(r"s(?<![\w.]s)elf[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_CLS_CALL = re.compile(r"c(?<![\w.]c)ls[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_SUPER_CALL = re.compile(r"s(?<![\w.]s)uper\([^()\n]*\)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_SELF_ATTR_CALL = re.compile(
    r"s(?<![\w.]s)elf[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\("
)


def blank_comments(text: str) -> str:
    """``text`` with every ``#`` comment (a ``#`` at a line start or after a space) blanked to
    spaces, so offsets and line numbers hold."""
    if "#" not in text:
        return text

    def blank(match: re.Match[str]) -> str:
        start = match.start()
        if start and not text[start - 1].isspace():
            return match.group(0)  # `a#b`: not a comment start
        return " " * (match.end() - start)

    return _COMMENT_RUN.sub(blank, text)


class _Methods:
    """The ``def`` of a class holding an offset of the class's text."""

    def __init__(self, node: ast.ClassDef, body: str) -> None:
        self.functions = list(class_functions(node))
        self.first = first = node.lineno - 1
        self._inert: dict[tuple[int, str], dict[tuple[int, int], int]] = {}
        """Per (method index, receiver): :func:`inert_lookups` of that method."""
        self.at = Locator(
            body, [(f.lineno - first, (f.end_lineno or f.lineno) - first) for f in self.functions]
        )

    def name(self, offset: int) -> str:
        """The method's name, ``""`` outside the class's methods (its body itself, or a nested
        class's)."""
        index = self.at.owner(self.at.line(offset))
        return "" if index is None else self.functions[index].name

    def dispatches(self, offset: int, me: str, prefix: str) -> bool:
        """Whether the computed ``getattr(<me>, <prefix> + ...)`` at ``offset`` may call what it
        finds: not when its value is never called, nor when a name with no literal prefix only fills
        a container; always outside the class's methods."""
        line = self.at.line(offset)
        index = self.at.owner(line)
        if index is None:
            return True
        start = self.at.text.rfind("\n", 0, offset) + 1
        col = len(self.at.text[start:offset].encode())  # the syntax tree counts UTF-8 bytes
        known = self._inert.get((index, me))
        if known is None:
            known = self._inert[index, me] = inert_lookups(self.functions[index], me)
        use = known.get((line + self.first, col))
        return use is None or (use == COLLECTED and prefix != ANY_NAME)


def _escapes_by_method(code: str, hits: FileHits, node: ast.ClassDef) -> set[tuple[str, str]]:
    """``(name, method)`` for each ``self.name``/``cls.name`` not called in the class's text: the
    text of each of its ``def`` statements is scanned on its own, then the rest (``""``: the class
    body itself, nested classes)."""
    found: set[tuple[str, str]] = set()
    spans: list[tuple[int, int, str]] = []  # the lines of each def, and the rest in between
    at = node.lineno
    for func in sorted(class_functions(node), key=lambda f: f.lineno):
        if func.lineno < at:
            continue  # a def inside an earlier one's span: scanned with it
        end = (func.end_lineno or func.lineno) + 1
        spans.extend(((at, func.lineno, ""), (func.lineno, end, func.name)))
        at = end
    spans.append((at, (node.end_lineno or node.lineno) + 1, ""))
    for first, stop, method in spans:  # whole lines each: no match crosses a boundary
        begin, end = hits.start(first), hits.start(stop)
        if begin < end:
            found.update((name, method) for name in _SELF_REF.findall(code, begin, end))
            found.update((name, method) for name in _CLS_REF.findall(code, begin, end))
    return found


def text_facts(
    code: str, hits: FileHits, nodes: Sequence[ast.ClassDef], bodies: Sequence[str]
) -> tuple[list[dict[str, str]], list[set[tuple[str, str]]], list[list[tuple[str, str]]]]:
    """Per class, from its body's text (``bodies``, comments blanked): typed ``self.attr``, escapes
    and dynamic prefixes (each with the method it is written in). A nested class's text is part of
    its outer class's too (more escapes: more reach)."""
    typed: list[dict[str, str]] = []
    escapes: list[set[tuple[str, str]]] = []
    dynamic: list[list[tuple[str, str]]] = []
    for node, body in zip(nodes, bodies, strict=True):
        found: set[tuple[str, str]] = set()
        prefixes: list[tuple[str, str]] = []
        attrs: dict[str, str] = {}
        methods: _Methods | None = None
        if "self" in body or "cls" in body:
            found.update(_escapes_by_method(code, hits, node))
            assigns = _ATTR_ASSIGN.findall(body)
            counts = Counter(attr for attr, _ in assigns)
            for attr, ctor in assigns:
                callee = ctor.rstrip(" \t(")
                if callee and counts[attr] == 1 and callee.rpartition(".")[2][:1].isupper():
                    attrs[attr] = callee
        if "getattr(" in body:
            for match, constant, name in _lookups(body, own=True):
                methods = methods or _Methods(node, body)
                if constant:
                    found.add((name, methods.name(match.start())))
                elif methods.dispatches(match.start(), match.group(1), name):
                    prefixes.append((name, methods.name(match.start())))
        typed.append(attrs)
        escapes.append(found)
        dynamic.append(prefixes)
    return typed, escapes, dynamic


def _lookups(text: str, own: bool) -> Iterator[tuple[re.Match[str], bool, str]]:
    """The ``getattr(`` calls of ``text`` on ``self``/``cls`` (``own``) or on other receivers,
    each with :func:`_name_argument` of the name it looks up."""
    for match in _GETATTR.finditer(text):
        if (match.group(1) in ("self", "cls")) == own:
            yield (match, *_name_argument(text[match.end() : match.end() + 120]))


def global_prefixes(code: str) -> list[str]:
    """Name prefixes of ``getattr(obj, "prefix" + name)`` on receivers other than self/cls."""
    if "getattr(" not in code:
        return []
    found = _lookups(code, own=False)
    return [p for _, constant, p in found if not constant and len(p.strip("_")) >= MIN_PREFIX]


def foreign_calls(
    code: str,
    hits: FileHits,
    bodies: Sequence[str],
    typed: list[dict[str, str]],
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef],
    functions_at: Locator,
) -> set[ForeignCall]:
    """Calls on receivers other than ``self``/``cls``/``super()``, counted by name: every
    ``.name(`` minus the ``self.name(``/``cls.name(``/``super().name(`` ones."""
    counts = Counter(_METHOD_CALL.findall(code))
    counts.subtract(_SELF_CALL.findall(code))
    counts.subtract(_CLS_CALL.findall(code))
    counts.subtract(_SUPER_CALL.findall(code))
    out: set[ForeignCall] = set()
    for body, attrs in zip(bodies, typed, strict=True):
        if not attrs:
            continue
        for attr, method in _SELF_ATTR_CALL.findall(body):
            cls = attrs.get(attr)
            if cls is not None:
                out.add(ForeignCall(method, cls, ()))
                counts[method] -= 1
    guarded = "isinstance(" in code and "raise" in code
    for method, count in counts.items():
        if count <= 0:
            continue
        if not guarded or not method.startswith("_") or method.endswith("__"):
            out.add(ForeignCall(method, None, ()))
            continue
        # A private method called on another object: note what the caller rejects.
        pattern = re.compile(r"\.[ \t]*" + re.escape(method) + r"[ \t]*\(")
        for match in pattern.finditer(code):
            tail = code[max(0, match.start() - 60) : match.start()].rstrip()
            if _SELF_TAIL.search(tail) or _SUPER_TAIL.search(tail):
                continue
            where = functions_at.owner(functions_at.line(match.start()))
            rejected: tuple[str, ...] = ()
            if where is not None:
                func = functions[where]
                body = hits.between(code, func.lineno, func.end_lineno or func.lineno)
                if all(w in body for w in _RAISE_GUARD):
                    rejected = rejected_classes(func)
            out.add(ForeignCall(method, None, rejected))
    return out
