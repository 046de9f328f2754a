"""``--regression NAME|MODULE:ATTR``: ids, the user's entries and backends, and every bad input."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.regressions import Regression, Variant, get_regression
from harness.regressions.resolve import (
    resolve_labelled_backend,
    resolve_regression,
    resolve_target,
)

USER_MODULE = """
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.backends.abstract import AttentionBackend
from suites.regressions.variants import entry

class MyBackend(FlashInferBackend):
    pass

class Half(AttentionBackend):
    @staticmethod
    def get_name() -> str:
        return "HALF"

class Junk(FlashInferBackend):
    @staticmethod
    def get_builder_cls():
        return 42

ENTRY = entry("user-entry")

def function():
    pass
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "user_variants.py"
    path.write_text(USER_MODULE)
    (tmp_path / "broken_variants.py").write_text("raise ValueError('boom at import')\n")
    (tmp_path / "plugin_variants.py").write_text("import plugin\n")  # a missing dependency
    monkeypatch.chdir(tmp_path)  # importable from the working directory, as `harness` finds it
    for name in ("user_variants", "broken_variants", "plugin_variants"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return path


def test_an_id_resolves_to_the_catalog_entry() -> None:
    assert resolve_regression("flashinfer-oom") is get_regression("flashinfer-oom")
    assert (
        resolve_labelled_backend("flashinfer-oom")[1]
        is get_regression("flashinfer-oom").buggy.backend
    )


@pytest.mark.usefixtures("user_module")
def test_module_attr_gives_the_users_entry_or_backend() -> None:
    target = resolve_target("user_variants:ENTRY")
    assert isinstance(target, Regression) and target.id == "user-entry"
    variant = resolve_target("user_variants:MyBackend")
    assert isinstance(variant, Variant) and issubclass(variant.backend, FlashInferBackend)
    assert resolve_labelled_backend("user_variants:MyBackend")[1] is variant.backend
    assert resolve_labelled_backend("user_variants:ENTRY")[1] is FlashInferBackend
    assert resolve_labelled_backend("user_variants:ENTRY") == ("user-entry", FlashInferBackend)
    assert resolve_labelled_backend("user_variants:MyBackend")[0] == "user_variants:MyBackend"


def test_a_file_path_works_too(user_module: Path) -> None:
    assert resolve_labelled_backend(f"{user_module}:MyBackend")[1].__name__ == "MyBackend"


@pytest.mark.usefixtures("user_module")
@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("no_such_module:X", r"cannot import no_such_module: no module named 'no_such_module' "),
        ("no_such.pkg.module:X", r"cannot import no_such.pkg.module: no module named 'no_such' "),
        (
            "plugin_variants:X",
            r"importing plugin_variants failed: ModuleNotFoundError: No module named 'plugin'$",
        ),
        ("broken_variants:X", r"importing broken_variants failed: ValueError: boom at import"),
        ("user_variants:Missing", r"user_variants has no attribute 'Missing'"),
        ("user_variants:function", r"is a function, not an AttentionBackend subclass"),
        ("user_variants:Half", r"Half is abstract \(define get_builder_cls"),
        ("user_variants:Junk", r"get_builder_cls\(\) returned 42"),
        ("./nowhere.py:X", r"no such file ./nowhere.py"),
        (":X", r"expected NAME or MODULE:ATTR"),
        ("nope", r"unknown regression 'nope'; available:"),
    ],
)
def test_bad_specs_are_clear_errors(spec: str, error: str) -> None:
    with pytest.raises(HarnessError, match=error):
        resolve_target(spec)


@pytest.mark.usefixtures("user_module")
def test_a_backend_is_not_an_entry_and_a_runner_entry_is_not_a_backend() -> None:
    with pytest.raises(HarnessError, match="is an attention backend, not a catalog entry"):
        resolve_regression("user_variants:MyBackend")
    with pytest.raises(HarnessError, match="perturbs the model runner"):
        resolve_labelled_backend("dummy-run-null-block")[1]


LAZY_MODULE = """
from harness.reference.backends.flashinfer import FlashInferBackend

class LazyBackend(FlashInferBackend):
    @staticmethod
    def helper_value():
        import lazy_helper  # imported when the variant runs, not when it is resolved
        return lazy_helper.VALUE
"""


@pytest.fixture
def clean_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sys.path`` and ``sys.modules`` restored after the test, whatever the resolver added."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("lazy_variants", "lazy_helper", "sibling_helper", "exit_variants", "json"):
        if name != "json":
            monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.mark.usefixtures("clean_path")
def test_a_lazy_import_in_the_users_module_finds_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "lazy_variants.py").write_text(LAZY_MODULE)
    (tmp_path / "lazy_helper.py").write_text("VALUE = 42\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    variant = resolve_target("lazy_variants:LazyBackend")
    assert isinstance(variant, Variant)
    assert variant.backend.helper_value() == 42  # type: ignore[attr-defined]


@pytest.mark.usefixtures("clean_path")
def test_a_file_path_makes_its_directory_importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "file_variants.py").write_text(
        "import sibling_helper\n" + LAZY_MODULE.replace("lazy_helper", "sibling_helper")
    )
    (work / "sibling_helper.py").write_text("VALUE = 7\n")
    monkeypatch.chdir(tmp_path)
    variant = resolve_target("./work/file_variants.py:LazyBackend")
    assert isinstance(variant, Variant)
    assert variant.backend.helper_value() == 7  # type: ignore[attr-defined]


@pytest.mark.usefixtures("clean_path")
def test_a_users_module_shadowed_by_an_imported_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "json.py").write_text(LAZY_MODULE)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HarnessError, match=r"json\.py here is shadowed by .*json") as caught:
        resolve_target("json:LazyBackend")
    assert "no attribute" not in str(caught.value)


@pytest.mark.usefixtures("clean_path")
@pytest.mark.parametrize("code", ["0", "3", "'bye'"])
def test_sys_exit_while_importing_the_users_module_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    (tmp_path / "exit_variants.py").write_text(f"import sys\nsys.exit({code})\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HarnessError, match=r"importing exit_variants failed: .*sys\.exit"):
        resolve_target("exit_variants:X")


@pytest.mark.usefixtures("user_module")
def test_a_variant_object_resolves_too() -> None:
    """``MODULE:ATTR`` may name a :class:`Variant` (what an entry holds), as the eval model took."""
    target = resolve_target("suites.regressions.variants:EXITING")
    assert isinstance(target, Variant) and target.backend.__name__ == "ExitingBackend"


@pytest.mark.usefixtures("clean_path")
def test_a_directory_or_a_syntax_error_is_named_for_what_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "syn_variants.py").write_text("def broken(:\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HarnessError, match=r"\./adir/ is a directory, not a \.py file"):
        resolve_target("./adir/:X")
    with pytest.raises(HarnessError) as caught:
        resolve_target("syn_variants:X")
    message = str(caught.value)
    assert "SyntaxError: invalid syntax (syn_variants.py, line 1)" in message
    assert "frozen" not in message
