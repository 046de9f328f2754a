"""ci/vllm_overrides.py: the static step finds vLLM where vLLM's test image puts it.

The image installs vllm into site-packages and moves the checkout's ``vllm/`` to ``src/vllm``;
the fixtures here have that shape: a git repository whose working tree has no ``vllm/`` and a
``site-packages`` directory that ``import vllm`` resolves to (through ``PYTHONPATH``).
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci import vllm_overrides as step

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ci/vllm_overrides.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

COMMON = """\
class MLACommonMetadataBuilder:
    def _build_decode(self, block_table, seq_lens):
        return block_table, seq_lens

    def build(self, block_table, seq_lens):
        return self._build_decode(block_table=block_table, seq_lens=seq_lens)
"""
RENAMED = COMMON.replace("block_table", "block_table_tensor")
ROCM = """\
from vllm.common import MLACommonMetadataBuilder


class AiterMLAMetadataBuilder(MLACommonMetadataBuilder):
    def _build_decode(self, block_table, seq_lens):  # the old name
        return block_table, seq_lens
"""
LEGACY = """\
class Base:
    def run(self, x):
        return x

    def go(self):
        return self.run(x=1)


class Child(Base):
    def run(self, y):  # an error vLLM already has: not news for a pull request
        return y
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _git(repo: Path, *argv: str) -> None:
    git = ["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci"]
    done = subprocess.run([*git, "-C", str(repo), *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _image(tmp: Path, base: dict[str, str], head: dict[str, str] | None = None) -> Path:
    """vLLM's test image in miniature; returns its site-packages.

    ``workspace`` is a git repository: ``main`` holds ``base``, HEAD (a branch) ``head``; its
    ``vllm/`` is moved to ``src/vllm`` as the image does. ``site-packages/vllm`` is HEAD's.
    """
    head = base if head is None else head
    repo = tmp / "workspace"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _write(repo, {"vllm/__init__.py": "", **{f"vllm/{n}": t for n, t in base.items()}})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "checkout", "-qb", "pr")
    shutil.rmtree(repo / "vllm")
    _write(repo, {"vllm/__init__.py": "", **{f"vllm/{n}": t for n, t in head.items()}})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "pr", "--allow-empty")
    (repo / "src").mkdir()
    (repo / "vllm").rename(repo / "src" / "vllm")
    (repo / "tests").mkdir()
    site = tmp / "site-packages"
    shutil.copytree(repo / "src" / "vllm", site / "vllm")
    return site


