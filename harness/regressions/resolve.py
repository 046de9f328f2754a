"""``--regression NAME|MODULE:ATTR``: a catalog id, or code the user wrote outside this project.

``MODULE`` is a dotted module name (importable from the working directory too) or a path to a
``.py`` file (its directory becomes importable); ``ATTR`` a dotted attribute in it: an
:class:`AttentionBackend` subclass, a :class:`~harness.regressions.entry.Variant` or a
:class:`~harness.regressions.entry.Regression`. The one resolver of every ``--regression``. Everything that can go wrong (no such module, an
import that raises, no such attribute, the wrong kind of object, a backend whose classes cannot be
named) is a :class:`~harness.errors.HarnessError` naming the spec, never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import cast

from harness.child import mark
from harness.errors import HarnessError
from harness.reference.backends.abstract import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
)
from harness.regressions.entry import Regression, Variant
from harness.regressions.registry import get_regression


def is_import_spec(spec: str) -> bool:
    """``MODULE:ATTR`` rather than a catalog id."""
    return ":" in spec


def load_object(spec: str) -> object:
    """The object ``MODULE:ATTR`` names (see the module docstring)."""
    module_part, _, attr = spec.rpartition(":")
    if not module_part or not attr:
        raise HarnessError(f"--regression {spec!r}: expected NAME or MODULE:ATTR")
    module = _import(module_part, spec)
    mark("")  # imported: no step of ours runs now
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise HarnessError(
                f"--regression {spec!r}: {module_part} has no attribute {attr!r}"
            ) from None
    return obj


def _import(module_part: str, spec: str) -> object:
    mark(f"the import of {module_part}")  # in a child (harness.child): named if it dies here
    path = Path(module_part)
    try:
        if module_part.endswith(".py") or os.sep in module_part:
            if path.is_dir():
                raise HarnessError(
                    f"--regression {spec!r}: {module_part} is a directory, not a .py file"
                )
            if not path.is_file():
                raise HarnessError(f"--regression {spec!r}: no such file {module_part}")
            # As ``python FILE`` does: the file's directory is importable, for the whole run
            # (the variant may import its helpers lazily, while it runs).
            _importable(str(path.resolve().parent))
            name = f"_harness_user_{path.stem}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise HarnessError(f"--regression {spec!r}: cannot load {module_part}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module  # dataclasses and pickling look modules up by name
            module_spec.loader.exec_module(module)
            return module
        # The console script's sys.path lacks the working directory (``python -m`` has it); it
        # stays for the whole run, as under ``python -m``.
        cwd = os.getcwd()
        _importable(cwd)
        module = importlib.import_module(module_part)
        _refuse_shadowed(module_part, cwd, spec)
        return module
    except HarnessError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name is not None and f"{module_part}.".startswith(f"{exc.name}."):
            raise HarnessError(
                f"--regression {spec!r}: cannot import {module_part}: no module named "
                f"{exc.name!r} (run from the directory that holds it, or install it)"
            ) from None
        # The module was found; something it imports was not.
        raise HarnessError(
            f"--regression {spec!r}: importing {module_part} failed: {type(exc).__name__}: {exc}"
        ) from exc
    except (Exception, SystemExit) as exc:  # the user's module raised (or exited) while importing
        from harness.errors import describe_error

        raise HarnessError(
            f"--regression {spec!r}: importing {module_part} failed: {describe_error(exc)}"
        ) from exc


def _importable(directory: str) -> None:
    """Put ``directory`` first on ``sys.path`` unless it is there already."""
    if directory not in sys.path:
        sys.path.insert(0, directory)


def _refuse_shadowed(module_part: str, cwd: str, spec: str) -> None:
    """A module the user has in ``cwd`` that another one, imported already (the standard
    library's ``json``, say), hides: name both, rather than look the attribute up in the wrong
    one."""
    top = module_part.split(".", 1)[0]
    local = next(
        (
            candidate
            for candidate in (Path(cwd, f"{top}.py"), Path(cwd, top, "__init__.py"))
            if candidate.is_file()
        ),
        None,
    )
    imported = getattr(sys.modules.get(top), "__file__", None)
    if local is None or (imported is not None and Path(imported).resolve() == local.resolve()):
        return
    where = "built into Python" if imported is None else f"from {imported}"
    raise HarnessError(
        f"--regression {spec!r}: {local.relative_to(cwd).as_posix()} here is shadowed by the "
        f"module {top!r} {where}, imported first; rename your file, or name it by path "
        f"(--regression ./{local.relative_to(cwd).as_posix()}:ATTR)"
    )


def check_backend(cls: type[AttentionBackend], origin: str) -> type[AttentionBackend]:
    """``cls`` if it is a concrete backend that names a builder, an impl and a metadata class."""
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise HarnessError(f"{origin}: {cls.__qualname__} is abstract (define {missing})")
    try:
        # Typed as objects: a user's class may return anything, whatever it declares.
        named = cast(
            "tuple[object, ...]",
            (cls.get_builder_cls(), cls.get_impl_cls(), cls.get_metadata_cls()),
        )
    except Exception as exc:
        raise HarnessError(
            f"{origin}: {cls.__qualname__} cannot name its classes: {type(exc).__name__}: {exc}"
        ) from exc
    wrong = [
        f"{what}() returned {got!r}"
        for what, got, base in zip(
            ("get_builder_cls", "get_impl_cls", "get_metadata_cls"),
            named,
            (AttentionMetadataBuilder, AttentionImpl, object),
            strict=True,
        )
        if not (isinstance(got, type) and issubclass(got, base))
    ]
    if wrong:
        raise HarnessError(f"{origin}: {cls.__qualname__}: {'; '.join(wrong)}")
    return cls


def resolve_target(spec: str) -> Regression | Variant:
    """A catalog entry (by id or ``MODULE:ATTR``), or a user's backend class as a variant."""
    if not is_import_spec(spec):
        return get_regression(spec)
    obj = load_object(spec)
    if isinstance(obj, Regression):
        return obj
    if isinstance(obj, Variant):
        check_backend(obj.backend, f"--regression {spec!r}")
        return obj
    if isinstance(obj, type) and issubclass(obj, AttentionBackend):
        return Variant(check_backend(obj, f"--regression {spec!r}"))
    kind = type(obj).__name__ if not isinstance(obj, type) else f"class {obj.__qualname__}"
    raise HarnessError(
        f"--regression {spec!r} is a {kind}, not an AttentionBackend subclass or a "
        "harness.regressions.Regression"
    )


def resolve_regression(spec: str) -> Regression:
    """A catalog entry by id or ``MODULE:ATTR``."""
    target = resolve_target(spec)
    if isinstance(target, Variant):
        raise HarnessError(
            f"--regression {spec!r} is an attention backend, not a catalog entry "
            "(wrap it in harness.regressions.Regression with a fixed variant and checks)"
        )
    return target


def resolve_labelled_backend(spec: str) -> tuple[str, type[AttentionBackend]]:
    """``(label, backend)`` for ``--regression spec`` of the commands that run one backend
    (``memory simulate``/``scaling``, the eval): an entry's id and buggy backend, or ``spec`` and
    the user's class itself."""
    target = resolve_target(spec)
    if isinstance(target, Regression):
        return target.id, target.backend  # the entry's property refuses runner-only variants
    if target.runner is not None:
        raise HarnessError(
            f"--regression {spec!r} replaces the model runner; this command runs a backend only"
        )
    return spec, target.backend
