"""A vLLM source tree given by the user: a git checkout, or the ``.py`` files of a wheel.

:func:`locate_tree` accepts the directory that holds the ``vllm`` package (or ``vllm/`` itself)
and checks, by reading files only, that it holds vLLM's V1 attention code. Nothing in the tree
is written, and nothing is imported from it here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

_VERSION_RE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=.*?['"]([^'"]+)['"]""", re.MULTILINE)
REQUIRED = ("vllm/v1/kv_cache_interface.py",)
"""Files every supported tree has (the V1 KV cache specs the builders take)."""


@dataclass(frozen=True, slots=True)
class VllmTree:
    """A vLLM tree: ``root`` holds the ``vllm`` package."""

    root: Path
    version: str | None
    """The release in ``vllm/_version.py`` when the tree has one (a wheel does; a checkout
    that was never built does not). Only a label: the API era is read from signatures."""

    @property
    def label(self) -> str:
        return f"{self.root} (vLLM {self.version})" if self.version else str(self.root)

    def path(self, relative: str) -> Path:
        return self.root / relative

    def config_files(self) -> list[Path]:
        """The config module (``vllm/config.py``, 0.9) or the config package's modules."""
        single = self.root / "vllm" / "config.py"
        if single.is_file():
            return [single]
        return sorted((self.root / "vllm" / "config").glob("*.py"))

    def relative(self, path: str) -> str:
        """``path`` relative to the root when it lies in the tree (for messages)."""
        try:
            return str(Path(path).resolve().relative_to(self.root))
        except ValueError:
            return path


def read_version(root: Path) -> str | None:
    """The release in ``root/vllm/_version.py`` (read as text), or ``None``."""
    try:
        match = _VERSION_RE.search((root / "vllm" / "_version.py").read_text(encoding="utf-8"))
    except OSError:
        return None
    return match.group(1) if match else None


def locate_tree(path: Path | str, flag: str = "--vllm-src") -> VllmTree:
    """The vLLM tree at ``path`` (the directory holding ``vllm/``, or ``vllm/`` itself)."""
    given = Path(path).expanduser()
    if not given.is_dir():
        raise HarnessError(f"{flag} {given}: no such directory")
    for root in (given, given.parent):
        if (root / "vllm").is_dir() and all((root / f).is_file() for f in REQUIRED):
            return VllmTree(root.resolve(), read_version(root))
    if (given / "vllm").is_dir() or given.name == "vllm":
        raise HarnessError(
            f"{flag} {given}: a vllm package without V1 attention code (no "
            f"{REQUIRED[0]}): the engine adapter supports vLLM 0.9 and later"
        )
    raise HarnessError(
        f"{flag} {given}: no vllm/ directory here; give the directory that holds the vllm "
        "package (a git checkout of vLLM, or the unpacked .py files of a vLLM wheel)"
    )
