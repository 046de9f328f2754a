"""gsm8k's train and test splits, offline: generated from a seed, or read from a local copy.

``load_gsm8k(None, seed)`` generates problems (:mod:`harness.eval.problems`); ``load_gsm8k(DIR)``
reads ``DIR/{train,test}.jsonl`` (``openai/grade-school-math``) or ``DIR/**/{train,test}-*.parquet``
(the Hugging Face ``openai/gsm8k`` layout). Nothing is downloaded or written; the splits are
in-memory ``datasets.Dataset`` objects, and :attr:`Gsm8kData.tokenizer` is learnt from train.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.eval.problems import make_split
from harness.eval.tokenizer import Tokenizer

SPLITS = ("train", "test")
TOKENIZER_TRAINING_EXAMPLES = 2000
"""The tokenizer's vocabulary is learnt from this many training examples (the first ones)."""

Record = dict[str, str]


@dataclass(frozen=True)
class Gsm8kData:
    """The two splits of one run and where they came from."""

    source: str
    """``generated:seed=<seed>`` or the directory the splits were read from."""
    train: tuple[Record, ...]
    test: tuple[Record, ...]

    def dataset_dict(self, **kwargs: Any) -> Any:
        """A ``datasets.DatasetDict`` of both splits; ignores ``kwargs`` (lm-eval's hook passes
        the task metadata)."""
        del kwargs
        import datasets as datasets_module

        datasets: Any = datasets_module  # no type information
        splits = {"train": self.train, "test": self.test}
        return datasets.DatasetDict(
            {k: datasets.Dataset.from_list(list(v)) for k, v in splits.items()}
        )

    @functools.cached_property
    def tokenizer(self) -> Tokenizer:
        """The run's tokenizer: lm-eval's prompt format over the first training examples."""
        examples = self.train[:TOKENIZER_TRAINING_EXAMPLES]
        texts = (f"Question: {r['question']}\nAnswer: {r['answer']}\n\n" for r in examples)
        return Tokenizer.train(texts)


@functools.lru_cache(maxsize=4)
def load_gsm8k(data_dir: str | None = None, seed: int = 0) -> Gsm8kData:
    """Generated splits for ``seed`` (``data_dir`` None) or the real ones from ``data_dir``; cached,
    so the task and the model of one run share one object (and tokenizer).
    """
    if data_dir is None:
        train, test = (tuple(asdict(p) for p in make_split(seed, s)) for s in SPLITS)
        return Gsm8kData(f"generated:seed={seed}", train, test)
    root = Path(data_dir)
    if not root.is_dir():
        raise HarnessError(f"--data {data_dir}: not a directory")
    train, test = (_read_split(root, split) for split in SPLITS)
    return Gsm8kData(str(root), train, test)


def _read_split(root: Path, split: str) -> tuple[Record, ...]:
    jsonl = root / f"{split}.jsonl"
    parquet = sorted(root.rglob(f"{split}-*.parquet"))
    if jsonl.is_file():
        records = _read_jsonl(jsonl)
    elif parquet:
        records = [r for path in parquet for r in _read_parquet(path)]
    else:
        raise HarnessError(
            f"--data {root}: no {split} split (expected {split}.jsonl, as in "
            f"openai/grade-school-math, or {split}-*.parquet, as in the openai/gsm8k dataset)"
        )
    if not records:
        raise HarnessError(f"--data {root}: the {split} split is empty")
    return tuple(_check(record, split, i) for i, record in enumerate(records))


def _read_jsonl(path: Path) -> list[Any]:
    try:
        raw_lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    records: list[Any] = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HarnessError(
                f"{path}:{number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                f"{exc.start + 1})"
            ) from None
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise HarnessError(f"{path}:{number}: not JSON ({exc.msg})") from None
    return records


def _read_parquet(path: Path) -> list[Any]:
    import pyarrow.parquet as parquet_module

    parquet: Any = parquet_module  # no type information
    try:
        table: Any = parquet.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise HarnessError(f"{path}: not a readable parquet file ({exc})") from None
    return list(table.to_pylist())


def _check(record: Any, split: str, index: int) -> Record:
    if not isinstance(record, dict):
        raise HarnessError(f"{split} example {index}: expected an object with question and answer")
    fields: dict[str, Any] = record  # pyright: ignore[reportUnknownVariableType]
    values: dict[str, Any] = {key: fields.get(key) for key in ("question", "answer")}
    for key, value in values.items():
        if not isinstance(value, str):
            raise HarnessError(f"{split} example {index}: {key!r} must be a string")
    if "#### " not in values["answer"]:
        raise HarnessError(f"{split} example {index}: the answer does not end with '#### N'")
    return values
