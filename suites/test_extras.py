"""A command that needs a missing extra names it and exits 2; the extras table matches pyproject.

The extras declare version ranges that admit vLLM 0.9.0's and 0.34.0's pins, our own exact pins
live in constraints.txt, and every install hint names our distribution, not the index's unrelated
``harness``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from harness import cli, extras


def _fake_command(error: BaseException) -> Callable[[Any], None]:
    def register(subparsers: Any) -> None:
        parser = subparsers.add_parser("needs-extra")

        def run(args: argparse.Namespace) -> int:
            raise error

        parser.set_defaults(func=run)

    return register


def _hide(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        return None if name in names else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize(
    ("module", "extra"),
    [("torch", "engine"), ("numpy.linalg", "engine"), ("lm_eval", "eval"), ("pynvml", "gpu")],
)
def test_a_missing_extra_is_named_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], module: str, extra: str
) -> None:
    _hide(monkeypatch, module.partition(".")[0])
    error = ModuleNotFoundError(f"No module named '{module}'", name=module)
    monkeypatch.setattr(cli, "_registrars", lambda: [_fake_command(error)])
    assert cli.main(["needs-extra"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error: ")
    assert f"pip install '{extras.DISTRIBUTION}[{extra}]'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "error",
    [
        ModuleNotFoundError("No module named 'torch._not_there'", name="torch._not_there"),
        ModuleNotFoundError("No module named 'harness.gone'", name="harness.gone"),
        ModuleNotFoundError("no name"),
    ],
    ids=["installed-package-broken", "not-an-extra", "no-name"],
)
def test_other_import_errors_are_not_disguised(
    monkeypatch: pytest.MonkeyPatch, error: ModuleNotFoundError
) -> None:
    # torch is installed in the dev venv: a missing submodule is a bug, not a missing extra.
    monkeypatch.setattr(cli, "_registrars", lambda: [_fake_command(error)])
    with pytest.raises(ModuleNotFoundError):
        cli.main(["needs-extra"])


def _extra_of(requirement: Requirement) -> str | None:
    for extra in extras.EXTRA_MODULES:
        if requirement.marker is not None and requirement.marker.evaluate({"extra": extra}):
            return extra
    return None


def test_the_table_covers_every_installed_extra_dependency() -> None:
    """Each extra in the table exists, and each installed dependency of an extra maps to it."""
    metadata = importlib.metadata.metadata(extras.DISTRIBUTION)
    assert set(extras.EXTRA_MODULES) <= set(metadata.get_all("Provides-Extra") or [])
    modules_of: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(dist.lower().replace("_", "-"), set()).add(module)
    checked = 0
    for line in importlib.metadata.requires(extras.DISTRIBUTION) or []:
        requirement = Requirement(line)
        extra = _extra_of(requirement)
        name = requirement.name.lower().replace("_", "-")
        if extra is None or name == extras.DISTRIBUTION or name not in modules_of:
            continue  # not an engine/eval/gpu dependency, or not installed here
        mapped = {extras.extra_for_module(m) for m in modules_of[name]}
        assert extra in mapped, f"{requirement.name} ({extra}) provides {modules_of[name]}"
        checked += 1
    assert checked >= 5  # torch, numpy, rich, matplotlib, lm-eval (make install)


ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pins(path: Path) -> dict[str, Version]:
    """``name==version`` lines of a constraints file (comments and blanks skipped)."""
    pins: dict[str, Version] = {}
    for line in path.read_text().splitlines():
        line = line.partition("#")[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[requirement.name.lower()] = Version(spec.version)
    return pins


def _extra_requirements() -> list[Requirement]:
    return [
        Requirement(line)
        for extra in extras.EXTRA_MODULES
        for line in PROJECT["optional-dependencies"][extra]
        if not line.startswith(extras.DISTRIBUTION)
    ]


def test_the_distribution_has_a_name_of_its_own() -> None:
    assert PROJECT["name"] == extras.DISTRIBUTION != "harness"
    assert PROJECT["scripts"] == {"harness": "harness.cli:main"}  # the command stays `harness`
    for extra in extras.EXTRA_MODULES:
        for line in PROJECT["optional-dependencies"][extra]:
            assert not line.startswith("harness["), f"{extra}: {line} names the index's harness"


def test_the_license_is_an_spdx_expression_the_build_backend_reads() -> None:
    """A TOML-table ``license`` made every build warn that it stops working in 2027 (issue 28);
    setuptools reads an SPDX string from 77 on (PEP 639)."""
    from packaging.licenses import canonicalize_license_expression

    license = PROJECT["license"]
    assert isinstance(license, str)
    assert canonicalize_license_expression(license) == license == "Apache-2.0"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (backend,) = [
        Requirement(r) for r in pyproject["build-system"]["requires"] if "setuptools" in r
    ]
    assert not backend.specifier.contains("76.1") and backend.specifier.contains("77.0")


def test_every_install_hint_names_our_distribution() -> None:
    stale = re.compile(r"""pip install ['"]?harness\[""")
    files = [ROOT / "README.md", *ROOT.glob("harness/**/*.py"), *ROOT.glob("scripts/*")]
    files += [*ROOT.glob("suites/**/*.py"), *ROOT.glob("docs/**/*.md")]
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in files
        if path.is_file() and path.suffix in (".py", ".md", ".sh", "")
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if stale.search(line) and "stale = re.compile" not in line
    ]
    assert offenders == []
    assert extras.install_hint("gpu").startswith(f"pip install '{extras.DISTRIBUTION}[gpu]'")


