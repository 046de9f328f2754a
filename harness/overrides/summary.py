"""Per-file summaries: the classes, methods, imports and call sites the checker needs. A summary
depends only on the file's bytes and is a tuple of builtins; extraction never recurses on the syntax
tree.
"""

from __future__ import annotations

import ast
import gc
import re
import tokenize
from collections.abc import Callable, Iterator, Mapping
from io import StringIO
from typing import Generic, NamedTuple, TypeVar

from harness.overrides.facts import callsites, grammar
from harness.overrides.facts import dispatch as dispatch_facts
from harness.overrides.facts.blocks import holds, scope_blocks
from harness.overrides.facts.callsites import CallSite, FileHits
from harness.overrides.facts.records import DispatchSummary
from harness.overrides.facts.returned import returned_callables
from harness.overrides.facts.signature import (
    MethodKind,
    Signature,
    dotted_name,
    first_param,
    from_function,
)
from harness.overrides.suppress import IGNORE_COMMENT


class Import(NamedTuple):
    """One name bound by an import: ``import a.b as x`` or ``from .m import C as D``."""

    name: str
    """The local name bound."""
    module: str
    """Module as written, without leading dots (``""`` for ``from . import x``)."""
    level: int
    """Number of leading dots of a relative import."""
    attr: str | None
    """``C`` for ``from m import C``; ``None`` for ``import m``."""
    line: int


T = TypeVar("T")


class Deferred(Generic[T]):
    """A value kept encoded until first needed: ``load(blob)`` makes it."""

    __slots__ = ("blob", "load")

    def __init__(self, blob: bytes, load: Callable[[bytes], T]) -> None:
        self.blob = blob
        self.load = load


class _Compared:
    """Equality and ``repr`` over the fields ``_compared`` names (mutable caches inside: not hashed)."""

    __slots__ = ()
    _compared: tuple[str, ...] = ()

    def _key(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._compared)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self._key()!r}"


class ClassSummary(_Compared):
    """A class statement: where it is, its bases, its methods and the calls inside them (kept
    encoded, :class:`Deferred`, until first asked for)."""

    __slots__ = (
        "_calls",
        "_methods",
        "attributes",
        "bases",
        "col",
        "instance_attributes",
        "line",
        "method_names",
        "qualname",
    )
    _compared: tuple[str, ...] = ("qualname", "line", "col", "bases", "methods", "attributes")
    _compared += ("instance_attributes", "calls")

    def __init__(
        self,
        qualname: str,
        line: int,
        col: int,
        bases: tuple[str | None, ...],
        methods: tuple[Signature, ...] | Deferred[tuple[Signature, ...]],
        attributes: frozenset[str],
        instance_attributes: frozenset[str],
        calls: tuple[CallSite, ...] | Deferred[tuple[CallSite, ...]],
        method_names: tuple[str, ...] | None = None,
    ) -> None:
        self.qualname = qualname
        """Name inside the module, dotted for nested classes (``Outer.Inner``)."""
        self.line = line
        self.col = col
        self.bases = bases
        """Dotted base expressions with subscripts stripped; ``None`` when not a name."""
        self.attributes = attributes
        """Names bound in the class body by anything other than ``def``."""
        self.instance_attributes = instance_attributes
        """Names assigned as ``self.name = ...`` anywhere in the class (they shadow methods)."""
        self._methods = methods
        self._calls = calls
        if method_names is None:
            assert not isinstance(methods, Deferred)
            method_names = tuple(m.name for m in methods)
        self.method_names = method_names
        """The names of :attr:`methods`, in order (known without decoding them)."""

    @property
    def methods(self) -> tuple[Signature, ...]:
        """The effective ``def`` per name (overload stubs dropped when implemented)."""
        if isinstance(self._methods, Deferred):
            self._methods = self._methods.load(self._methods.blob)
        return self._methods

    @property
    def calls(self) -> tuple[CallSite, ...]:
        """Method calls inside the class's methods."""
        if isinstance(self._calls, Deferred):
            self._calls = self._calls.load(self._calls.blob)
        return self._calls


class ParseFailure(NamedTuple):
    """Why a file's source could not be read as Python (undecodable, NUL byte, syntax)."""

    line: int
    col: int
    reason: str


class AttributeNames(NamedTuple):
    """The attribute names a file's text writes after a dot or passes to ``setattr``/``delattr`` (a
    superset: strings and comments count)."""

    dotted: frozenset[str]
    """Every ``name`` written as ``.name`` (``.`` then spaces or tabs allowed)."""
    by_name: frozenset[str]
    """Quoted identifiers within a ``setattr(``/``delattr(`` call's first 300 characters."""


