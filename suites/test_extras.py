"""A command that needs a missing extra names it and exits 2; the extras table matches pyproject."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
from packaging.requirements import Requirement

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
    assert f"pip install 'harness[{extra}]'" in err
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
    metadata = importlib.metadata.metadata("harness")
    assert set(extras.EXTRA_MODULES) <= set(metadata.get_all("Provides-Extra") or [])
    modules_of: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(dist.lower().replace("_", "-"), set()).add(module)
    checked = 0
    for line in importlib.metadata.requires("harness") or []:
        requirement = Requirement(line)
        extra = _extra_of(requirement)
        name = requirement.name.lower().replace("_", "-")
        if extra is None or name == "harness" or name not in modules_of:
            continue  # not an engine/eval/gpu dependency, or not installed here
        mapped = {extras.extra_for_module(m) for m in modules_of[name]}
        assert extra in mapped, f"{requirement.name} ({extra}) provides {modules_of[name]}"
        checked += 1
    assert checked >= 5  # torch, numpy, rich, matplotlib, lm-eval (make install)
