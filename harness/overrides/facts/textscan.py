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
# A literal start (the whole word) keeps these scans fast; the lookbehind then checks the
# character before the word.
_SELF_REF = re.compile(r"self(?<![\w.]self)" + _AFTER_DOT_REF)
_CLS_REF = re.compile(r"cls(?<![\w.]cls)" + _AFTER_DOT_REF)
_ATTR_ASSIGN = re.compile(
    r"self(?<![\w.]self)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*(?::[^=\n]{0,200})?=(?!=)[ \t]*"
    r"([A-Za-z_][\w.]{0,200}[ \t]*\()?"
)
_GETATTR = re.compile(r"getattr\((?<![\w.]getattr\()[ \t]*(self|cls|[A-Za-z_][\w.]*)[ \t]*,[ \t]*")
_STRING_HEAD = re.compile(r"""([rRbBuU]?[fF]?[rR]?)(['"])""")
_RAISE_GUARD = ("isinstance(", "raise")


Function = ast.FunctionDef | ast.AsyncFunctionDef


class Locator:
    """The ``def`` statement holding a line, among ``def`` statements that do not nest (a class's
    own, or a module's and its classes')."""

    def __init__(self, functions: Sequence[Function]) -> None:
        self.functions = sorted(functions, key=lambda f: f.lineno)
        self.firsts = [f.lineno for f in self.functions]

    def owner(self, line: int) -> Function | None:
        """The last function starting at or before ``line``, if it ends at or after it."""
        at = bisect_right(self.firsts, line) - 1
        func = self.functions[at] if at >= 0 else None
        return func if func is not None and line <= (func.end_lineno or func.lineno) else None


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


_SELF_CALL = re.compile(r"self(?<![\w.]self)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_CLS_CALL = re.compile(r"cls(?<![\w.]cls)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_SUPER_CALL = re.compile(r"super\((?<![\w.]super\()[^()\n]*\)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_SELF_ATTR_CALL = re.compile(
    r"self(?<![\w.]self)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\("
)


def blank_comments(text: str) -> str:
    """``text`` with every ``#`` comment (a ``#`` at a line start or after a space, outside the
    strings its line opens before it) blanked to spaces, so offsets and line numbers hold. A
    ``#`` that may be in a string is kept with the rest of its line, so code after a string such
    as ``"issue #"`` is read; each line's quotes are read as if no string were open at its start
    (after a triple-quoted string's last line, its comment is kept too)."""
    if "#" not in text:
        return text

    def blank(match: re.Match[str]) -> str:
        start = match.start()
        line_start = text.rfind("\n", 0, start) + 1
        if start == line_start or (
            text[start - 1].isspace() and _QUOTE.search(text, line_start, start) is None
        ):
            return " " * (match.end() - start)  # the common case: no quote before it
        end = match.end()  # the line's end
        for token in _LINE_TOKEN.finditer(text, line_start, end):  # its strings, and each `#`
            at = token.start()
            if token.group() == "#" and text[at - 1].isspace():
                return text[start:at] + " " * (end - at)
        return match.group(0)  # `a#b`, or a `#` that may be in a string: not a comment start

    return _COMMENT_RUN.sub(blank, text)


_QUOTE = re.compile("['\"]")
_LINE_TOKEN = re.compile(r"'(?:[^'\\\n]|\\.)*'?" + r'|"(?:[^"\\\n]|\\.)*"?|#')
"""A string of one line (its closing quote missing when it runs on), or a ``#``."""


class _Methods(Locator):
    """A class's ``def`` statements, and which computed lookups in them may call what they find."""

    def __init__(self, node: ast.ClassDef) -> None:
        super().__init__(list(class_functions(node)))
        self._inert: dict[tuple[Function, str], dict[tuple[int, int], int]] = {}
        """Per (method, receiver): :func:`inert_lookups` of that method."""

    def name(self, line: int) -> str:
        """The method's name, ``""`` outside the class's methods (its body itself, or a nested
        class's)."""
        func = self.owner(line)
        return "" if func is None else func.name

    def dispatches(self, line: int, col: int, me: str, prefix: str) -> bool:
        """Whether the computed ``getattr(<me>, <prefix> + ...)`` at ``line`` and ``col`` (in UTF-8
        bytes, as the syntax tree counts) may call what it finds: not when its value is never
        called, nor when a name with no literal prefix only fills a container; always outside the
        class's methods."""
        func = self.owner(line)
        if func is None:
            return True
        known = self._inert.get((func, me))
        if known is None:
            known = self._inert[func, me] = inert_lookups(func, me)
        use = known.get((line, col))
        return use is None or (use == COLLECTED and prefix != ANY_NAME)


def _escapes_by_method(code: str, hits: FileHits, node: ast.ClassDef) -> set[tuple[str, str]]:
    """``(name, method)`` for each ``self.name``/``cls.name`` not called in the class's text: the
    text of each of its ``def`` statements (they do not nest) is scanned on its own, then the rest
    (``""``: the class body itself, nested classes)."""
    found: set[tuple[str, str]] = set()
    spans: list[tuple[int, int, str]] = []  # the lines of each def, and the rest in between
    at = node.lineno
    for func in sorted(class_functions(node), key=lambda f: f.lineno):
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
    code: str, hits: FileHits, node: ast.ClassDef, body: str
) -> tuple[dict[str, str], set[tuple[str, str]], list[tuple[str, str]]]:
    """From a class's text (``body``, comments blanked): its typed ``self.attr``, escapes and dynamic
    prefixes (each with the method it is written in). A nested class's text is part of its outer
    class's too (more escapes: more reach)."""
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
        base = hits.start(node.lineno)  # the offset of ``body`` in ``code``
        for match, constant, name in _lookups(body, own=True):
            methods = methods or _Methods(node)
            offset = base + match.start()
            line = hits.line_of(offset)
            if constant:
                found.add((name, methods.name(line)))
                continue
            col = len(code[hits.start(line) : offset].encode())
            if methods.dispatches(line, col, match.group(1), name):
                prefixes.append((name, methods.name(line)))
    return attrs, found, prefixes


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
    tree: ast.Module,
    nodes: Sequence[ast.ClassDef],
    bodies: Sequence[str],
    typed: Sequence[dict[str, str]],
) -> set[ForeignCall]:
    """Calls on receivers other than ``self``/``cls``/``super()``, counted by name: every
    ``.name(`` minus the ``self.name(``/``cls.name(``/``super().name(`` ones (``typed``: the
    typed ``self.attr`` of each class of ``nodes``)."""
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
    located: Locator | None = None  # the functions of the module and of its classes' bodies
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
            if located is None:
                statements = [*(s for node in nodes for s in node.body), *tree.body]
                located = Locator([s for s in statements if isinstance(s, Function)])
            func = located.owner(hits.line_of(match.start()))
            rejected: tuple[str, ...] = ()
            if func is not None:
                body = hits.between(code, func.lineno, func.end_lineno or func.lineno)
                if all(w in body for w in _RAISE_GUARD):
                    rejected = rejected_classes(func)
            out.add(ForeignCall(method, None, rejected))
    return out
