"""scripts/bench_side_by_side.py: what each round runs, and the table it prints."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_side_by_side.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_side_by_side", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_changed_file_is_the_vllm_backend_else_the_largest(
    bench: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "a.py").write_text("x = 1\n" * 10)
    (tmp_path / "b.py").write_text("x = 1\n")
    assert bench.changed_file(tmp_path, None) == "a.py"
    assert bench.changed_file(tmp_path, "b.py") == "b.py"
    with pytest.raises(SystemExit, match="is not a file"):
        bench.changed_file(tmp_path, "missing.py")
    backend = tmp_path / bench.VLLM_CHANGED
    backend.parent.mkdir(parents=True)
    backend.write_text("")
    assert bench.changed_file(tmp_path, None) == bench.VLLM_CHANGED


def test_a_round_times_the_parse_then_each_checker_cold_warm_and_changed(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[tuple[list[str], Path, dict[str, str]]] = []

    def timed(
        cmd: list[str], cwd: Path, env: dict[str, str], *, check: bool = True
    ) -> tuple[float, float, str, int]:
        ran.append((list(cmd), cwd, env))
        return 1.0 + len(ran), 0.5, "0.25\n" if "-c" in cmd else "[]", 1024 * len(ran)

    monkeypatch.setattr(bench, "timed", timed)
    roots = {"before": tmp_path / "before", "after": tmp_path / "after"}
    trees = {(label, e): tmp_path / f"t-{label}-{e}" for label in roots for e in bench.ENTRY_POINTS}
    trees["ty", "tool"] = tmp_path / "t-ty"
    for tree in trees.values():
        (tree / "pkg").mkdir(parents=True)
        (tree / "pkg" / "m.py").write_text("x = 1\n")
    args = argparse.Namespace(jobs=2, skip_codec=False, keep_installed=False)
    best = bench.Best()
    bench.one_round(0, roots, trees, tmp_path, {}, args, "pkg/m.py", best, {"ty": ["ty", "check"]})
    commands = [cmd for cmd, _, _ in ran]
    assert commands[0][1] == "-c"  # the serial parse first
    assert commands[1] == ["ty", "check", "."] and ran[1][1] == trees["ty", "tool"]
    checker = [c for c in commands[2:] if "-c" not in c]
    assert len(checker) == 2 * 2 * 3  # before/after x -m/CLI x cold/warm/--changed
    for cold, warm, changed in zip(checker[::3], checker[1::3], checker[2::3], strict=True):
        assert "--jobs" in cold and cold[-1] == "." and warm[-1] == "."
        assert changed[-3:] == [".", "--changed", "pkg/m.py"]  # the path is no changed file
    assert all(
        t.joinpath("pkg/m.py").read_text().endswith("# bench edit 0\n")
        for key, t in trees.items()
        if key[1] != "tool"
    )
    envs = [env for cmd, _, env in ran[2:] if "-c" not in cmd]
    assert {env["PYTHONPATH"] for env in envs} == {str(roots["before"]), str(roots["after"])}
    assert ("before", "codec") in best.seconds and ("parse", "parse cpu") in best.seconds
    assert ("ty", "tool") in best.seconds and set(best.peak_kib) == {"ty", "before", "after"}


def test_the_table_gives_after_over_before_and_both_over_the_serial_parse(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    best = bench.Best()
    best.add("parse", "parse", 2.0)
    best.add("parse", "parse cpu", 1.0)
    best.add("before", "cold -m", 3.0, "[1]")
    best.add("after", "cold -m", 2.4, "[2]")
    best.add("before", "cold cpu -m", 4.0)
    best.add("after", "cold cpu -m", 3.0)
    best.add("ty", "tool", 3.0)
    best.add("ty", "tool cpu", 2.0)
    best.peak("ty", 2048)
    best.peak("after", 1024)
    args = argparse.Namespace(
        before="3b5bad4", after=None, tree=None, repeat=3, keep_installed=True, tools=["ty"]
    )
    bench.report(best, args, 802, "pkg/m.py")
    out = capsys.readouterr().out
    (cold,) = [line for line in out.splitlines() if line.startswith("cold, python -m harness")]
    assert cold.split()[-5:] == ["3.000", "2.400", "0.800x", "1.500x", "1.200x"]
    (cpu,) = [line for line in out.splitlines() if line.startswith("cold, python -m, CPU")]
    assert cpu.split()[-2:] == ["4.000x", "3.000x"]  # over the parse's CPU time
    assert "note: cold -m: before and after printed different findings" in out
    assert "summaries: kept warm" in out
    assert "warm (" not in out and "codec" not in out  # rows not measured are left out
    (ty,) = [line for line in out.splitlines() if line.startswith("ty, cold, wall")]
    assert ty.split()[-6:] == ["3.000", "1.500x", "after", "/", "ty:", "0.800x"]
    assert "ty 2 MiB" in out and "after 1 MiB" in out