def _run(site: Path, cwd: Path, *argv: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


# --- where is vLLM ----------------------------------------------------------------------------


@pytest.fixture
def only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A ``sys.path`` of one empty directory (returned), and no ``vllm`` imported yet."""
    path = tmp_path / "path"
    path.mkdir()
    monkeypatch.setattr(sys, "path", [str(path)])
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    importlib.invalidate_caches()
    return path


def test_the_installed_package_is_found_without_importing_it(only: Path) -> None:
    _write(only, {"vllm/__init__.py": "raise SystemExit('vllm was imported')\n"})
    assert step.vllm_directory(None) == (only / "vllm", "import vllm")
    assert "vllm" not in sys.modules


def test_no_vllm_is_a_usage_error(only: Path) -> None:
    with pytest.raises(step.StepError, match="import vllm finds nothing here"):
        step.vllm_directory(None)


def test_a_vllm_directory_without_init_is_not_vllm(only: Path) -> None:
    (only / "vllm").mkdir()  # what a moved-away checkout leaves: a namespace package
    with pytest.raises(step.StepError, match="finds no regular package"):
        step.vllm_directory(None)


def test_the_lookup_is_python_c_import_vllm_in_the_working_directory(
    only: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python3 ci/vllm_overrides.py`` has ``ci/`` first on ``sys.path``, where ``ci/vllm/``
    (the step files) is a namespace package; ``import vllm`` in the step's shell has the working
    directory there instead."""
    monkeypatch.setattr(sys, "path", [str(SCRIPT.parent), str(only)])
    with pytest.raises(step.StepError, match="import vllm finds nothing here"):
        step.vllm_directory(None)
    _write(only, {"vllm/__init__.py": ""})
    _write(tmp_path / "checkout", {"vllm/__init__.py": ""})
    monkeypatch.chdir(tmp_path / "checkout")
    importlib.invalidate_caches()
    assert step.vllm_directory(None)[0] == (tmp_path / "checkout" / "vllm").resolve()
    assert sys.path == [str(SCRIPT.parent), str(only)]


def test_a_finder_that_raises_is_one_line(only: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def find_spec(self, name: str, *args: object) -> None:
            raise RuntimeError(f"cannot find {name}")

    monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    with pytest.raises(step.StepError, match="cannot look up the vllm package: cannot find vllm"):
        step.vllm_directory(None)


def test_a_given_path_is_the_package_or_a_checkout_holding_it(tmp_path: Path) -> None:
    _write(tmp_path, {"src/vllm/__init__.py": ""})
    package = (tmp_path / "src" / "vllm").resolve()
    assert step.vllm_directory(str(tmp_path / "src")) == (package, f"--vllm {tmp_path / 'src'}")
    assert step.vllm_directory(str(package))[0] == package
    with pytest.raises(step.StepError, match="neither a vllm package nor a directory holding"):
        step.vllm_directory(str(tmp_path))


# --- the step in the image's layout -------------------------------------------------------------


def test_the_step_checks_the_installed_tree_and_names_the_call(tmp_path: Path) -> None:
    site = _image(tmp_path, {"common.py": RENAMED, "rocm.py": ROCM})
    out = _run(site, tmp_path / "workspace" / "tests")
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"checking {site.resolve() / 'vllm'} (import vllm)" in out.stderr
    assert "vllm/rocm.py:5:5: HO101" in out.stdout
    assert "call:     vllm/common.py:6: return self._build_decode(" in out.stdout


def test_the_checker_is_this_checkouts_whatever_the_tree_beside_vllm_holds(tmp_path: Path) -> None:
    """The checker runs in the tree's parent directory (site-packages): a ``harness`` there (an
    older install, PyPI's unrelated ``harness``) is not the one imported."""
    site = _image(tmp_path, {"common.py": RENAMED, "rocm.py": ROCM})
    _write(site, {"harness/__init__.py": "raise SystemExit('the harness of site-packages')\n"})
    out = _run(site, tmp_path / "workspace" / "tests")
    assert "the harness of site-packages" not in out.stderr
    assert out.returncode == 1 and "vllm/rocm.py:5:5: HO101" in out.stdout, out.stderr


def test_a_pull_request_is_blocked_by_the_crash_it_adds_only(tmp_path: Path) -> None:
    base = {"common.py": COMMON, "rocm.py": ROCM, "legacy.py": LEGACY}
    site = _image(tmp_path, base, {**base, "common.py": RENAMED})
    out = _run(site, tmp_path / "workspace" / "tests", "--since-merge-base", "main")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "vllm/rocm.py:5:5: HO101" in out.stdout
    assert "legacy" not in out.stdout and "HO303" not in out.stdout
    assert "only the findings added to" in out.stderr


def test_a_pull_request_that_adds_nothing_passes_beside_old_errors(tmp_path: Path) -> None:
    site = _image(tmp_path, {"legacy.py": LEGACY}, {"legacy.py": LEGACY, "new.py": "x = 1\n"})
    out = _run(site, tmp_path / "workspace" / "tests", "--since-merge-base", "main")
    assert out.returncode == 0, out.stdout + out.stderr
    whole = _run(site, tmp_path / "workspace" / "tests")  # the whole tree: the old error blocks
    assert whole.returncode == 1 and "vllm/legacy.py:10:5: HO101" in whole.stdout


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--since", "no-such-ref"], "error: --since no-such-ref: no such commit in "),
        (["--since-merge-base", "origin/main"], "error: --since-merge-base origin/main: no such "),
        (["--since-merge-base", "main", "--repo", "/"], "error: git rev-parse --show-toplevel: "),
        (["--vllm", "."], "error: --vllm .: neither a vllm package nor a directory holding one"),
    ],
    ids=["no-such-ref", "no-such-branch", "not-a-repository", "not-vllm"],
)
def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path, argv: list[str], said: str) -> None:
    site = _image(tmp_path, {"legacy.py": LEGACY})
    out = _run(site, tmp_path / "workspace" / "tests", *argv)
    assert out.returncode == 2, out.stdout + out.stderr
    (error,) = [x for x in out.stderr.splitlines() if x.startswith("ci/vllm_overrides.py: error")]
    assert said in error
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_a_branch_without_a_common_commit_is_named(tmp_path: Path) -> None:
    """A shallow clone's HEAD and the fetched branch meet nowhere: ``git merge-base`` says
    nothing and exits 1."""
    site = _image(tmp_path, {"legacy.py": LEGACY})
    repo = tmp_path / "workspace"
    _git(repo, "checkout", "-q", "--orphan", "unrelated")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "unrelated")
    out = _run(site, repo / "tests", "--since-merge-base", "main")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "error: --since-merge-base main: HEAD and main have no common commit in" in out.stderr
    assert "(a shallow clone: fetch more of their history)" in out.stderr