NO_NAMES = AttributeNames(frozenset(), frozenset())
_DOTTED = re.compile(r"\.[ \t]*([^\W\d]\w*)")
_ATTR_CALL = re.compile(r"attr\s*\(")
"""``attr(``: a literal start is fast; the ``set``/``del`` before it is checked by hand."""
_QUOTED = re.compile(r"[\"']([^\W\d]\w*)[\"']")


def attribute_names(text: str) -> AttributeNames:
    """The :class:`AttributeNames` of ``text``."""
    by_name: set[str] = set()
    if "attr" in text:
        for match in _ATTR_CALL.finditer(text):
            start = match.start()
            before = text[start - 4 : start] if start >= 4 else f" {text[:start]}"
            if before[1:] in ("set", "del") and not (before[0].isalnum() or before[0] == "_"):
                by_name.update(_QUOTED.findall(text, match.end(), match.end() + 300))
    return AttributeNames(frozenset(_DOTTED.findall(text)), frozenset(by_name))


class FileSummary(_Compared):
    """Everything the checker knows about one file (module-level calls may stay encoded)."""

    __slots__ = (
        "_calls",
        "_names",
        "aliases",
        "called",
        "classes",
        "dispatch",
        "ignores",
        "imports",
        "parse_failures",
        "star_imports",
    )
    _compared: tuple[str, ...] = ("classes", "imports", "star_imports", "aliases", "ignores")
    _compared += ("calls", "parse_failures", "called", "dispatch")

    def __init__(
        self,
        classes: tuple[ClassSummary, ...],
        imports: tuple[Import, ...],
        star_imports: tuple[tuple[str, int], ...],
        aliases: tuple[tuple[str, str, int], ...],
        ignores: tuple[tuple[int, tuple[str, ...]], ...],
        calls: tuple[CallSite, ...] | Deferred[tuple[CallSite, ...]],
        parse_failures: tuple[ParseFailure, ...],
        called: frozenset[str] | None = None,
        dispatch: DispatchSummary = dispatch_facts.EMPTY,
        names: AttributeNames | Deferred[AttributeNames] = NO_NAMES,
    ) -> None:
        self.classes = classes
        self.imports = imports
        self.star_imports = star_imports
        """``(module, level)`` of each ``from m import *``."""
        self.aliases = aliases
        """``(name, dotted target, line)`` of module-level ``Name = dotted.name`` assignments
        (class aliases; ``a = b = C`` binds both names)."""
        self.ignores = ignores
        """``(line, codes)`` of each ``# harness: ignore[...]`` comment; empty codes = bare."""
        self.parse_failures = parse_failures
        self._calls = calls
        if called is None:
            assert not isinstance(calls, Deferred)
            called = frozenset(
                [*(c.method for c in calls), *(c.method for k in classes for c in k.calls)]
            )
        self.called = called
        """Every method name called in the file (to find proofs without decoding calls)."""
        self.dispatch = dispatch
        """Guards, foreign calls, escapes, decorators: see :mod:`harness.overrides.facts.dispatch`."""
        self._names = names

    @property
    def calls(self) -> tuple[CallSite, ...]:
        """Call sites in module-level functions."""
        if isinstance(self._calls, Deferred):
            self._calls = self._calls.load(self._calls.blob)
        return self._calls

    @property
    def names(self) -> AttributeNames:
        """Where attributes may be read or changed: see :class:`AttributeNames`."""
        if isinstance(self._names, Deferred):
            self._names = self._names.load(self._names.blob)
        return self._names


_PARSE_FAILURES = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


def _empty(failure: ParseFailure | None = None, names: AttributeNames = NO_NAMES) -> FileSummary:
    return FileSummary((), (), (), (), (), (), (failure,) if failure else (), names=names)


