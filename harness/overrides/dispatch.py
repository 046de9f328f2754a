"""Per-file facts that decide whether a call can run for a given subclass, and what a
decorated ``def`` really binds.

Extracted with the summary (they depend only on the file's bytes) and read by
:mod:`harness.overrides.reach` and :mod:`harness.overrides.resolve`:

* **guards** around ``self.m(...)`` calls: ``isinstance(self, C)`` tests and
  ``"p" in inspect.signature(self.m).parameters`` tests, in ``if``/``else`` blocks or as an
  early exit (``if test: return``) before the call, directly or through a local name bound
  once to the test;
* **foreign calls**: ``obj.m(...)`` on a receiver other than ``self``/``cls``/``super()``
  (found by a regular expression, so calls in strings and comments count too: more calls
  only ever mean more reach). ``self.attr.m(...)`` is typed when the class binds
  ``self.attr = C(...)`` exactly once; a function that raises for ``isinstance(x, C)``
  records ``C`` as rejected by its foreign calls of private methods;
* **escapes**: ``self.m`` used without calling it (a callback, ``partial(self.m)``) and
  ``getattr(self, "m")``: the method can run from anywhere;
* **dynamic dispatch**: ``getattr(self, "_visit_" + name)`` (a name prefix) or
  ``getattr(self, name)`` (any method);
* **descriptors**: classes defining ``__get__``, and whether ``__get__`` calls the function
  (a value, like ``property``) or binds it (a method);
* **decorators** of methods that the checker does not know by name, and module-level
  functions that return an inner function (``def deco(fn): def wrap(...): ...; return wrap``).

Extraction is guided by plain-text checks so that files without these shapes cost almost
nothing; nothing here recurses on the syntax tree.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from harness.overrides.signature import (
    MethodKind,
    Param,
    ParamKind,
    canonical_decorator,
    dotted_name,
    from_function,
)

if TYPE_CHECKING:
    from harness.overrides.summary import ClassSummary

DESCRIPTOR_NONE = 0
DESCRIPTOR_VALUE = 1
"""``__get__`` returns what the wrapped function computes: the method reads as a value."""
DESCRIPTOR_METHOD = 2
"""``__get__`` binds the function (``fn.__get__(obj)``, ``MethodType``, ``partial``)."""

GUARD_ISINSTANCE = "isinstance"
GUARD_PARAM = "param"
GUARD_IDENTITY = "identity"
ANY_NAME = ""
"""A dynamic-dispatch prefix that matches every method name."""
_MIN_PREFIX = 3
"""Letters a name prefix of ``getattr(obj, prefix + name)`` on another object needs to count:
``"visit_" + kind`` names a family of methods; ``"_" + name`` could be anything and is
taken as an attribute lookup, not a dispatch."""


class Atom(NamedTuple):
    """One test a guarded call depends on."""

    kind: str
    """:data:`GUARD_ISINSTANCE` (``names`` = the classes), :data:`GUARD_PARAM`
    (``names`` = ``(method, parameter)``) or :data:`GUARD_IDENTITY` (``type(self).m is C.m``:
    ``names`` = ``(m, C)``)."""
    names: tuple[str, ...]
    negated: bool
    """The call runs only when the test is false."""
    line: int
    """Where the test is written."""


class Guard(NamedTuple):
    """The tests that must hold for the call at ``(line, col)`` to run."""

    line: int
    col: int
    atoms: tuple[Atom, ...]


class ForeignCall(NamedTuple):
    """``obj.method(...)`` on a receiver the call-site collector does not type."""

    method: str
    receiver_class: str | None
    """Dotted class of ``self.attr`` when the class binds it once to ``C(...)``."""
    rejected: tuple[str, ...]
    """Classes the enclosing function raises for (``isinstance(x, C)`` then ``raise``)."""


class ClassFacts(NamedTuple):
    """Dispatch facts of one class statement."""

    qualname: str
    escapes: frozenset[str]
    """Names used as ``self.name`` without a call, or as ``getattr(self, "name")``."""
    dynamic: tuple[str, ...]
    """Prefixes of ``getattr(self, <computed name>)``; :data:`ANY_NAME` for any name."""
    attr_types: tuple[tuple[str, str], ...]
    descriptor: int
    decorators: tuple[tuple[int, tuple[str, ...]], ...]
    """``(def line, decorators)`` of methods with decorators the checker does not know,
    outermost first; a call is written ``name()``."""


class Wrapper(NamedTuple):
    """A module-level function that returns an inner function (a decorator)."""

    name: str
    line: int
    params: tuple[Param, ...]
    """The inner function's parameters, as written."""
    factory: bool
    """``@name(...)``: calling it returns the decorator."""
    passthrough: bool
    """The inner function takes ``*args, **kwargs``: calls reach the wrapped function, less
    the keyword-only parameters among ``params`` (written, or popped from ``**kwargs``): the
    wrapper consumes those."""