def test_a_ref_without_vllm_is_a_usage_error(tmp_path: Path) -> None:
    site = _image(tmp_path, {"legacy.py": LEGACY})
    repo = tmp_path / "workspace"
    _git(repo, "checkout", "-q", "--orphan", "empty")
    _git(repo, "rm", "-rqf", "--cached", ".")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "nothing")
    out = _run(site, repo / "tests", "--since", "empty")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "has no vllm/ at the top of" in out.stderr


# --- done when: vLLM 0.34.0 in the image's layout, with the AITER rename put back ---------------


def _put_the_rename_back(path: Path, cls: str, method: str, new: str, old: str) -> int:
    """Rename parameter ``new`` of ``cls.method`` in ``path`` back to ``old`` (the signature and
    the method's body), as the ROCm AITER subclass had it when the seed's base renamed it;
    returns the line of the def."""
    text = path.read_text()
    tree = ast.parse(text)
    (klass,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    (func,) = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == method]
    assert new in [a.arg for a in func.args.args], f"{cls}.{method} has no parameter {new}"
    lines = text.splitlines(keepends=True)
    assert func.end_lineno is not None
    for i in range(func.lineno - 1, func.end_lineno):
        lines[i] = re.sub(rf"\b{new}\b", old, lines[i])
    path.write_text("".join(lines))
    return func.lineno


@pytest.mark.integration
def test_vllm_0340_in_the_image_layout_with_the_aiter_rename_put_back(tmp_path: Path) -> None:
    from harness.vllm_tree.fetch import fetch_vllm_source

    source = fetch_vllm_source("0.34.0")  # the cached tree, or pip-fetched once
    repo = tmp_path / "workspace"
    shutil.copytree(source.root / "vllm", repo / "vllm", ignore=shutil.ignore_patterns("*.pyc"))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "vLLM 0.34.0")
    _git(repo, "checkout", "-qb", "pr")
    aiter = repo / "vllm/v1/attention/backends/mla/rocm_aiter_mla.py"
    line = _put_the_rename_back(
        aiter, "AiterMLAMetadataBuilder", "_build_decode", "block_table_tensor", "block_table"
    )
    _git(repo, "commit", "-qam", "keep the old keyword in the AITER builder")
    base = repo / "vllm/model_executor/layers/attention/mla_attention.py"
    (call,) = [
        n
        for n, text in enumerate(base.read_text().splitlines(), 1)
        if "decode_metadata = self._build_decode(" in text
    ]
    (repo / "src").mkdir()
    (repo / "vllm").rename(repo / "src" / "vllm")
    (repo / "tests").mkdir()
    site = tmp_path / "site-packages"
    shutil.copytree(repo / "src" / "vllm", site / "vllm")

    # Two whole-tree scans of ~3,600 files (about 20 s each on a quiet core).
    out = _run(site, repo / "tests", "--since-merge-base", "main", timeout=1200)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"checking {site.resolve() / 'vllm'} (import vllm)" in out.stderr
    where = f"vllm/v1/attention/backends/mla/rocm_aiter_mla.py:{line}:5: HO101 renamed-parameter"
    assert where in out.stdout
    assert f"call:     vllm/model_executor/layers/attention/mla_attention.py:{call}: " in out.stdout
    assert out.stdout.count("severity: error") == 1  # the rename, nothing vLLM already had
