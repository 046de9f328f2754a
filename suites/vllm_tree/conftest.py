"""Small vLLM-shaped trees written for one test (our own code in vLLM's layout)."""

from __future__ import annotations

from pathlib import Path

from harness.vllm_tree.tree import VllmTree, locate_tree


def write_tree(root: Path, files: dict[str, str], version: str = "0.0.0+test") -> VllmTree:
    """A small vLLM-shaped tree under ``root``: ``files`` (path -> text), a version file and the
    ``vllm/v1/kv_cache_interface.py`` that marks a vLLM tree."""
    files = {
        "vllm/_version.py": f"__version__ = {version!r}\n",
        "vllm/v1/kv_cache_interface.py": "",
        **files,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return locate_tree(root)