VLLM_CONSTRAINTS = sorted(ROOT.glob("ci/constraints-vllm-*.txt"))


def test_there_are_constraints_for_090_and_the_newest_release() -> None:
    assert [p.name for p in VLLM_CONSTRAINTS] == [
        "constraints-vllm-0.34.0.txt",
        "constraints-vllm-0.9.0.txt",
    ]


@pytest.mark.parametrize(
    "path", VLLM_CONSTRAINTS, ids=lambda p: p.stem.removeprefix("constraints-")
)
def test_the_extras_declare_ranges_that_admit_each_vllm_releases_pins(path: Path) -> None:
    vllm = _pins(path)
    version = path.stem.removeprefix("constraints-vllm-")
    assert vllm["vllm"] == Version(version)
    checked = set()
    for requirement in _extra_requirements():
        name = requirement.name.lower()
        assert all(s.operator != "==" for s in requirement.specifier), f"{requirement} is a pin"
        if name in vllm:
            assert requirement.specifier.contains(vllm[name]), (
                f"{requirement} excludes vLLM {version}'s {name}=={vllm[name]}"
            )
            checked.add(name)
    assert checked == {"torch", "numpy", "lm-eval", "flashinfer-python"}


@pytest.mark.parametrize(
    ("version", "pins"),
    [
        ("0.9.0", {"torch": "2.7.0", "flashinfer-python": "0.2.5", "numpy": "2.2.6"}),
        ("0.34.0", {"torch": "2.14.0", "flashinfer-python": "0.7.3", "numba": "0.65.0"}),
    ],
)
def test_the_constraints_hold_the_pins_vllm_declares(version: str, pins: dict[str, str]) -> None:
    """vLLM 0.9.0's requirements/cuda.txt and vLLM 0.34.0's wheel METADATA (Requires-Dist)."""
    held = _pins(ROOT / f"ci/constraints-vllm-{version}.txt")
    assert {name: str(held[name]) for name in pins} == pins


def test_the_oldest_torch_the_extras_admit_is_the_one_test_compat_runs_on() -> None:
    (torch,) = [r for r in _extra_requirements() if r.name == "torch"]
    oldest_tested = min(_pins(path)["torch"] for path in VLLM_CONSTRAINTS)
    assert oldest_tested == Version("2.7.0")
    assert torch.specifier.contains(oldest_tested) and not torch.specifier.contains("2.6.0")


def test_make_install_pins_exactly_through_the_constraints_file() -> None:
    pins = _pins(ROOT / "constraints.txt")
    assert pins["torch"] == Version("2.13.0")  # the CPU build on disk satisfies it: never CUDA
    for requirement in _extra_requirements():
        name = requirement.name.lower()
        if name in ("flashinfer-python", "nvidia-ml-py"):
            continue  # the gpu extra: beside a vLLM image's own (ci/install_beside.py)
        assert name in pins, f"constraints.txt does not pin {name}"
        assert requirement.specifier.contains(pins[name]), f"{requirement} excludes {pins[name]}"
    makefile = (ROOT / "Makefile").read_text()
    assert "CONSTRAINTS ?= constraints.txt" in makefile
    assert "pip install -q -c $(CONSTRAINTS) -e '.[$(EXTRAS)]'" in makefile
    assert "COMPAT_VLLM ?= 0.9.0 0.34.0" in makefile
    assert "constraints=ci/constraints-vllm-$$version.txt" in makefile
