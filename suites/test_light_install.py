"""The base install, proven in a fresh virtual environment: the checker, and nothing else.

pre-commit installs the ``strict-overrides`` hook with a plain ``pip install`` of this repository;
that must not bring torch (or anything). The wheel is built from a copy of this checkout's
sources with the running venv's setuptools (no network), then installed into an empty venv with
every pip configuration file ignored and no index: any declared dependency would fail the install.
That is a nested pip (integration tier); the fast tier checks the same two facts without one: the
base install declares no dependency here, and the checker runs where no extra can be imported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from harness.extras import DISTRIBUTION

ROOT = Path(__file__).resolve().parent.parent
EXTRA_MODULES = ("torch", "numpy", "rich", "matplotlib", "lm_eval", "flashinfer", "pynvml")
MAX_INSTALLED_BYTES = 2 << 20
"""The light install's files (``__pycache__`` aside) must stay small: a pre-commit hook."""

BLOCK_EXTRAS = "import sys\nfor name in {names!r}:\n    sys.modules[name] = None\n"
"""Run first in a child interpreter: any import of an extra's module then raises ImportError."""

BASE = """\
class MLACommonMetadataBuilder:
    def _build_decode(self, block_table_tensor, seq_lens):
        return block_table_tensor, seq_lens

    def build(self, block_table_tensor, seq_lens):
        return self._build_decode(block_table_tensor=block_table_tensor, seq_lens=seq_lens)
"""
SUBCLASS = """\
from pkg.common import MLACommonMetadataBuilder


class AiterMLAMetadataBuilder(MLACommonMetadataBuilder):
    def _build_decode(self, block_table, seq_lens):  # kept the old name: a crash
        return block_table, seq_lens
"""


def _isolated_pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no find-links, no extra index from any config file
    return env


def _run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_isolated_pip_env(),
        timeout=300,
    )


def _light_install(tmp: Path) -> Path:
    """A fresh venv holding ``pip install <this checkout>`` with no extras; returns its bin dir."""
    src = tmp / "src"  # build from a copy: building in place would write build/ into the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "harness", src / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check")
    built = _run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", src)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "deprecated" not in built.stdout + built.stderr  # the TOML-table license warned (#28)
    (wheel,) = (tmp / "dist").glob(f"{DISTRIBUTION.replace('-', '_')}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        assert "License-Expression: Apache-2.0" in archive.read(metadata).decode().splitlines()
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False, symlinks=os.name != "nt")
    python = env_dir / "bin" / "python"
    installed = _run(*pip, "--python", python, "install", "--no-index", "--no-cache-dir", wheel)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return env_dir / "bin"


def _site_packages(bin_dir: Path) -> Path:
    out = _run(bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    return Path(out.stdout.strip())


def test_the_base_install_declares_no_dependency_here() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ['tomli>=1.1; python_version < "3.11"']


def test_the_checker_runs_where_no_extra_can_be_imported(tmp_path: Path) -> None:
    pkg = tmp_path / "tree" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "common.py").write_text(BASE)
    (pkg / "rocm.py").write_text(SUBCLASS)
    code = BLOCK_EXTRAS.format(names=EXTRA_MODULES) + (
        "from harness.cli import main\nraise SystemExit(main(['overrides', '--no-cache', 'tree']))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "HO101" in out.stdout and "raises TypeError" in out.stdout


@pytest.mark.integration
def test_the_light_install(tmp_path: Path) -> None:
    """One build for every check (the module's tests would build once per xdist worker)."""
    bin_dir = _light_install(tmp_path)
    _holds_harness_alone(bin_dir)
    for entry in (("harness", "overrides"), ("python", "-m", "harness.overrides")):
        _checker_exits_1_on_a_proven_crash(bin_dir, tmp_path / entry[-1], entry)
    for argv in (("memory", "simulate", "--model", "tiny"), ("memory", "scaling"), ("demo",)):
        _a_command_needing_an_extra_names_it(bin_dir, argv, "engine")
    _help_and_version_work_without_extras(bin_dir)
    _bisect_without_extras(bin_dir, tmp_path / "bisect")


def _holds_harness_alone(light_venv: Path) -> None:
    site = _site_packages(light_venv)
    names = {p.name for p in site.iterdir()} - {"__pycache__"}
    dist_info = f"{DISTRIBUTION.replace('-', '_')}-0.1.0.dist-info"
    assert names == {"harness", dist_info}, sorted(names)
    size = sum(
        f.stat().st_size for f in site.rglob("*") if f.is_file() and "__pycache__" not in f.parts
    )
    assert size < MAX_INSTALLED_BYTES, f"the light install is {size} bytes"
    probe = "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m)])"
    out = _run(light_venv / "python", "-c", probe, *EXTRA_MODULES)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _checker_exits_1_on_a_proven_crash(
    light_venv: Path, tmp_path: Path, entry: tuple[str, ...]
) -> None:
    pkg = tmp_path / "tree" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "common.py").write_text(BASE)
    (pkg / "rocm.py").write_text(SUBCLASS)
    command = (light_venv / entry[0], *entry[1:], "--no-cache", "tree")
    out = _run(*command, cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "HO101" in out.stdout
    assert "raises TypeError" in out.stdout
    assert "'block_table_tensor'" in out.stdout
    (pkg / "rocm.py").write_text(SUBCLASS.replace("block_table,", "block_table_tensor,"))
    fixed = _run(*command, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def _a_command_needing_an_extra_names_it(
    light_venv: Path, argv: tuple[str, ...], extra: str
) -> None:
    out = _run(light_venv / "harness", *argv)
    assert out.returncode == 2, f"harness {' '.join(argv)}: {out.stdout}{out.stderr}"
    assert "Traceback" not in out.stderr
    assert f"pip install '{DISTRIBUTION}[{extra}]'" in out.stderr
    assert out.stderr.startswith("harness: error: ")


def _help_and_version_work_without_extras(light_venv: Path) -> None:
    for argv in (("--help",), ("--version",), ("overrides", "--list-rules")):
        out = _run(light_venv / "harness", *argv)
        assert out.returncode == 0, out.stdout + out.stderr


def _bisect_without_extras(light_venv: Path, tmp_path: Path) -> None:
    """``bisect --check overrides`` runs the installed checker isolated (``-I``) from a tree
    whose root holds ``ast.py``; ``--check regressions`` names the missing extra at once."""
    repo = tmp_path / "repo"
    pkg = repo / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "common.py").write_text(BASE.replace("block_table_tensor", "block_table"))
    (pkg / "rocm.py").write_text(SUBCLASS)
    (repo / "ast.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    git = ("git", "-c", "user.name=t", "-c", "user.email=t@t")
    for step, argv in enumerate([("init", "-q"), ("add", "."), ("commit", "-qm", "good")]):
        assert _run(*git, *argv, cwd=repo).returncode == 0, step
    (pkg / "common.py").write_text(BASE)
    assert _run(*git, "commit", "-qam", "rename", cwd=repo).returncode == 0
    bisect = (light_venv / "harness", "bisect", "--repo", repo, "--good", "HEAD~1", "--bad", "HEAD")
    found = _run(*bisect, "--check", "overrides", "--json")
    assert found.returncode == 0, found.stdout + found.stderr
    assert '"status": "found"' in found.stdout and not (tmp_path / "ran").exists()
    missing = _run(*bisect, "--check", "regressions")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert missing.stderr.startswith("harness: error: ") and missing.stderr.count("\n") == 1
    assert "pip install 'attn-metadata-harness[engine]'" in missing.stderr
