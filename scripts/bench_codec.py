"""Time the summary codec of another commit against this checkout's, in one process.

``--before REF``'s ``harness/overrides/codec.py`` is loaded beside this checkout's codec (it
must import from this checkout's modules). Every file of ``TREE`` is summarised once; then,
in alternating turns for ``--repeat`` rounds, each codec encodes every summary and decodes
every blob with all deferred parts. Both must write the same bytes. Prints the best CPU
seconds (``time.process_time``) of each and the ratio; it never asserts on speed. Usage::

    .venv/bin/python scripts/bench_codec.py TREE [--before REF] [--repeat N]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from harness.overrides import codec
from harness.overrides.discover import discover
from harness.overrides.summary import FileSummary, summarize

ROOT = Path(__file__).resolve().parent.parent


def load_codec(ref: str, scratch: Path) -> ModuleType:
    """``ref``'s codec module, loaded under the name ``codec_before``."""
    source = subprocess.run(
        ["git", "show", f"{ref}:harness/overrides/codec.py"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    path = scratch / "codec_before.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("codec_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("tree", help="directory of Python files to summarise")
    parser.add_argument("--before", default="HEAD", help="git ref of the 'before' codec")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="harness-bench-codec-") as scratch:
        before = load_codec(args.before, Path(scratch))
    files, _ = discover([args.tree])
    summaries = [summarize(Path(f.path).read_bytes()) for f in files]
    codecs = {"before": before, "after": codec}
    blobs = {label: [m.dumps(s) for s in summaries] for label, m in codecs.items()}
    if blobs["before"] != blobs["after"]:
        print("bench: the two codecs write different bytes", file=sys.stderr)

    def encode(m: ModuleType) -> None:
        for s in summaries:
            m.dumps(s)

    def decode(m: ModuleType, label: str) -> None:
        for blob in blobs[label]:
            back: FileSummary = m.loads(blob)
            _ = back.calls
            for c in back.classes:
                _ = c.methods, c.calls

    best: dict[tuple[str, str], float] = {}
    for i in range(args.repeat):
        for label in ("before", "after") if i % 2 else ("after", "before"):
            m = codecs[label]
            rows: tuple[tuple[str, Callable[[], None]], ...] = (
                ("encode", lambda m=m: encode(m)),
                ("decode + deferred parts", lambda m=m, label=label: decode(m, label)),
            )
            for row, run in rows:
                started = time.process_time()
                run()
                seconds = time.process_time() - started
                best[label, row] = min(seconds, best.get((label, row), seconds))
    print(f"{len(summaries)} files of {args.tree}; before = {args.before}, after = working tree")
    print(f"best of {args.repeat} rounds in alternating turns, CPU seconds")
    for row in ("encode", "decode + deferred parts"):
        b, a = best["before", row], best["after", row]
        print(f"{row:<26} before {b:.4f}  after {a:.4f}  after/before {a / b:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