class DispatchSummary(NamedTuple):
    """Everything above for one file."""

    classes: tuple[ClassFacts, ...]
    wrappers: tuple[Wrapper, ...]
    foreign: tuple[ForeignCall, ...]
    guards: tuple[Guard, ...]
    prefixes: tuple[str, ...]
    """Name prefixes of ``getattr(obj, "prefix" + ...)`` on any receiver."""


EMPTY = DispatchSummary((), (), (), (), ())

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
_GUARD_WORDS = ("isinstance(", "signature(", "type(", "__class__.")
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


class _Locator:
    """Line numbers of offsets, and the innermost class or function holding a line.

    Offsets are turned into lines by counting newlines since the previous offset (scans
    visit matches in order), so no table of line starts is built.
    """

    def __init__(self, text: str, spans: Sequence[tuple[int, int]]) -> None:
        self.text = text
        order = sorted(range(len(spans)), key=lambda i: spans[i][0])
        self.spans = [(spans[i][0], spans[i][1], i) for i in order]
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


# --- guards ---------------------------------------------------------------------------------


def _test_atoms(
    test: ast.expr, truth: bool, self_name: str, bound: dict[str, ast.expr], depth: int = 0
) -> list[Atom]:
    """Atoms that hold when ``test`` evaluates to ``truth``; unknown tests give none."""
    if depth > 8:
        return []
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _test_atoms(test.operand, not truth, self_name, bound, depth + 1)
    if isinstance(test, ast.BoolOp):
        # `a and b` true: both true; `a or b` false: both false. Otherwise unknown.
        if isinstance(test.op, ast.And) == truth:
            return [
                a for v in test.values for a in _test_atoms(v, truth, self_name, bound, depth + 1)
            ]
        return []
    if isinstance(test, ast.Name) and test.id in bound:
        return _test_atoms(bound[test.id], truth, self_name, bound, depth + 1)
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0], ast.Name)
        and test.args[0].id == self_name
    ):
        kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        names = [dotted_name(k) for k in kinds]
        if all(n is not None for n in names):
            return [Atom(GUARD_ISINSTANCE, tuple(n for n in names if n), not truth, test.lineno)]
        return []
    identity = _identity_test(test, self_name)
    if identity is not None:
        name, owner, is_ = identity
        return [Atom(GUARD_IDENTITY, (name, owner), is_ != truth, test.lineno)]
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.In, ast.NotIn))
        and isinstance(test.left, ast.Constant)
        and isinstance(test.left.value, str)
    ):
        method = _signature_of_self_method(test.comparators[0], self_name)
        if method is not None:
            holds = truth if isinstance(test.ops[0], ast.In) else not truth
            return [Atom(GUARD_PARAM, (method, test.left.value), not holds, test.lineno)]
    return []


