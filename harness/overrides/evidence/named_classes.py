"""``if getattr(config, "x", []):`` is false for a class when the code annotates ``config`` (for
that class) with a class ``C`` none of whose hierarchy (its MRO, every subclass in the tree) can
supply ``x``, and no file writes ``.x``."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from harness.overrides.evidence.attributes import Stores
from harness.overrides.evidence.conditions import necessary
from harness.overrides.facts.blocks import SCOPES, inner_blocks
from harness.overrides.facts.signature import MethodKind, dotted_name, first_param
from harness.overrides.model.classdefs import class_node
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project

_EMPTY = (None, False, 0, "", b"")
_DYNAMIC = frozenset({"__getattr__", "__getattribute__", "__slots__", "__dict__"})
_WRITERS = frozenset({"setattr", "vars", "delattr", "exec", "eval"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _falsy(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in _EMPTY and not isinstance(node.value, float)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return not node.elts
    return isinstance(node, ast.Dict) and not node.keys


def _lookup(node: ast.expr) -> tuple[str, str, bool] | None:
    """``(name, attr, falsy)`` for ``getattr(name, "attr", default)``/``hasattr(name,
    "attr")``; ``falsy``: the value without the attribute is falsy."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords):
        return None
    args = node.args
    if len(args) < 2 or not isinstance(args[0], ast.Name):
        return None
    if not (isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)):
        return None
    if node.func.id == "hasattr" and len(args) == 2:
        return args[0].id, args[1].value, True
    if node.func.id == "getattr" and len(args) == 3:
        return args[0].id, args[1].value, _falsy(args[2])
    return None


def needed(test: ast.expr | None, value: bool) -> list[tuple[str, str]]:
    """``(name, attr)`` pairs: ``test`` can have ``value`` only if ``name`` has ``attr``."""
    return necessary(test, value, _needed)


def _needed(test: ast.expr, value: bool) -> list[tuple[str, str]]:
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        found = _lookup(test.left)
        holds = value == isinstance(test.ops[0], ast.IsNot)  # the value is not None
        if found is not None and holds and isinstance(test.left, ast.Call):
            default = test.left.args[2] if len(test.left.args) == 3 else None
            if isinstance(default, ast.Constant) and default.value is None:
                return [found[:2]]
        return []
    found = _lookup(test)
    return [found[:2]] if found is not None and found[2] and value else []


def _scope(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``node``'s own scope (not those of nested functions and classes)."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        yield child
        if not isinstance(child, (*SCOPES, ast.comprehension)):
            stack.extend(ast.iter_child_nodes(child))


def descend(
    body: list[ast.stmt], line: int
) -> Iterator[tuple[list[ast.stmt], ast.stmt, list[ast.stmt] | None]]:
    """Down the statements holding ``line``: at each level, the statements before the one that
    holds it, that statement, and its block holding the line (``None`` when none does)."""
    while True:
        holder = next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if holder is None:
            return
        inner = next(
            (
                b
                for b in inner_blocks(holder)
                if b and b[0].lineno <= line <= (b[-1].end_lineno or b[-1].lineno)
            ),
            None,
        )
        yield body[: body.index(holder)], holder, inner
        if inner is None:
            return
        body = inner


def enclosing(tree: ast.Module, line: int) -> list[tuple[Function, bool]]:
    """The functions holding ``line``, outermost first, each with whether it is a method (a
    ``def`` directly in a class body)."""
    out: list[tuple[Function, bool]] = []
    in_class = False
    for _, stmt, _ in descend(tree.body, line):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((stmt, in_class))
        in_class = isinstance(stmt, ast.ClassDef)
    return out


def method_at(tree: ast.Module | None, line: int) -> tuple[Function, str] | None:
    """The innermost function holding ``line`` when it is a method taking a receiver (a ``def``
    directly in a class body), and its receiver's name."""
    chain = enclosing(tree, line) if tree is not None else []
    me = first_param(chain[-1][0]) if chain and chain[-1][1] else None
    return None if me is None else (chain[-1][0], me)


def self_call(stmt: ast.stmt | ast.expr, me: str) -> str | None:
    """The ``m`` of a statement (or expression) that is ``<me>.m(...)``, alone, assigned,
    returned or awaited."""
    value: ast.AST | None = stmt
    if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)):
        value = stmt.value
    if isinstance(value, ast.Await):
        value = value.value
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == me
    ):
        return value.func.attr
    return None


