"""The package stays in rooms a reader can hold: short module docstrings, no very long files.

A module docstring says what the module is for in at most 15 lines (design reasoning lives in
the area docs under ``docs/``). A rule module's docstring is exempt: it is that rule's
documentation, printed by ``harness overrides --explain`` in fixed sections, as ruff documents
its rules.
One test reads every module and lists every offender at once.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "harness"
MAX_DOCSTRING_LINES = 15
MAX_FILE_LINES = 700


def _is_rule_doc(path: Path) -> bool:
    return path.parent.name == "rules" and path.name.startswith("ho")


def layout_offences(path: Path, package: Path = PACKAGE) -> list[str]:
    """What is wrong with one module's layout, one sentence each (empty when nothing is)."""
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(package).as_posix()
    offences: list[str] = []
    lines = len(text.splitlines())
    if lines > MAX_FILE_LINES:
        offences.append(f"{name}: {lines} lines (at most {MAX_FILE_LINES})")
    doc = ast.get_docstring(ast.parse(text), clean=False)
    if doc is not None and not _is_rule_doc(path):
        doc_lines = len(doc.strip().splitlines())
        if doc_lines > MAX_DOCSTRING_LINES:
            offences.append(
                f"{name}: module docstring has {doc_lines} lines (at most {MAX_DOCSTRING_LINES})"
            )
    return offences


def test_every_module_is_short_with_a_short_docstring() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100
    offences = [offence for path in modules for offence in layout_offences(path)]
    assert not offences, "\n".join(offences)


def test_the_layout_check_bites(tmp_path: Path) -> None:
    package = tmp_path / "harness"
    (package / "overrides" / "rules").mkdir(parents=True)
    long_doc = '"""' + "line\n" * (MAX_DOCSTRING_LINES + 1) + '"""\n'
    (package / "long_doc.py").write_text(long_doc, encoding="utf-8")
    (package / "overrides" / "rules" / "ho999_rule.py").write_text(long_doc, encoding="utf-8")
    (package / "long_file.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1), encoding="utf-8")
    found = [o for p in sorted(package.rglob("*.py")) for o in layout_offences(p, package)]
    assert found == [
        f"long_doc.py: module docstring has {MAX_DOCSTRING_LINES + 1} lines (at most 15)",
        f"long_file.py: {MAX_FILE_LINES + 1} lines (at most {MAX_FILE_LINES})",
    ]