def _identity_test(test: ast.expr, self_name: str) -> tuple[str, str, bool] | None:
    """``(m, C, True)`` for ``type(self).m is C.m`` (``self.__class__.m`` too; ``False`` for
    ``is not``)."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.left, ast.Attribute)
    ):
        return None
    holder = test.left.value
    own = (
        isinstance(holder, ast.Call)
        and isinstance(holder.func, ast.Name)
        and holder.func.id == "type"
        and len(holder.args) == 1
        and isinstance(holder.args[0], ast.Name)
        and holder.args[0].id == self_name
    ) or (
        isinstance(holder, ast.Attribute)
        and holder.attr == "__class__"
        and isinstance(holder.value, ast.Name)
        and holder.value.id == self_name
    )
    other = dotted_name(test.comparators[0])
    if not own or other is None:
        return None
    owner, _, method = other.rpartition(".")
    if method != test.left.attr or not owner:
        return None
    return method, owner, isinstance(test.ops[0], ast.Is)


def _signature_of_self_method(node: ast.expr, self_name: str) -> str | None:
    """``m`` for ``inspect.signature(self.m).parameters`` (or ``.parameters.keys()``)."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "keys"
    ):
        node = node.func.value
    if not (isinstance(node, ast.Attribute) and node.attr == "parameters"):
        return None
    call = node.value
    if not (isinstance(call, ast.Call) and len(call.args) == 1):
        return None
    func = dotted_name(call.func)
    if func is None or func.rpartition(".")[2] != "signature":
        return None
    target = call.args[0]
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == self_name
    ):
        return target.attr
    return None