def _same_value(func: Function, name: str, first: int, last: int) -> bool:
    """Whether ``name`` holds one value from line ``first`` to ``last`` in ``func``."""
    first, last = min(first, last), max(first, last)
    stores: list[int] = []
    for node in _scope(func):
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return False
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            stores.append(node.lineno)
    loops = [(n.lineno, n.end_lineno or n.lineno) for n in _scope(func) if isinstance(n, _LOOPS)]
    return not any(first <= s <= last for s in stores) and not any(
        (start <= first <= end or start <= last <= end) and any(start <= s <= end for s in stores)
        for start, end in loops
    )


def _stores_before(func: Function, name: str, attr: str, line: int) -> bool:
    """Whether ``func`` stores ``name.attr`` before ``line``."""
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == name
        and not isinstance(node.ctx, ast.Load)
        and node.lineno < line
        for node in _scope(func)
    )


def _params(func: Function) -> list[ast.arg]:
    return [*func.args.posonlyargs, *func.args.args]


class NamedClasses:
    """Decides attribute conditions on objects of a named class (see the module docstring)."""

    def __init__(self, project: Project, tree_of: Callable[[str], ast.Module | None]) -> None:
        self.project = project
        self.tree_of = tree_of
        self._stores = Stores(project, tree_of)
        self._lacks: dict[tuple[int, str], bool] = {}
        self._may_have: dict[tuple[int, str], bool] = {}

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        """Why ``test`` cannot be ``value`` for an ``x``: it needs ``name.attr``, and the class
        the code names for ``name`` (in the function holding ``line``) cannot supply ``attr``."""
        for name, attr in needed(test, value):
            func, me = self._scope_at(module, line)
            for cls, said in self._classes(x, module, func, me, name, line):
                if self._no_attr(cls, attr) and not self._stores.stored(attr):
                    return (
                        f"for {x.qualname}, {name} is an instance of {cls.qualname} ({said}), "
                        f"and no class of its hierarchy defines {attr}"
                    )
        return None

    def unstated(
        self, x: ClassInfo, module: ModuleInfo, line: int, name: str, attr: str
    ) -> str | None:
        """Why the code does not say that ``name`` (in the function holding ``line``) has ``attr``
        when it runs for an ``x``: no class is named for it, or the named one and its subclasses
        lack it. ``None`` for ``self``/``cls``, when the function stores ``name.attr`` first, or
        when a class it may be supplies ``attr``."""
        func, me = self._scope_at(module, line)
        if name == me or (func is not None and _stores_before(func, name, attr, line)):
            return None
        named = self._classes(x, module, func, me, name, line)
        in_mro = self.project.in_mro
        # The object is an instance of every class named for it: of the narrowest ones.
        narrowest = [
            cls
            for cls, _ in named
            if not any(other is not cls and in_mro(cls, other) for other, _ in named)
        ]
        if narrowest and all(self._provides(cls, attr) for cls in narrowest):
            return None
        if named:
            shown = (narrowest or [named[0][0]])[0].qualname
            return f"the class the code names for {name}, {shown}, lacks it"
        return f"the code does not name the class of {name} for {x.qualname}"

    def _scope_at(self, module: ModuleInfo, line: int) -> tuple[Function | None, str | None]:
        """The innermost function holding ``line`` of ``module``, and the ``self``/``cls``
        name of the innermost method holding it (each ``None`` when there is none)."""
        tree = self.tree_of(module.file.path)
        chain = enclosing(tree, line) if tree is not None else []
        methods = [f for f, is_method in chain if is_method]
        return (chain[-1][0] if chain else None), (first_param(methods[-1]) if methods else None)

    def _classes(
        self,
        x: ClassInfo,
        module: ModuleInfo,
        func: Function | None,
        me: str | None,
        name: str,
        line: int,
    ) -> list[tuple[ClassInfo, str]]:
        """The classes the code says ``name`` is an instance of at ``line`` of ``func`` (a
        method's receiver ``me``) when it runs for an ``x``, each with where it says so."""
        if func is None or me is None:
            return []
        params = (*_params(func), *func.args.kwonlyargs)
        if not any(a.arg == name for a in params) and not any(
            isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
            for n in _scope(func)
        ):
            return []
        found = [
            (cls, f"{func.name}() annotates it")
            for arg in params
            if arg.arg == name
            and _same_value(func, name, func.lineno, line)
            and (cls := self._annotated(module, arg)) is not None
        ]
        for node in _scope(func):
            if not isinstance(node, ast.Call) or (method := self_call(node, me)) is None:
                continue
            at = self._argument(node, name)
            if at is None or not _same_value(func, name, node.lineno, line):
                continue
            definer = self.project.definer(x, method)
            if definer is None or method not in definer.methods:
                continue
            target = self._parameter(definer, method, at)
            cls = None if target is None else self._annotated(definer.module, target)
            if cls is not None:
                found.append((cls, f"{definer.qualname}.{method}() annotates it"))
        return found

    @staticmethod
    def _argument(call: ast.Call, name: str) -> int | str | None:
        """Where ``call`` passes the name: its position, or its keyword."""
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            if isinstance(arg, ast.Name) and arg.id == name:
                return i
        for keyword in call.keywords:
            value = keyword.value
            if keyword.arg is not None and isinstance(value, ast.Name) and value.id == name:
                return keyword.arg
        return None

    def _parameter(self, definer: ClassInfo, method: str, at: int | str) -> ast.arg | None:
        sig = definer.methods[method]
        node = class_node(definer, self.tree_of)
        if node is None:
            return None
        func = next(
            (
                s
                for s in node.body
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                and s.name == method
                and (s.lineno == sig.line or any(d.lineno == sig.line for d in s.decorator_list))
            ),
            None,
        )
        if func is None:
            return None
        if isinstance(at, str):
            return next((a for a in (*func.args.args, *func.args.kwonlyargs) if a.arg == at), None)
        positional = _params(func)[0 if sig.kind is MethodKind.STATIC else 1 :]
        return positional[at] if at < len(positional) else None

    def _annotated(self, module: ModuleInfo, arg: ast.arg) -> ClassInfo | None:
        """The class ``arg``'s annotation names in ``module`` (a string one parsed)."""
        node = arg.annotation
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                node = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                return None
        name = None if node is None else dotted_name(node)
        return None if name is None else self.project.resolve_class(module, name)

    def _provides(self, cls: ClassInfo, attr: str) -> bool:
        """Whether an object annotated with ``cls`` may have ``attr``: a read class of its MRO may
        supply it, or a subclass of ``cls`` in the tree binds it."""
        key = (id(cls), attr)
        if key not in self._may_have:
            project = self.project
            above = {id(c) for c in project.mro(cls)}
            below = {
                id(c): c
                for member in project.descendants(cls)
                for c in project.mro(member)
                if id(c) not in above
            }
            self._may_have[key] = any(not self._plain(c, attr) for c in project.mro(cls)) or any(
                (node := class_node(c, self.tree_of)) is not None and _binds(node, (attr,))
                for c in below.values()
            )
        return self._may_have[key]

    def _no_attr(self, cls: ClassInfo, attr: str) -> bool:
        """Whether no class of ``cls``'s hierarchy can supply ``attr``."""
        key = (id(cls), attr)
        if key not in self._lacks:
            project = self.project
            members = (cls, *project.descendants(cls))
            family = {id(c): c for member in members for c in project.mro(member)}
            self._lacks[key] = all(project.fully_resolved(m) for m in members) and all(
                self._plain(c, attr) for c in family.values()
            )
        return self._lacks[key]

    def _plain(self, cls: ClassInfo, attr: str) -> bool:
        """Whether ``cls``'s body provably does not supply ``attr``."""
        node = class_node(cls, self.tree_of)
        if node is None or node.keywords:
            return False
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if (dotted_name(target) or "").rpartition(".")[2] != "dataclass":
                return False
        return not _binds(node, (attr, *_DYNAMIC)) and not any(
            (isinstance(child, ast.Name) and child.id in _WRITERS)
            or (isinstance(child, ast.Attribute) and child.attr in _DYNAMIC)
            or (
                isinstance(child, (ast.Import, ast.ImportFrom))
                and any((a.asname or a.name) == attr for a in child.names)
            )
            for child in ast.walk(node)
        )


def _binds(node: ast.ClassDef, names: tuple[str, ...]) -> bool:
    """Whether a class body binds one of ``names``: a field, class attribute, method, property
    or nested class, or a ``self.<name>`` store in one of its methods."""
    for child in ast.walk(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if child is not node and child.name in names:
                return True
        elif isinstance(child, (ast.Name, ast.Attribute)):
            bound = child.id if isinstance(child, ast.Name) else child.attr
            if bound in names and not isinstance(child.ctx, ast.Load):
                return True
    return False