def decode(data: bytes) -> str | ParseFailure:
    """Source text of ``data`` (PEP 263 encoding), or why it has none."""
    if b"\x00" in data:
        return ParseFailure(*_position(data, data.index(b"\x00")), "file contains a NUL byte")
    try:
        head = iter(data[: data.find(b"\n", data.find(b"\n") + 1) + 1 or None].splitlines(True))
        encoding, _ = tokenize.detect_encoding(lambda: next(head, b""))
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        return ParseFailure(*_position(data, exc.start), f"cannot decode file: {exc}")
    except (SyntaxError, LookupError) as exc:  # a bad or unknown coding cookie
        return ParseFailure(1, 1, f"cannot decode file: {exc}")
    if "\r" in text:  # universal newlines, as Python's own tokenizer reads source
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text[1:] if text.startswith("\ufeff") else text


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of ``offset`` in ``data``."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def _ignores(text: str) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """``# harness: ignore[...]`` comments; tokenized so that strings do not count."""
    if "harness:" not in text or IGNORE_COMMENT.search(text) is None:
        return ()
    found: list[tuple[int, tuple[str, ...]]] = []
    try:
        for tok in tokenize.generate_tokens(StringIO(text).readline):
            match = IGNORE_COMMENT.search(tok.string) if tok.type == tokenize.COMMENT else None
            if match is not None:
                codes = tuple(c.strip() for c in (match.group(1) or "").split(",") if c.strip())
                found.append((tok.start[0], codes))
    except (tokenize.TokenError, SyntaxError):
        return ()
    return tuple(found)


def _imports_of(stmt: ast.Import | ast.ImportFrom) -> Iterator[Import]:
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:  # `import a.b` binds `a`; `import a.b as x` binds `x` to `a.b`
            head = alias.name.partition(".")[0]
            module = alias.name if alias.asname else head
            yield Import(alias.asname or head, module, 0, None, stmt.lineno)
        return
    for alias in stmt.names:
        if alias.name != "*":
            yield Import(
                alias.asname or alias.name, stmt.module or "", stmt.level, alias.name, stmt.lineno
            )


_TRY = (ast.Try, getattr(ast, "TryStar", ast.Try))  # TryStar: 3.11+
_COMPOUND = (ast.If, ast.Match, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, *_TRY)
"""The statements whose blocks run in the enclosing scope."""