def _bound_once(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """Local names assigned exactly once in ``func`` (by a plain ``name = value``)."""
    values: dict[str, ast.expr] = {}
    counts: dict[str, int] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            counts[node.id] = counts.get(node.id, 0) + 1
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                values[target.id] = node.value
    return {k: v for k, v in values.items() if counts.get(k) == 1}


def _tests_a_name(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether some ``if`` in ``func`` tests a bare name (``if flag:``, ``if not flag:``)."""
    stack: list[list[ast.stmt]] = [func.body]
    while stack:
        for stmt in stack.pop():
            if isinstance(stmt, ast.If):
                test = stmt.test
                if isinstance(test, ast.UnaryOp):
                    test = test.operand
                if isinstance(test, (ast.Name, ast.BoolOp)):
                    return True
                stack.extend((stmt.body, stmt.orelse))
            else:
                stack.extend(_blocks(stmt))
    return False


def _ends_in_exit(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], _EXITS)


def _call_guards(
    func: ast.FunctionDef | ast.AsyncFunctionDef, self_name: str, calls: Sequence[tuple[int, int]]
) -> list[Guard]:
    """Guards of the recorded calls (``(line, col)``) inside ``func``."""
    wanted = sorted(calls)
    if not wanted:
        return []
    bound = _bound_once(func) if _tests_a_name(func) else {}
    out: list[Guard] = []
    # (statements, index, atoms in force for them)
    stack: list[tuple[list[ast.stmt], int, tuple[Atom, ...]]] = [(func.body, 0, ())]
    while stack:
        body, index, atoms = stack.pop()
        if index >= len(body):
            continue
        stmt = body[index]
        after = atoms
        yes: tuple[Atom, ...] = ()
        no: tuple[Atom, ...] = ()
        if isinstance(stmt, ast.If):
            yes = tuple(_test_atoms(stmt.test, True, self_name, bound))
            no = tuple(_test_atoms(stmt.test, False, self_name, bound))
            if _ends_in_exit(stmt.body) and not _ends_in_exit(stmt.orelse):
                after = atoms + no
            elif _ends_in_exit(stmt.orelse) and not _ends_in_exit(stmt.body):
                after = atoms + yes
        stack.append((body, index + 1, after))
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        inside = [c for c in wanted if first <= c[0] <= last]
        if not inside:
            continue
        if isinstance(stmt, ast.If):
            test_last = stmt.test.end_lineno or stmt.test.lineno
            for call in inside:
                if call[0] <= test_last:
                    out.append(Guard(call[0], call[1], atoms))
            stack.append((stmt.body, 0, atoms + yes))
            stack.append((stmt.orelse, 0, atoms + no))
            continue
        blocks = _blocks(stmt)
        if not blocks:
            out.extend(Guard(line, col, atoms) for line, col in inside)
            continue
        covered: set[tuple[int, int]] = set()
        for block in blocks:
            if block:
                b_first = block[0].lineno
                b_last = block[-1].end_lineno or block[-1].lineno
                covered.update(c for c in inside if b_first <= c[0] <= b_last)
                stack.append((block, 0, atoms))
        out.extend(Guard(line, col, atoms) for line, col in inside if (line, col) not in covered)
    return [g for g in out if g.atoms]


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [stmt.body]
    if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        node: ast.Try = stmt  # type: ignore[assignment]  # ast.TryStar has the same fields
        return [node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody]
    if isinstance(stmt, ast.Match):
        return [case.body for case in stmt.cases]
    return []


def _rejected(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    """Classes ``func`` raises for: ``if isinstance(x, C): ... raise``, any subject."""
    out: list[str] = []
    for node in ast.walk(func):
        if not (isinstance(node, ast.If) and _ends_in_exit(node.body)):
            continue
        if not isinstance(node.body[-1], ast.Raise):
            continue
        test = node.test
        if (
            isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance"
            and len(test.args) == 2
        ):
            kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
            out.extend(n for n in (dotted_name(k) for k in kinds) if n is not None)
    return tuple(dict.fromkeys(out))


# --- decorators and descriptors --------------------------------------------------------------


def _unknown_decorators(
    func: ast.FunctionDef | ast.AsyncFunctionDef, aliases: dict[str, str]
) -> tuple[str, ...]:
    out: list[str] = []
    for dec in func.decorator_list:
        if canonical_decorator(dec, aliases) is not None:
            continue
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = dotted_name(target)
        if name is None:
            out.append("?")
            continue
        out.append(f"{name}()" if isinstance(dec, ast.Call) else name)
    return tuple(out)


def _descriptor_kind(node: ast.ClassDef) -> int:
    """Whether the class body defines ``__get__`` (also under ``if``), and how it returns:
    binding the function (``fn.__get__(obj)``, ``MethodType(fn, obj)``, ``partial(fn, obj)``)
    reads as a method, anything else as a value."""
    gets = [f for f in _class_functions(node) if f.name == "__get__"]
    if not gets:
        return DESCRIPTOR_NONE
    for get in gets:
        for inner in ast.walk(get):
            if not isinstance(inner, ast.Call):
                continue
            callee = dotted_name(inner.func) if not isinstance(inner.func, ast.Call) else None
            if callee is None:
                continue
            last = callee.rpartition(".")[2]
            if last in ("__get__", "MethodType", "partial"):
                return DESCRIPTOR_METHOD
            if isinstance(inner.func, ast.Attribute) and inner.func.attr == "__get__":
                return DESCRIPTOR_METHOD
    return DESCRIPTOR_VALUE


def _returned_function(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The nested function ``func`` returns: ``return inner``, ``return
    update_wrapper(inner, fn)`` or ``return wraps(fn)(inner)``."""
    inner = {s.name: s for s in func.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if not inner or not func.body or not isinstance(func.body[-1], ast.Return):
        return None
    value = func.body[-1].value
    name: str | None = None
    if isinstance(value, ast.Name):
        name = value.id
    elif isinstance(value, ast.Call):
        callee = dotted_name(value.func) if not isinstance(value.func, ast.Call) else None
        if callee is not None and callee.rpartition(".")[2] == "update_wrapper" and value.args:
            first = value.args[0]
            name = first.id if isinstance(first, ast.Name) else None
        elif isinstance(value.func, ast.Call) and value.args:
            outer = dotted_name(value.func.func)
            first = value.args[0]
            if (
                outer is not None
                and outer.rpartition(".")[2] == "wraps"
                and isinstance(first, ast.Name)
            ):
                name = first.id
    return inner.get(name) if name is not None else None


def _wrapper(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Wrapper | None:
    """``func`` as a decorator that replaces a function by an inner one, if it is one: the
    inner function it returns must use the decorated function (the parameter of the
    function that receives it) without taking a parameter of that name itself."""
    inner = _returned_function(func)
    if inner is None:
        return None
    holder, factory = func, False
    nested = _returned_function(inner)
    if nested is not None:  # def deco(arg): def decorator(fn): def wrap(...)
        holder, inner, factory = inner, nested, True
    wrapped = _first_param(holder)
    if wrapped is None or not _uses(inner, wrapped):
        return None
    params = from_function(inner, {}).params
    kinds = {p.kind for p in params}
    passthrough = ParamKind.VAR_POSITIONAL in kinds and ParamKind.VAR_KEYWORD in kinds
    if passthrough and inner.args.kwarg is not None:
        params = _with_popped(params, _popped(inner, inner.args.kwarg.arg))
    return Wrapper(func.name, func.lineno, params, factory, passthrough)


def _popped(func: ast.FunctionDef | ast.AsyncFunctionDef, kwargs: str) -> dict[str, bool]:
    """Keywords ``func`` takes out of its ``**kwargs`` (``kwargs.pop("k", ...)``), each
    optional: the wrapped function never receives them."""
    out: dict[str, bool] = {}
    for stmt in func.body:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "pop"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == kwargs
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and not node.keywords
            ):
                out[node.args[0].value] = True  # absent, it is a KeyError, not a TypeError
    return out


def _with_popped(params: tuple[Param, ...], popped: dict[str, bool]) -> tuple[Param, ...]:
    """``params`` with the popped keywords as keyword-only parameters before ``**kwargs``."""
    names = {p.name for p in params}
    extra = [Param(n, ParamKind.KEYWORD_ONLY, d) for n, d in popped.items() if n not in names]
    if not extra:
        return params
    last = [p for p in params if p.kind is ParamKind.VAR_KEYWORD]
    return (*(p for p in params if p.kind is not ParamKind.VAR_KEYWORD), *extra, *last)


def _first_param(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    positional = [*func.args.posonlyargs, *func.args.args]
    return positional[0].arg if positional else None


def _uses(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether ``func``'s body calls ``name`` or passes it to a call, ``name`` coming from an
    enclosing scope (``fn(*args)``, ``_switch_db(db, conn, fn, ...)``)."""
    args = func.args
    own = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    own.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    if name in own:
        return False

    def named(node: ast.expr) -> bool:
        if isinstance(node, ast.Starred):
            node = node.value
        return isinstance(node, ast.Name) and node.id == name

    for stmt in func.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and (
                named(node.func)
                or any(named(a) for a in node.args)
                or any(named(k.value) for k in node.keywords)
            ):
                return True
    return False


# --- the text scans ------------------------------------------------------------------------------


def _string_prefix(source: str) -> str | None:
    """The literal text a computed attribute name starts with: ``"_visit_" + x`` ->
    ``_visit_``; ``f"_m_{k}"`` -> ``_m_``; ``name`` -> ``""``; a plain literal -> ``None``."""
    match = _STRING_HEAD.match(source)
    if match is None:
        return ANY_NAME
    prefix_flags, quote = match.group(1).lower(), match.group(2)
    start = match.end()
    end = source.find(quote, start)
    if end == -1:
        return ANY_NAME
    literal = source[start:end]
    rest = source[end + 1 :].lstrip()
    if "f" in prefix_flags:
        brace = literal.find("{")
        return literal if brace == -1 and rest[:1] in (")", ",") else literal[: max(brace, 0)]
    if rest[:1] in (")", ","):
        return None  # a constant name
    for mark in ("%", "{"):
        if mark in literal:
            return literal[: literal.index(mark)]
    return literal


def _constant_name(source: str) -> str | None:
    match = _STRING_HEAD.match(source)
    if match is None or "f" in match.group(1).lower():
        return None
    end = source.find(match.group(2), match.end())
    if end == -1:
        return None
    rest = source[end + 1 :].lstrip()
    return source[match.end() : end] if rest[:1] in (")", ",") else None


_SELF_CALL = re.compile(r"s(?<![\w.]s)elf[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_CLS_CALL = re.compile(r"c(?<![\w.]c)ls[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_SUPER_CALL = re.compile(r"s(?<![\w.]s)uper\([^()\n]*\)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\(")
_SELF_ATTR_CALL = re.compile(
    r"s(?<![\w.]s)elf[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\.[ \t]*([A-Za-z_]\w*)[ \t]*\("
)


def _blank_comments(text: str) -> str:
    """``text`` with every ``#`` comment (a ``#`` at a line start or after a space) replaced by
    spaces: same length and lines, so offsets and line numbers still hold. A ``#`` inside a
    string is blanked too; strings are no code to scan anyway."""
    if "#" not in text:
        return text

    def blank(match: re.Match[str]) -> str:
        start = match.start()
        if start and not text[start - 1].isspace():
            return match.group(0)  # `a#b`: not a comment start
        return " " * (match.end() - start)

    return _COMMENT_RUN.sub(blank, text)


def _text_facts(
    code_lines: list[str], class_nodes: Sequence[tuple[ast.ClassDef, str]]
) -> tuple[list[dict[str, str]], list[set[str]], list[list[str]]]:
    """Per class, from its body's text: typed ``self.attr``, escapes, dynamic prefixes. A
    nested class's text is part of its outer class's too (more escapes: more reach)."""
    typed: list[dict[str, str]] = []
    escapes: list[set[str]] = []
    dynamic: list[list[str]] = []
    for node, _ in class_nodes:
        body = "\n".join(code_lines[node.lineno - 1 : node.end_lineno or node.lineno])
        found: set[str] = set()
        prefixes: list[str] = []
        attrs: dict[str, str] = {}
        if "self" in body or "cls" in body:
            found.update(_SELF_REF.findall(body))
            found.update(_CLS_REF.findall(body))
            assigns = _ATTR_ASSIGN.findall(body)
            counts = Counter(attr for attr, _ in assigns)
            for attr, ctor in assigns:
                callee = ctor.rstrip(" \t(")
                if callee and counts[attr] == 1 and callee.rpartition(".")[2][:1].isupper():
                    attrs[attr] = callee
        if "getattr(" in body:
            for match in _GETATTR.finditer(body):
                if match.group(1) not in ("self", "cls"):
                    continue
                argument = body[match.end() : match.end() + 120]
                constant = _constant_name(argument)
                if constant is not None:
                    found.add(constant)
                else:
                    prefixes.append(_string_prefix(argument) or ANY_NAME)
        typed.append(attrs)
        escapes.append(found)
        dynamic.append(prefixes)
    return typed, escapes, dynamic


def _global_prefixes(code: str) -> list[str]:
    """Name prefixes of ``getattr(obj, "prefix" + name)`` on receivers other than self/cls."""
    out: list[str] = []
    if "getattr(" not in code:
        return out
    for match in _GETATTR.finditer(code):
        if match.group(1) in ("self", "cls"):
            continue
        argument = code[match.end() : match.end() + 120]
        if _constant_name(argument) is None:
            prefix = _string_prefix(argument)
            if prefix and len(prefix.strip("_")) >= _MIN_PREFIX:
                out.append(prefix)
    return out


def _foreign_calls(
    code: str,
    code_lines: list[str],
    class_nodes: Sequence[tuple[ast.ClassDef, str]],
    typed: list[dict[str, str]],
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef],
    functions_at: _Locator,
) -> set[ForeignCall]:
    """Calls on receivers other than ``self``/``cls``/``super()``, counted by name: every
    ``.name(`` minus the ``self.name(``/``cls.name(``/``super().name(`` ones."""
    counts = Counter(_METHOD_CALL.findall(code))
    counts.subtract(_SELF_CALL.findall(code))
    counts.subtract(_CLS_CALL.findall(code))
    counts.subtract(_SUPER_CALL.findall(code))
    out: set[ForeignCall] = set()
    for (node, _), attrs in zip(class_nodes, typed, strict=True):
        if not attrs:
            continue
        body = "\n".join(code_lines[node.lineno - 1 : node.end_lineno or node.lineno])
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
                body = "\n".join(code_lines[func.lineno - 1 : func.end_lineno or func.lineno])
                if all(w in body for w in _RAISE_GUARD):
                    rejected = _rejected(func)
            out.add(ForeignCall(method, None, rejected))
    return out


def extract(
    text: str,
    tree: ast.Module,
    classes: Sequence[tuple[ast.ClassDef, ClassSummary]],
    aliases: dict[str, str],
) -> DispatchSummary:
    """The dispatch facts of one parsed file, given its class statements and summaries."""
    class_nodes = [(node, summary.qualname) for node, summary in classes]
    lines = text.split("\n")
    code = _blank_comments(text)
    code_lines = lines if code is text else code.split("\n")
    functions = [
        stmt
        for stmt in [*(s for node, _ in class_nodes for s in node.body), *tree.body]
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    functions_at = _Locator(code, [(f.lineno, f.end_lineno or f.lineno) for f in functions])
    typed, escapes, dynamic = _text_facts(code_lines, class_nodes)
    prefixes = _global_prefixes(code)
    foreign = _foreign_calls(code, code_lines, class_nodes, typed, functions, functions_at)

    # Guards of recorded self calls, decorators the checker does not know, descriptors.
    guards: list[Guard] = []
    decorated: list[list[tuple[int, tuple[str, ...]]]] = [[] for _ in class_nodes]
    descriptor = [DESCRIPTOR_NONE for _ in class_nodes]
    for i, (node, summary) in enumerate(classes):
        effective = {(m.line, m.name): m for m in summary.methods}
        first, last = node.lineno, node.end_lineno or node.lineno
        class_text = "\n".join(lines[first - 1 : last])
        if "__get__" in class_text:
            descriptor[i] = _descriptor_kind(node)
        has_guards = any(w in class_text for w in _GUARD_WORDS)
        for stmt in _class_functions(node):
            sig = effective.get((stmt.lineno, stmt.name))
            if sig is None:
                continue
            if stmt.decorator_list:
                unknown = _unknown_decorators(stmt, aliases)
                if unknown:
                    decorated[i].append((stmt.lineno, unknown))
            if not has_guards or sig.kind is MethodKind.STATIC:
                continue
            positional = [*stmt.args.posonlyargs, *stmt.args.args]
            f_last = stmt.end_lineno or stmt.lineno
            calls = [
                (c.line, c.col)
                for c in summary.calls
                if c.caller == stmt.name and stmt.lineno <= c.line <= f_last
            ]
            if not positional or not calls:
                continue
            f_text = "\n".join(lines[stmt.lineno - 1 : f_last])
            self_name = positional[0].arg
            if (
                f"isinstance({self_name}" in f_text
                or "signature(" in f_text
                or f"type({self_name})." in f_text
                or f"{self_name}.__class__." in f_text
            ):
                guards.extend(_call_guards(stmt, self_name, calls))
    facts = tuple(
        ClassFacts(
            qualname=qualname,
            escapes=frozenset(escapes[i]),
            dynamic=tuple(dict.fromkeys(dynamic[i])),
            attr_types=tuple(sorted(typed[i].items())),
            descriptor=descriptor[i],
            decorators=tuple(decorated[i]),
        )
        for i, (_, qualname) in enumerate(class_nodes)
    )
    wrappers = tuple(
        w
        for w in (
            _wrapper(stmt)
            for stmt in tree.body
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
        )
        if w is not None
    )
    facts = tuple(
        c for c in facts if c.escapes or c.dynamic or c.attr_types or c.descriptor or c.decorators
    )
    return DispatchSummary(
        classes=facts,
        wrappers=wrappers,
        foreign=tuple(
            sorted(foreign, key=lambda f: (f.method, f.receiver_class or "", f.rejected))
        ),
        guards=tuple(guards),
        prefixes=tuple(sorted(set(prefixes))),
    )


def _class_functions(node: ast.ClassDef) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    stack: list[ast.stmt] = list(reversed(node.body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt
        else:
            for block in reversed(
                _blocks(stmt) if not isinstance(stmt, ast.If) else [stmt.body, stmt.orelse]
            ):
                stack.extend(reversed(block))
