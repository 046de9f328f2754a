"""Which optional extra provides a module, so a command can say what to install.

The base install (``pip install`` with no extras) is the override checker alone. Commands that
need more import it when they run; when such an import fails, :func:`missing_extra` names the
extra to install instead of letting a traceback through.
"""

from __future__ import annotations

import importlib.util

DISTRIBUTION = "attn-metadata-harness"
"""This project's name on the package index (``harness`` there is an unrelated project); the import
package and the command are ``harness``."""

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "engine": ("torch", "numpy", "rich", "matplotlib"),
    "eval": ("lm_eval",),
    "gpu": ("flashinfer", "pynvml"),
    "triton": ("triton",),
}
"""Extra name (``pyproject.toml``'s ``optional-dependencies``) -> top-level modules it installs."""


def extra_for_module(module: str) -> str | None:
    """The extra whose packages provide the top-level package of ``module``, or ``None``."""
    top = module.partition(".")[0]
    return next((extra for extra, modules in EXTRA_MODULES.items() if top in modules), None)


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: from the package index, and from a checkout."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (in a checkout: pip install '.[{extra}]')"


def missing_extra(error: ModuleNotFoundError) -> str | None:
    """A one-line install hint when ``error`` is an optional package that is not installed.

    ``None`` when the missing module is not one of ours, or when its top-level package is
    installed (a broken installation, or a missing submodule, is a bug to show, not to hide).
    """
    if not error.name:
        return None
    top = error.name.partition(".")[0]
    extra = extra_for_module(top)
    if extra is None or importlib.util.find_spec(top) is not None:
        return None
    return (
        f"this command needs {top}, which the base install leaves out; install the "
        f"'{extra}' extra: {install_hint(extra)}"
    )
