"""Primer for ``harness overrides``: run the checker on pinned releases of large projects and
diff its findings against ``golden/primer/<project>-<version>.json`` (as mypy_primer does).

Each project is a pinned wheel that ``pip download --no-deps`` fetches once into a cache
(``$HARNESS_PRIMER_CACHE``, default ``$XDG_CACHE_HOME/harness/primer``), keeping only its
``.py``/``.pyi`` files; torch and lm-eval are taken from the running interpreter's installed
copies. The checker runs through its CLI (``python -m harness.overrides --isolated --no-cache
--format json``) on each tree. A change in findings prints as ``+``/``-`` lines; a known true
positive that disappears (or stops being an error) is reported too. Then a table gives files,
seconds, errors and warnings per project. Exit status 1 when anything differs.

Not part of ``make test``: it needs the package index (about 1.1 GB of wheels the first time).
Usage::

    .venv/bin/python scripts/primer_overrides.py [--only NAME ...] [--update] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "golden" / "primer"
GENERATOR = "scripts/primer_overrides.py"
OWNER = "suites/overrides/test_primer.py::test_primer_golden_is_consistent[{slug}]"
"""The offline test that owns each primer golden (it checks the file's own consistency; the
run itself needs the package index, so it is not a test)."""


@dataclass(frozen=True)
class Known:
    """A finding kept in the golden on purpose, with the reason."""

    key: str
    """Prefix of the finding's golden line: ``path:line CODE severity Class.method``."""
    note: str


@dataclass(frozen=True)
class Project:
    """One primer entry."""

    name: str
    """Distribution name (``pip download`` spec) or installed package name."""
    version: str
    package: str
    """Top-level import package scanned (``vllm``, ``torch``)."""
    installed: bool = False
    """Take the copy installed in this interpreter (its version must match)."""
    args: tuple[str, ...] = ()
    """Extra checker options, as a project would put them in its ``pyproject.toml``."""
    known: tuple[Known, ...] = field(default=())

    @property
    def slug(self) -> str:
        return f"{self.name.lower()}-{self.version}"


_EXECUTE_MODEL = Known(
    "vllm/v1/worker/gpu_worker.py:{line} HO101 error vllm.v1.worker.gpu_worker.Worker.execute_model",
    "True positive: V1 Worker.execute_model renames V0's execute_model_req to scheduler_output; "
    "WorkerBase.start_worker_execution_loop calls self.execute_model(execute_model_req=None).",
)

PROJECTS: tuple[Project, ...] = (
    Project(
        "vllm",
        "0.8.5.post1",
        "vllm",
        known=(
            Known(
                _EXECUTE_MODEL.key.format(line=264),
                _EXECUTE_MODEL.note,
            ),
        ),
    ),
    Project(
        "vllm",
        "0.9.0",
        "vllm",
        known=(Known(_EXECUTE_MODEL.key.format(line=266), _EXECUTE_MODEL.note),),
    ),
    Project(
        "vllm",
        "0.33.0",
        "vllm",
        known=(
            Known(
                "vllm/model_executor/layers/rotary_embedding/ernie45_vl_rope.py:13 HO103 error "
                "vllm.model_executor.layers.rotary_embedding.ernie45_vl_rope."
                "Ernie4_5_VLRotaryEmbedding.forward_native",
                "True positive: Ernie4_5_VLRotaryEmbedding.forward_native drops 'offsets'; the "
                "inherited MRotaryEmbedding.forward_cpu passes it positionally, a crash on the CPU "
                "platform (hidden upstream by '# type: ignore[override]').",
            ),
        ),
    ),
    Project("transformers", "5.24.0", "transformers", args=("--extend-exclude", "modular_*.py")),
    Project("SQLAlchemy", "2.1.9", "sqlalchemy"),
    Project("Django", "5.2.19", "django"),
    Project("sympy", "1.14.0", "sympy"),
    # The precision slice (docs/precision.md): projects the checker was not developed against.
    Project(
        "twisted",
        "24.11.0",
        "twisted",
        known=(
            Known(
                "twisted/conch/endpoints.py:347 HO103 error twisted.conch.endpoints._UserAuth.getPassword",
                "True positive: a PASSWD_CHANGEREQ reply makes the inherited "
                "ssh_USERAUTH_PK_OK_password call self.getPassword(prompt); _UserAuth's takes none.",
            ),
            Known(
                "twisted/internet/unix.py:652 HO101 error twisted.internet.unix.ConnectedDatagramPort.write",
                "True positive: the inherited udp.Port.writeSequence(seq, addr) calls "
                "self.write(data, addr); ConnectedDatagramPort.write takes no addr.",
            ),
            Known(
                "twisted/trial/_asyncrunner.py:28 HO103 error twisted.trial._asyncrunner.TestSuite.run",
                "True positive: the inherited unittest.TestSuite.debug() calls self.run(debug, True).",
            ),
        ),
    ),
    Project("pandas", "2.2.3", "pandas"),
    Project("matplotlib", "3.9.2", "matplotlib"),
    Project("celery", "5.4.0", "celery"),
    Project("Sphinx", "8.1.3", "sphinx"),
    Project("Scrapy", "2.12.0", "scrapy"),
    Project("torch", "2.13.0", "torch", installed=True),
    Project("lm_eval", "0.4.13", "lm_eval", installed=True),
)


