"""``make install``'s guard: refuse an install that would pull a CUDA build of torch.

PyPI's Linux torch is the CUDA build (several GB of ``nvidia-*`` wheels). Our development and CI
venvs use the CPU build (on disk here, or pre-installed from the CPU index), and pip picks it for
``torch==2.13.0`` where it is available. Where it is not, this guard stops ``make install`` before
anything is downloaded: ``pip install --dry-run --report`` first, then one clear line, exit 1.
With the ``gpu`` extra in ``EXTRAS`` a CUDA torch is what is wanted, and the guard lets it through.

Usage: ``python ci/install_guard.py EXTRAS PIP_INSTALL_ARGS...``
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def cuda_wheels(report: dict[str, Any]) -> list[str]:
    """``name==version`` of each CUDA runtime wheel (``nvidia-*``) a pip install report installs."""
    found: list[str] = []
    for item in report.get("install", []):
        metadata = item.get("metadata", {})
        name = str(metadata.get("name", "")).lower().replace("_", "-")
        if name.startswith("nvidia-") and name != "nvidia-ml-py":  # NVML bindings: no CUDA
            found.append(f"{name}=={metadata.get('version')}")
    return sorted(found)


def refusal(extras: str, report: dict[str, Any]) -> str | None:
    """The one-line refusal for ``report``, or ``None`` when the install may go ahead."""
    if "gpu" in extras.split(","):
        return None
    wheels = cuda_wheels(report)
    if not wheels:
        return None
    return (
        f"make install: refusing to pull a CUDA build of torch ({len(wheels)} CUDA wheels, e.g. "
        f"{wheels[0]}); install the CPU build first (pip install torch==2.13.0 --index-url "
        "https://download.pytorch.org/whl/cpu), or add the gpu extra: EXTRAS=engine,eval,gpu,dev"
    )


def main(argv: Sequence[str]) -> int:
    """Dry-run the install ``argv[1:]`` and refuse it if :func:`refusal` says so."""
    if not argv:
        print("usage: python ci/install_guard.py EXTRAS PIP_INSTALL_ARGS...", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.json"
        pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report"]
        done = subprocess.run([*pip, str(path), *argv[1:]], check=False)
        if done.returncode != 0:
            return done.returncode  # pip said why
        report = json.loads(path.read_text())
    why = refusal(argv[0], report)
    if why is not None:
        print(why, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
