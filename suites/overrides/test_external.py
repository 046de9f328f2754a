"""external: bases from installed packages and the standard library, read without importing."""

from __future__ import annotations

import importlib.machinery
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.findings import Finding, Severity

SUB = """\
from trap.engine import Engine


class Mine(Engine):
    def step(self, batch, *, tokens):
        return batch
"""


def _site(root: Path, init: str = "", engine: str = "") -> Path:
    package = root / "site" / "trap"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(init, encoding="utf-8")
    (package / "engine.py").write_text(
        engine
        or (
            "class Engine:\n"
            "    def step(self, batch, *, num_tokens):\n        return batch\n\n"
            "    def run(self):\n        return self.step([], num_tokens=1)\n"
        ),
        encoding="utf-8",
    )
    return root / "site"


def _run(tree: Path, **options: object) -> list[Finding]:
    opts = CheckOptions(cwd=str(tree), **options)  # type: ignore[arg-type]
    return check([str(tree / "app")], options=opts).findings


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "mine.py").write_text(SUB, encoding="utf-8")
    return tmp_path


def test_an_installed_base_is_read_not_imported(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _site(tree, init="raise RuntimeError('imported!')\n")
    (finding,) = _run(tree, cache_dir=None, python=str(site))
    assert (finding.code, finding.severity) == ("HO101", Severity.ERROR)
    assert finding.evidence is not None and finding.evidence.path.endswith("trap/engine.py")
    assert "trap" not in sys.modules and "trap.engine" not in sys.modules


def test_without_the_package_the_base_is_unresolved(tree: Path) -> None:
    assert _run(tree, cache_dir=None) == []


def test_external_bases_can_be_turned_off(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(tree, cache_dir=None, external=False, python=str(_site(tree))) == []


def test_a_stored_result_is_not_reused_once_the_installed_base_changes(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _site(tree)
    cache = str(tree / "cache")
    assert [f.severity for f in _run(tree, cache_dir=cache, python=str(site))] == [Severity.ERROR]
    # The package is upgraded: its base now takes `tokens`. The tree itself did not change.
    engine = site / "trap" / "engine.py"
    engine.write_text(engine.read_text().replace("num_tokens", "tokens"), encoding="utf-8")
    assert _run(tree, cache_dir=cache, python=str(site)) == []


def test_a_module_without_source_is_read_from_its_stub(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tree / "site" / "native"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (package / f"_core{suffix}").write_bytes(b"not a real extension: never loaded")
    (package / "_core.pyi").write_text(
        "class Tokenizer:\n    def encode(self, text: str, *, add_special: bool = ...) -> list[int]: ...\n",
        encoding="utf-8",
    )
    (tree / "app" / "mine.py").write_text(
        "from native._core import Tokenizer\n\n\nclass Fast(Tokenizer):\n"
        "    def encode(self, text, *, special=True):\n        return []\n",
        encoding="utf-8",
    )
    (finding,) = _run(tree, cache_dir=None, python=str(tree / "site"))
    assert finding.code == "HO101"
    assert finding.base_path is not None and finding.base_path.endswith("_core.pyi")


def test_the_scanned_tree_is_never_searched_as_installed(tree: Path) -> None:
    # A module of the tree's own top-level package that does not exist is not looked up
    # outside (the working directory and the scanned roots are not "installed").
    (tree / "app" / "mine.py").write_text(
        "from app.missing import Base\n\n\nclass Sub(Base):\n    def f(self): ...\n",
        encoding="utf-8",
    )
    os.makedirs(tree / "elsewhere" / "app", exist_ok=True)
    assert _run(tree, cache_dir=None) == []


# Summaries of installed files are kept once per machine, by content hash.


def _installed_entries(xdg: Path) -> list[Path]:
    return sorted((xdg / "harness" / "installed").glob("*/overrides/*.bin"))


def test_installed_summaries_are_shared_by_projects_and_follow_content(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.overrides import cache as cache_mod

    xdg = tree / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    site = _site(tree)
    made: list[int] = []
    summarize = cache_mod._summarize_one  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(cache_mod, "_summarize_one", lambda d: made.append(len(d)) or summarize(d))
    assert [f.severity for f in _run(tree, cache_dir=str(tree / "one"), python=str(site))] == [
        Severity.ERROR
    ]
    first = len(made)  # the tree's file and trap/engine.py
    assert first == 2 and len(_installed_entries(xdg)) == 1
    # Another project (a fresh cache of its own) summarises only its own file.
    assert [f.severity for f in _run(tree, cache_dir=str(tree / "two"), python=str(site))] == [
        Severity.ERROR
    ]
    assert len(made) == first + 1
    # A corrupt entry is a miss, never a wrong summary; an upgraded package is read again.
    for entry in _installed_entries(xdg):
        entry.write_bytes(entry.read_bytes()[:-3] + b"\0\0\0")
    assert [f.severity for f in _run(tree, cache_dir=str(tree / "three"), python=str(site))] == [
        Severity.ERROR
    ]
    engine = site / "trap" / "engine.py"
    engine.write_text(engine.read_text().replace("num_tokens", "tokens"), encoding="utf-8")
    assert _run(tree, cache_dir=str(tree / "four"), python=str(site)) == []
    # Without a cache, nothing is written there.
    before = _installed_entries(xdg)
    engine.write_text(engine.read_text() + "\n# 0.2\n", encoding="utf-8")
    assert _run(tree, cache_dir=None) == []
    assert _installed_entries(xdg) == before


# Modules of the tree's own packages that the scanned paths leave out are read from beside it.

BASE = """\
class Builder:
    def build(self, common_prefix_len, block_table_tensor):
        return block_table_tensor

    def run(self):
        return self.build(0, block_table_tensor=None)
"""

RENAMED = """\
from pkg.common import Builder


class AiterBuilder(Builder):
    def build(self, common_prefix_len, block_table):
        return block_table
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n", encoding="utf-8")
    (tmp_path / "pkg" / "backends").mkdir(parents=True)
    (tmp_path / "pkg" / "common.py").write_text(BASE, encoding="utf-8")
    (tmp_path / "pkg" / "backends" / "aiter.py").write_text(RENAMED, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("scanned", ["pkg/backends/aiter.py", "pkg/backends", "pkg"])
def test_a_base_the_scanned_paths_leave_out_is_read_beside_them(
    project: Path, scanned: str
) -> None:
    # Namespace packages (no __init__.py): the subclass alone, or its directory, still fails.
    result = check([str(project / scanned)], options=CheckOptions(cwd=str(project)))
    (finding,) = result.findings
    assert (finding.code, finding.severity) == ("HO101", Severity.ERROR)
    assert finding.path == "pkg/backends/aiter.py"
    assert finding.evidence is not None and finding.evidence.path == "pkg/common.py"


def test_a_base_beside_the_tree_in_a_regular_package(project: Path) -> None:
    for directory in ("pkg", "pkg/backends"):
        (project / directory / "__init__.py").write_text("", encoding="utf-8")
    opts = CheckOptions(cwd=str(project / "pkg"), cache_dir=None)  # run from inside the package
    (finding,) = check([str(project / "pkg/backends/aiter.py")], options=opts).findings
    assert finding.severity == Severity.ERROR and finding.evidence is not None


def test_a_stored_result_follows_a_base_read_beside_the_tree(project: Path) -> None:
    opts = CheckOptions(cwd=str(project), cache_dir=str(project / "cache"))
    paths = [str(project / "pkg" / "backends")]
    assert [f.severity for f in check(paths, options=opts).findings] == [Severity.ERROR]
    common = project / "pkg" / "common.py"
    stat = common.stat()
    # The base is fixed to the subclass's name, same size, modification time restored.
    common.write_text(BASE.replace("block_table_tensor", "block_table_xxxxxx"), encoding="utf-8")
    os.utime(common, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert [f.severity for f in check(paths, options=opts).findings] == [Severity.ERROR]
    common.write_text(BASE.replace("block_table_tensor", "block_table"), encoding="utf-8")
    assert check(paths, options=opts).findings == []


def test_installed_packages_are_read_only_from_a_named_environment(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On the checker's own sys.path (installed beside it), the package is not read.
    monkeypatch.syspath_prepend(str(_site(tree)))
    assert _run(tree, cache_dir=None) == []


def _cli(tree: Path, *args: str, path: str | None = None) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = path
    done = subprocess.run(
        [sys.executable, "-m", "harness.overrides", "--no-cache", "--format", "json", "--statistics",
         *args, "app"],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done.stdout, done.stderr


@pytest.mark.integration  # over ~2 s: the slow tier
def test_a_light_and_a_full_install_give_the_same_findings(tree: Path) -> None:
    site = str(_site(tree))
    light, said = _cli(tree)
    full, _ = _cli(tree, path=site)  # the package importable beside the checker
    assert light == full and json.loads(light) == []
    assert "standard library only" in said and platform.python_version() in said
    named, said = _cli(tree, "--python", site)
    assert [f["severity"] for f in json.loads(named)] == ["error"]
    assert f"environment {site}" in said
    interpreter, _ = _cli(tree, "--python", sys.executable, path=site)
    assert json.loads(interpreter) == []  # that interpreter's own sys.path (-I: no PYTHONPATH)


def test_an_environment_that_does_not_exist_is_a_one_line_error(tree: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness.overrides", "--python", "nowhere", "app"],
        cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert (
        done.stderr.strip() == "harness: error: --python nowhere: no such interpreter or directory"
    )


@pytest.mark.parametrize("folder", ["site-packages", "project"])
def test_a_package_beside_the_scanned_one_is_read_only_outside_installations(
    tmp_path: Path, folder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scanning ``site-packages/torchlike`` never reads ``site-packages/sympylike`` (installed:
    only ``--python`` reads it); in a project folder the sibling package is the project's."""
    root = tmp_path / folder
    (root / "sympylike").mkdir(parents=True)
    (root / "sympylike" / "__init__.py").write_text(
        "class Function:\n    def eval(self, *args):\n        return args\n"
        "    def run(self):\n        return self.eval(1, 2)\n"
    )
    (root / "torchlike").mkdir()
    (root / "torchlike" / "__init__.py").write_text(
        "from sympylike import Function\n\n\n"
        "class FloorDiv(Function):\n    def eval(self, base):\n        return base\n"
    )
    monkeypatch.chdir(root)
    result = check(["torchlike"], options=CheckOptions(cache_dir=None))
    codes = sorted(f.code for f in result.findings)
    assert codes == ([] if folder == "site-packages" else ["HO107"])


def test_a_module_beside_the_tree_is_looked_for_only_in_roots_that_can_hold_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many import roots (one per directory of a deep tree): each is listed once, and only
    the roots holding an entry of the module's first name are probed further."""
    from harness.overrides.external import InstalledModules

    roots = [tmp_path / f"root{i}" for i in range(40)]
    for root in roots:
        (root / "other").mkdir(parents=True)
    (roots[-1] / "pkg").mkdir()
    (roots[-1] / "pkg" / "base.py").write_text("class Base:\n    pass\n", encoding="utf-8")
    (roots[-2] / "PKG.py").write_text("", encoding="utf-8")  # another name on case-sensitive
    modules = InstalledModules(
        _Blobs(), ["pkg"], import_roots=lambda: [str(r) for r in roots], cwd=str(tmp_path)
    )
    probes: list[str] = []
    real_isfile = os.path.isfile

    def isfile(path: object) -> bool:
        probes.append(str(path))
        return real_isfile(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os.path, "isfile", isfile)
    for _ in range(3):
        found = modules.module("pkg.base")
        assert found is not None and found[0].path == str(roots[-1] / "pkg" / "base.py")
        assert modules.module("pkg.missing") is None
    # Only root38 (PKG.py, when the filesystem ignores case) and root39 are probed.
    assert {Path(p).parts[len(tmp_path.parts)] for p in probes} <= {"root38", "root39"}


def test_a_root_that_cannot_be_listed_is_still_probed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.overrides.external import InstalledModules

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "base.py").write_text("class Base:\n    pass\n", encoding="utf-8")

    def listdir(path: object) -> list[str]:
        raise PermissionError(13, "Permission denied")

    modules = InstalledModules(
        _Blobs(), ["pkg"], import_roots=lambda: [str(tmp_path)], cwd=str(tmp_path)
    )
    monkeypatch.setattr(os, "listdir", listdir)
    found = modules.module("pkg.base")
    assert found is not None and found[0].path == str(tmp_path / "pkg" / "base.py")


def test_bases_read_ahead_are_handed_out_when_asked_and_only_then_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``read_ahead`` reads the standard-library modules a file's bases come from, through a
    re-export (``concurrent.futures`` takes ``Executor`` from ``concurrent.futures._base``),
    never the tree's own; ``module`` then hands them out without reading again, and records
    a file as used only once it is asked for."""
    from harness.overrides import external
    from harness.overrides.summary import summarize

    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "base.py").write_text("class Base:\n    pass\n", encoding="utf-8")
    modules = external.InstalledModules(
        _Blobs(), ["app"], import_roots=lambda: [str(tmp_path)], cwd=str(tmp_path)
    )
    code = (
        "import argparse\nfrom concurrent.futures import Executor\nfrom app.base import Base\n"
        "from . import near\n\nclass A(argparse.Action): pass\nclass B(Executor): pass\n"
        "class C(Base): pass\nclass D(near.Near): pass\n"
    )
    read: list[str] = []
    real = external.summary_of

    def summary_of(data: bytes, store: external.BlobStore) -> object:
        read.append(data.decode().partition("\n")[0])
        return real(data, store)

    monkeypatch.setattr(external, "summary_of", summary_of)
    modules.read_ahead(summarize(code.encode()))
    assert len(read) >= 3 and not any("class Base" in r for r in read)
    assert modules.used == []
    monkeypatch.setattr(external, "summary_of", None)  # asking again would fail
    for name in ("argparse", "concurrent.futures", "concurrent.futures._base"):
        found = modules.module(name)
        assert found is not None and found[0].module == name
    assert [Path(p).name for p, _ in modules.used] == ["argparse.py", "__init__.py", "_base.py"]


class _Blobs:
    """An in-memory blob store."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self.blobs.get(key)

    def add(self, key: str, blob: bytes) -> None:
        self.blobs[key] = blob


@pytest.mark.parametrize("how", ["flag", "flag-blank", "config"])
def test_an_empty_environment_is_a_usage_error_not_the_standard_library(
    tree: Path, how: str
) -> None:
    """What an unset CI variable gives (``--python "$VENV"``, ``python = ""``) must not drop
    the installed bases silently: the proven crash through ``trap.engine`` would be lost."""
    _site(tree)
    args = ["--python", "" if how == "flag" else "  "] if how.startswith("flag") else []
    if how == "config":
        (tree / "pyproject.toml").write_text('[tool.harness.overrides]\npython = ""\n')
    done = subprocess.run(
        [sys.executable, "-m", "harness.overrides", "--no-cache", *args, "app"],
        cwd=tree, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert "empty" in line and "Traceback" not in done.stderr
