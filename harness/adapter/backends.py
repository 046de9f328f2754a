"""A tree's attention backends, read from its own registry or selector (files only, no import).

vLLM 0.10 on: the members of ``AttentionBackendEnum`` in ``vllm/v1/attention/backends/registry.py``
(name -> class path). vLLM 0.9: the class paths its platform selectors return
(``vllm/platforms/*.py``), each named by its backend's ``get_name()``; 0.9's V1 names end in
``_VLLM_V1``, which :func:`canonical_name` drops so that ``FLASH_ATTN`` names the same backend in
every era.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from harness.errors import HarnessError
from harness.vllm_tree.tree import VllmTree, parse_source

REGISTRY = "vllm/v1/attention/backends/registry.py"
_CLASS_PATH = re.compile(r"^vllm\.v1\.attention\.backends\.[\w.]+\.\w+$")

DEFAULT_BACKENDS = (
    "FLASH_ATTN",
    "FLASHINFER",
    "FLEX_ATTENTION",
    "TRITON_ATTN",
    "FLASHMLA",
    "TRITON_MLA",
    "ROCM_AITER_MLA",
    "CUTLASS_MLA",
    "FLASHINFER_MLA",
    "FLASH_ATTN_MLA",
)
"""What ``--backend`` defaults to: the backends of issue 26 (those a tree has are run)."""


@dataclass(frozen=True, slots=True)
class BackendEntry:
    """One backend of a tree: its name, the class path and where the name was read."""

    name: str
    class_path: str
    source: str

    @property
    def module(self) -> str:
        return self.class_path.rpartition(".")[0]

    @property
    def class_name(self) -> str:
        return self.class_path.rpartition(".")[2]


def _is_class_path(value: str) -> bool:
    """``package.module.Class``: what Python can import (not ``""``, nor text with a newline
    that would print as a line of its own)."""
    parts = value.split(".")
    return len(parts) > 1 and all(part.isidentifier() for part in parts)


def canonical_name(name: str) -> str:
    """``FLASH_ATTN_VLLM_V1`` -> ``FLASH_ATTN``: one name per backend across eras."""
    return name.removesuffix("_VLLM_V1")


def discover_backends(tree: VllmTree) -> list[BackendEntry]:
    """The tree's backends, in its own order."""
    registry = tree.file(REGISTRY)
    if registry.is_file():
        return _from_registry(tree)
    return _from_selectors(tree)


def _from_registry(tree: VllmTree) -> list[BackendEntry]:
    entries: list[BackendEntry] = []
    for node in parse_source(tree.file(REGISTRY)).body:
        if isinstance(node, ast.ClassDef) and node.name == "AttentionBackendEnum":
            for statement in node.body:
                if (
                    isinstance(statement, ast.Assign)
                    and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)
                    and isinstance(statement.value, ast.Constant)
                    and isinstance(statement.value.value, str)
                    and _is_class_path(statement.value.value)
                ):
                    entries.append(
                        BackendEntry(
                            statement.targets[0].id,
                            statement.value.value,
                            f"{REGISTRY}:{statement.lineno}",
                        )
                    )
    if not entries:
        raise HarnessError(f"{tree.file(REGISTRY)} has no AttentionBackendEnum members")
    return entries


def _get_name(tree: VllmTree, class_path: str) -> str | None:
    """The constant a backend class's ``get_name()`` returns, read from its module's source."""
    module, _, class_name = class_path.rpartition(".")
    path = tree.file(module.replace(".", "/") + ".py")
    if not path.is_file():
        return None
    for node in parse_source(path).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "get_name":
                    for statement in ast.walk(item):
                        if isinstance(statement, ast.Return) and isinstance(
                            statement.value, ast.Constant
                        ):
                            return str(statement.value.value)
    return None


def _from_selectors(tree: VllmTree) -> list[BackendEntry]:
    entries: dict[str, BackendEntry] = {}
    for path in sorted(tree.file("vllm/platforms").glob("*.py")):
        for node in ast.walk(parse_source(path)):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and _CLASS_PATH.match(node.value)
            ):
                name = canonical_name(_get_name(tree, node.value) or node.value.rpartition(".")[2])
                source = f"{tree.relative(str(path))}:{node.lineno}"
                entries.setdefault(name, BackendEntry(name, node.value, source))
    if not entries:
        raise HarnessError(
            f"{tree.root}: found neither {REGISTRY} nor backend class paths in vllm/platforms/; "
            "the engine adapter supports vLLM 0.9 and later"
        )
    return list(entries.values())


def select_backends(
    entries: list[BackendEntry], names: list[str] | None, where: str = "this tree"
) -> list[BackendEntry]:
    """``names`` (canonical; default :data:`DEFAULT_BACKENDS` that the tree has) among
    ``entries``, the backends of ``where`` (named when one is unknown)."""
    by_name = {e.name: e for e in entries}
    if names is None:
        return [by_name[n] for n in DEFAULT_BACKENDS if n in by_name]
    unknown = [n for n in names if canonical_name(n) not in by_name]
    if unknown:
        raise HarnessError(
            f"unknown backend {', '.join(unknown)}; the backends of {where}: "
            + ", ".join(sorted(by_name))
        )
    return [by_name[canonical_name(n)] for n in dict.fromkeys(names)]