def _flatten(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements of ``body`` and of its if/try/with/loop/match blocks, in source order."""
    if not any(isinstance(stmt, _COMPOUND) for stmt in body):
        return body
    out: list[ast.stmt] = []
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        out.append(stmt)
        if isinstance(stmt, _COMPOUND):
            for block in reversed(scope_blocks(stmt)):
                stack.extend(reversed(block))
    return out


def _type_checking_only(body: list[ast.stmt]) -> set[int]:
    """Ids of the class statements in ``if TYPE_CHECKING:`` blocks (and their nested
    blocks): type checkers read them, Python never defines them."""
    return {
        id(s)
        for stmt in _flatten(body)
        if isinstance(stmt, ast.If)
        and (dotted_name(stmt.test) or "").rpartition(".")[2] == "TYPE_CHECKING"
        for s in _flatten(stmt.body)
        if isinstance(s, ast.ClassDef)
    }


def _yields(func: ast.AsyncFunctionDef | ast.FunctionDef, hits: FileHits) -> bool:
    """Whether the function's own body yields (textual check, then an AST check)."""
    text = hits.between(hits.text, func.body[0].lineno, func.end_lineno or func.lineno)
    return "yield" in text and holds(func, (ast.Yield, ast.YieldFrom))


def _self_name(func: ast.FunctionDef | ast.AsyncFunctionDef, sig: Signature) -> str | None:
    return None if sig.kind is MethodKind.STATIC else first_param(func)


def _class(
    node: ast.ClassDef,
    qualname: str,
    aliases: dict[str, str],
    hits: FileHits,
    nested: list[tuple[ast.ClassDef, str]],
    functions: Mapping[str, ast.FunctionDef],
) -> ClassSummary:
    methods: dict[str, Signature] = {}
    attributes: set[str] = set()
    calls: list[CallSite] = []
    decorated: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, Signature]] = []
    for stmt in _flatten(node.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sig = from_function(stmt, aliases)
            if sig.is_async and _yields(stmt, hits):
                sig = sig._replace(async_generator=True)
            previous = methods.get(stmt.name)
            keep_previous = previous is not None and (
                (sig.is_overload and not previous.is_overload)
                or (previous.is_property and sig.is_property)
            )
            if not keep_previous:
                methods[stmt.name] = sig
                if stmt.decorator_list:
                    decorated.append((stmt, sig))
            attributes.discard(stmt.name)
            calls.extend(
                callsites.collect(
                    stmt,
                    hits,
                    caller=stmt.name,
                    self_name=_self_name(stmt, sig),
                    on_class=sig.kind is MethodKind.CLASS,
                )
            )
        elif isinstance(stmt, ast.ClassDef):
            nested.append((stmt, f"{qualname}.{stmt.name}"))
            attributes.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            attributes.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        elif (
            isinstance(stmt, ast.AnnAssign)
            and stmt.value is not None
            and isinstance(stmt.target, ast.Name)
        ):
            attributes.add(stmt.target.id)
    for name in attributes:
        methods.pop(name, None)
    for func, sig in decorated:
        if methods.get(func.name) is sig:
            returns = returned_callables(func, _self_name(func, sig), methods, functions)
            if returns:
                methods[func.name] = sig._replace(returns=returns)
    bases = tuple(dotted_name(b.value if isinstance(b, ast.Subscript) else b) for b in node.bases)
    return ClassSummary(
        qualname=qualname,
        line=node.lineno,
        col=node.col_offset + 1,
        bases=bases,
        methods=tuple(methods.values()),
        attributes=frozenset(attributes),
        instance_attributes=hits.self_assigned(node.lineno, node.end_lineno or node.lineno),
        calls=tuple(calls),
    )


def summarize(data: bytes) -> FileSummary:
    """Summarise one file's bytes. Never raises for bad input: records a parse failure."""
    text = decode(data)
    if isinstance(text, ParseFailure):
        return _empty(text, attribute_names(data.decode("utf-8", "replace")))
    enabled = gc.isenabled()
    gc.disable()  # ast.parse allocates many objects; collection only costs time here
    try:
        return _summarize_text(text)
    except _PARSE_FAILURES as exc:
        newer = grammar.newer_syntax(text) if isinstance(exc, SyntaxError) else None
        if newer is not None:
            failure = ParseFailure(newer.line, 1, newer.describe())
        elif isinstance(exc, SyntaxError):
            failure = ParseFailure(exc.lineno or 1, exc.offset or 1, f"syntax error: {exc.msg}")
        elif isinstance(exc, (RecursionError, MemoryError)):
            failure = ParseFailure(1, 1, "file is nested too deeply to parse")
        else:
            failure = ParseFailure(1, 1, f"cannot parse file: {exc}")
        return _empty(failure, attribute_names(text))
    finally:
        if enabled:
            gc.enable()


def _summarize_text(text: str) -> FileSummary:
    tree = ast.parse(text)
    imports: list[Import] = []
    stars: list[tuple[str, int]] = []
    aliases_out: list[tuple[str, str, int]] = []
    top = _flatten(tree.body)
    for stmt in top:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imports.extend(_imports_of(stmt))
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                stars.append((stmt.module or "", stmt.level))
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            target = dotted_name(stmt.value)
            if target is not None:
                aliases_out.extend(
                    (t.id, target, stmt.lineno) for t in stmt.targets if isinstance(t, ast.Name)
                )
    aliases = {  # local name -> absolute dotted target, for recognising decorators
        imp.name: f"{imp.module}.{imp.attr}" if imp.attr else imp.module
        for imp in imports
        if not imp.level
    }
    external = frozenset(
        name for name, target in aliases.items() if target.partition(".")[0] in callsites.EXTERNAL
    )
    hits = FileHits(text, external)
    calls: list[CallSite] = []
    pending: list[tuple[ast.ClassDef, str]] = []
    static: set[int] = _type_checking_only(tree.body) if "TYPE_CHECKING" in text else set()
    functions = {stmt.name: stmt for stmt in top if isinstance(stmt, ast.FunctionDef)}
    for stmt in top:
        if isinstance(stmt, ast.ClassDef):
            if id(stmt) not in static:
                pending.append((stmt, stmt.name))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            calls.extend(callsites.collect(stmt, hits, caller="", self_name=None))
    statements: list[tuple[ast.ClassDef, ClassSummary]] = []
    while pending:
        nested: list[tuple[ast.ClassDef, str]] = []
        for node, qualname in pending:
            statements.append((node, _class(node, qualname, aliases, hits, nested, functions)))
        pending = nested
    statements.sort(key=lambda pair: pair[1].line)
    return FileSummary(
        classes=tuple(summary for _, summary in statements),
        imports=tuple(imports),
        star_imports=tuple(stars),
        aliases=tuple(aliases_out),
        ignores=_ignores(text),
        calls=tuple(calls),
        parse_failures=(),
        dispatch=dispatch_facts.extract(tree, statements, aliases, hits),
        names=attribute_names(text),
    )