def cache_root() -> Path:
    """Where wheels and extracted trees live (never inside the repository)."""
    explicit = os.environ.get("HARNESS_PRIMER_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harness" / "primer"


def _safe_members(archive: zipfile.ZipFile) -> list[str]:
    out: list[str] = []
    for name in archive.namelist():
        parts = Path(name).parts
        if name.startswith("/") or ".." in parts or not name.endswith((".py", ".pyi")):
            continue
        out.append(name)
    return out


def ensure_tree(project: Project, cache: Path) -> Path:
    """The directory whose child ``project.package`` is the scanned package."""
    if project.installed:
        return _installed_tree(project)
    tree = cache / "src" / project.slug
    done = tree / ".complete"
    if done.exists():
        return tree
    downloads = cache / "dl"
    downloads.mkdir(parents=True, exist_ok=True)
    spec = f"{project.name}=={project.version}"
    wheels = _wheels(downloads, project)
    if not wheels:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary"]
        subprocess.run([*pip, ":all:", "-d", str(downloads), spec], check=True)
        wheels = _wheels(downloads, project)
    if not wheels:
        raise SystemExit(f"primer: pip downloaded no wheel for {spec}")
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    with zipfile.ZipFile(wheels[0]) as archive:
        archive.extractall(tree, members=_safe_members(archive))
    done.write_text(wheels[0].name + "\n", encoding="utf-8")
    return tree


def _wheels(downloads: Path, project: Project) -> list[Path]:
    stem = project.name.lower().replace("-", "_")
    return sorted(
        p
        for p in downloads.glob("*.whl")
        if p.name.lower().startswith(f"{stem}-{project.version}-")
    )


def _installed_tree(project: Project) -> Path:
    installed = importlib.metadata.version(project.name.replace("_", "-"))
    if installed.split("+")[0] != project.version:
        raise SystemExit(
            f"primer: {project.name} {installed} is installed, the golden is for {project.version}"
        )
    spec = importlib.util.find_spec(project.package)  # a top-level name: nothing is imported
    if spec is None or spec.origin is None:
        raise SystemExit(f"primer: {project.package} is not installed")
    return Path(spec.origin).parent.parent


@dataclass
class Outcome:
    """One project's run."""

    project: Project
    files: int
    seconds: float
    findings: list[dict[str, Any]]

    @property
    def errors(self) -> int:
        return sum(f["severity"] == "error" for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f["severity"] == "warning" for f in self.findings)


def run_checker(project: Project, tree: Path) -> Outcome:
    """Run the checker CLI on ``tree/project.package`` (from ``tree``, so paths are stable)."""
    command = [
        sys.executable,
        "-m",
        "harness.overrides",
        "--isolated",
        "--no-cache",
        "--format",
        "json",
        "--statistics",
        *project.args,
        project.package,
    ]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.stderr.write(done.stderr)
        raise SystemExit(f"primer: the checker failed on {project.slug} (exit {done.returncode})")
    files = 0
    for line in done.stderr.splitlines():
        if line.startswith("harness overrides:") and " files (" in line:
            files = int(line.split(":", 1)[1].split()[0])
    return Outcome(project, files, seconds, json.loads(done.stdout))


def _portable(path: str) -> str:
    """A path outside the scanned tree (the standard library, site-packages), written without
    where this interpreter is installed."""
    if not os.path.isabs(path):
        return path
    places = sysconfig.get_paths()
    for key, label in (
        ("purelib", "<site-packages>"),
        ("platlib", "<site-packages>"),
        ("stdlib", "<stdlib>"),
    ):
        root = places.get(key)
        if root and path.startswith(root.rstrip(os.sep) + os.sep):
            return f"{label}/{os.path.relpath(path, root)}"
    return f"<outside>/{os.path.basename(path)}"


def line_of(finding: dict[str, Any]) -> str:
    """One finding as one stable golden line."""
    subject = finding["class"] or ""
    if finding["method"]:
        subject += f".{finding['method']}"
    text = f"{finding['path']}:{finding['line']} {finding['code']} {finding['severity']} {subject}"
    if finding["params"]:
        text += f" ({','.join(finding['params'])})"
    evidence = finding.get("evidence")
    if evidence:
        text += f" <- {_portable(evidence['path'])}:{evidence['line']}"
    return text.rstrip()


def golden_path(project: Project) -> Path:
    return GOLDEN / f"{project.slug}.json"


def golden_data(outcome: Outcome) -> dict[str, Any]:
    """What a primer golden holds for one run."""
    project = outcome.project
    return {
        "generator": GENERATOR,
        "project": project.name,
        "version": project.version,
        "args": list(project.args),
        "summary": {"errors": outcome.errors, "warnings": outcome.warnings},
        "known_true_positives": [{"finding": k.key, "note": k.note} for k in project.known],
        "findings": sorted(line_of(f) for f in outcome.findings),
    }


def read_golden(project: Project) -> dict[str, Any] | None:
    """The data of the project's golden file, if there is one."""
    from harness.golden import parse

    path = golden_path(project)
    if not path.exists():
        return None
    data = parse(path.read_text(encoding="utf-8")).data
    return data if isinstance(data, dict) else None  # pyright: ignore[reportUnknownVariableType]


def write_golden(outcome: Outcome) -> None:
    from harness.golden import render

    GOLDEN.mkdir(parents=True, exist_ok=True)
    text = render(golden_data(outcome), test=OWNER.format(slug=outcome.project.slug))
    golden_path(outcome.project).write_text(text, encoding="utf-8")


def compare(outcome: Outcome) -> list[str]:
    """``+``/``-`` lines against the golden, plus problems with the known true positives."""
    project = outcome.project
    lines = sorted(line_of(f) for f in outcome.findings)
    problems: list[str] = []
    for known in project.known:
        if not any(line.startswith(known.key) for line in lines):
            problems.append(f"! known true positive missing: {known.key}")
    golden = read_golden(project)
    if golden is None:
        path = golden_path(project).relative_to(REPO)
        return [*problems, f"! no golden file {path} (run with --update)"]
    if golden.get("args") != list(project.args):
        problems.append(f"! golden was recorded with args {golden.get('args')}")
    old = set(golden["findings"])
    new = set(lines)
    problems.extend(f"- {line}" for line in sorted(old - new))
    problems.extend(f"+ {line}" for line in sorted(new - old))
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="projects (name or name-version)")
    parser.add_argument("--update", action="store_true", help="rewrite the golden files")
    parser.add_argument("--json", metavar="FILE", help="also write the summary table as JSON")
    args = parser.parse_args(argv)
    if args.update and os.environ.get("CI"):
        parser.error("golden files are never regenerated in CI")
    chosen = [
        p for p in PROJECTS if not args.only or p.name.lower() in args.only or p.slug in args.only
    ]
    cache = cache_root()
    changed = False
    rows: list[Outcome] = []
    for project in chosen:
        tree = ensure_tree(project, cache)
        outcome = run_checker(project, tree)
        rows.append(outcome)
        diff = compare(outcome)
        if args.update:
            write_golden(outcome)
            missing = [d for d in diff if d.startswith("! known")]
            for line in missing:
                print(f"{project.slug}: {line}")
            changed |= bool(missing)
            print(f"{project.slug}: golden written ({len(diff)} line(s) changed)")
        elif diff:
            changed = True
            print(f"--- {project.slug}")
            for line in diff:
                print(line)
    print()
    print(f"{'project':<24} {'files':>6} {'seconds':>8} {'errors':>7} {'warnings':>9}")
    for row in rows:
        print(
            f"{row.project.slug:<24} {row.files:>6} {row.seconds:>8.1f} "
            f"{row.errors:>7} {row.warnings:>9}"
        )
    if args.json:
        table = [
            {
                "project": r.project.slug,
                "files": r.files,
                "seconds": round(r.seconds, 2),
                "errors": r.errors,
                "warnings": r.warnings,
            }
            for r in rows
        ]
        Path(args.json).write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
