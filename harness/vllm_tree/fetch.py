"""A released vLLM's Python sources: the wheel fetched with pip and unpacked once into the cache.

``fetch_vllm_source(version)`` downloads the wheel with ``pip download``, unpacks its ``vllm/**/*.py``
under a temporary name and renames it into ``$XDG_CACHE_HOME/harness/vllm-VERSION`` with a
``.harness-complete`` marker, so the tree only ever appears complete. A complete tree is reused; one
without the marker is not ours and is never touched (an error).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from harness.errors import HarnessError
from harness.vllm_tree.tree import VllmTree, read_version

PINNED_VLLM_VERSION = "0.9.0"
"""The vLLM release ``make fidelity`` compares against (the reference's default semantics)."""
MARKER = ".harness-complete"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/harness`` (``~/.cache/harness`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harness"


def _unpack_python_sources(wheel: Path, target: Path) -> int:
    count = 0
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            if not (name.startswith("vllm/") and name.endswith(".py")) or ".." in name.split("/"):
                continue
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(archive.read(info))
            count += 1
    return count


def fetch_vllm_source(
    version: str = PINNED_VLLM_VERSION, cache_dir: Path | None = None
) -> VllmTree:
    """vLLM ``version``'s Python sources, downloaded with pip and unpacked once into the cache."""
    cache = (cache_dir or default_cache_dir()).expanduser()
    final = cache / f"vllm-{version}"
    if (final / MARKER).is_file():
        return VllmTree(final.resolve(), read_version(final))
    _refuse_foreign(final)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vllm-wheel-", dir=cache) as tmp:
        download = Path(tmp) / "wheel"
        # -I: never import a pip.py (or ast.py...) from the working directory.
        command = [sys.executable, "-I", "-m", "pip", "download", f"vllm=={version}", "--no-deps"]
        command += ["--only-binary=:all:", "--quiet", "-d", str(download)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        wheels = sorted(download.glob("vllm-*.whl")) if download.is_dir() else []
        if result.returncode != 0 or not wheels:
            detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise HarnessError(
                f"could not download vllm=={version} with pip: "
                + (" / ".join(detail) or "no wheel")
            )
        staging = Path(tmp) / "src"
        count = _unpack_python_sources(wheels[0], staging)
        found = read_version(staging)
        if found != version:
            raise HarnessError(f"the vllm=={version} wheel says it is vLLM {found}")
        (staging / MARKER).write_text(
            json.dumps({"version": version, "wheel": wheels[0].name, "files": count}) + "\n",
            encoding="utf-8",
        )
        try:
            staging.rename(final)  # atomic; never replaces an existing directory
        except OSError:
            if not (final / MARKER).is_file():  # not another fetch that finished first
                _refuse_foreign(final)
                raise
    return VllmTree(final.resolve(), version)


def _refuse_foreign(final: Path) -> None:
    """A ``vllm-VERSION`` we did not unpack (no marker) is the user's: say so, touch nothing."""
    if final.exists() or final.is_symlink():
        raise HarnessError(
            f"{final} exists and is not an unpack of ours (no {MARKER} in it); it is left "
            "alone: move it away or give another --cache-dir"
        )


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.vllm_tree.fetch [VERSION]``: print the unpacked tree (fetch it once)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        print(fetch_vllm_source(args[0] if args else PINNED_VLLM_VERSION).root)
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
