"""Methods as their decorators leave them, for decorators the scanned project defines: a descriptor
class whose ``__get__`` calls the function makes a property, a function returning an inner function
makes that signature the method's, any other class makes the name opaque.
"""

from __future__ import annotations

from harness.overrides.facts.records import (
    DESCRIPTOR_METHOD,
    DESCRIPTOR_NONE,
    DESCRIPTOR_VALUE,
    Wrapper,
)
from harness.overrides.facts.signature import PROPERTY, ParamKind, Signature
from harness.overrides.model.mro import MroIndex
from harness.overrides.model.names import PROPERTY_BUILTINS, NameBinding
from harness.overrides.model.tree import ClassInfo, FunctionInfo


def descriptor_kind(index: MroIndex, cls: ClassInfo) -> int:
    """How instances of ``cls`` behave as class attributes (``DESCRIPTOR_*``)."""
    for member in index.walk(cls):
        if member.facts is not None and member.facts.descriptor != DESCRIPTOR_NONE:
            return member.facts.descriptor
        if "property" in member.summary.bases or "builtins.property" in member.summary.bases:
            return DESCRIPTOR_VALUE  # class cached(property)
    return DESCRIPTOR_NONE


def apply_decorators(names: NameBinding, index: MroIndex, cls: ClassInfo) -> None:
    """Rewrite the methods of ``cls`` whose decorators the project defines."""
    if cls.facts is None or not cls.facts.decorators:
        return
    by_line = dict(cls.facts.decorators)
    methods: dict[str, Signature] = {}
    for name, sig in cls.methods.items():
        decorators = by_line.get(sig.line)
        effective = _decorated(names, index, cls, sig, decorators) if decorators else sig
        if effective is None:
            cls.opaque.add(name)
        else:
            methods[name] = effective
    cls.replace_methods(methods)


def _decorated(
    names: NameBinding,
    index: MroIndex,
    cls: ClassInfo,
    sig: Signature,
    decorators: tuple[str, ...],
) -> Signature | None:
    """The signature the decorators leave, or ``None`` when the name no longer binds a
    function (a non-descriptor object replaces it: its calls are not the ``def``'s)."""
    for written in reversed(decorators):  # the innermost decorator applies first
        called = written.endswith("()")
        target = names.resolve(cls.module, written.removesuffix("()"))
        if isinstance(target, ClassInfo) and not called:
            kind = descriptor_kind(index, target)
            if kind == DESCRIPTOR_VALUE:
                sig = sig._replace(decorators=sig.decorators | {PROPERTY})
            elif kind != DESCRIPTOR_METHOD:
                return None  # an instance of the class replaces the function
        elif isinstance(target, FunctionInfo) and target.wrapper.factory == called:
            sig = _through_wrapper(sig, target.wrapper)
        elif (
            target is None
            and not called
            and names.builtin_name(cls.module, written) in PROPERTY_BUILTINS
        ):
            sig = sig._replace(decorators=sig.decorators | {PROPERTY})
    return sig


def _through_wrapper(sig: Signature, wrapper: Wrapper) -> Signature:
    """What a call of ``sig``'s method accepts once ``wrapper`` replaces it: the wrapper's
    own parameters, or for a pass-through (``*args, **kwargs``) the method's, plus the
    keywords the wrapper consumes (its keyword-only parameters)."""
    if not wrapper.passthrough:
        return sig._replace(params=wrapper.params)
    names = {p.name for p in sig.params}
    consumed = [
        p for p in wrapper.params if p.kind is ParamKind.KEYWORD_ONLY and p.name not in names
    ]
    if not consumed or any(p.kind is ParamKind.VAR_KEYWORD for p in sig.params):
        return sig  # nothing consumed, or the method takes any keyword already
    return sig._replace(params=(*sig.params, *consumed))
