"""gsm8k splits: generated, or read from a local copy in either published layout; bad input is a
clean error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.eval.data import load_gsm8k

RECORD = {"question": "What is 2+3?", "answer": "2+3 = <<2+3=5>>5\n#### 5"}


def _jsonl(path: Path, records: list[dict[str, str]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def test_generated_splits_have_gsm8k_sizes_and_are_cached() -> None:
    data = load_gsm8k(None, 0)
    assert (len(data.train), len(data.test)) == (7473, 1319)
    assert load_gsm8k(None, 0) is data
    assert data.source == "generated:seed=0"
    dataset = data.dataset_dict(extra="ignored")
    assert dataset["test"][0] == data.test[0]


def test_reads_grade_school_math_jsonl(tmp_path: Path) -> None:
    _jsonl(tmp_path / "train.jsonl", [RECORD] * 3)
    _jsonl(tmp_path / "test.jsonl", [RECORD])
    data = load_gsm8k(str(tmp_path))
    assert data.test == (RECORD,) and len(data.train) == 3
    assert data.tokenizer.decode(data.tokenizer.encode("What is 2+3?")[1:]) == "What is 2+3?"


def test_reads_hugging_face_parquet_layout(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "main").mkdir()
    for split, n in (("train", 2), ("test", 4)):
        table = pa.Table.from_pylist([{**RECORD, "extra": 1}] * n)
        pq.write_table(table, tmp_path / "main" / f"{split}-00000-of-00001.parquet")
    data = load_gsm8k(str(tmp_path))
    assert len(data.train) == 2 and len(data.test) == 4
    assert data.test[0] == RECORD  # extra columns are dropped


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"train.jsonl": [RECORD]}, "no test split"),
        ({"train.jsonl": [RECORD], "test.jsonl": []}, "the test split is empty"),
        ({"train.jsonl": [RECORD], "test.jsonl": [{"question": "q"}]}, "'answer' must be a string"),
        (
            {"train.jsonl": [RECORD], "test.jsonl": [{"question": "q", "answer": "no marker"}]},
            "does not end with '#### N'",
        ),
    ],
)
def test_bad_local_data_is_a_clean_error(
    tmp_path: Path, files: dict[str, list[dict[str, str]]], message: str
) -> None:
    for name, records in files.items():
        _jsonl(tmp_path / name, records)
    with pytest.raises(HarnessError, match=message):
        load_gsm8k(str(tmp_path))


def test_not_json_and_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "train.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(HarnessError, match=r"train.jsonl:1: not JSON"):
        load_gsm8k(str(tmp_path))
    with pytest.raises(HarnessError, match="not a directory"):
        load_gsm8k(str(tmp_path / "missing"))


def test_a_file_that_is_not_utf8_or_unreadable_is_a_clean_error(tmp_path: Path) -> None:
    _jsonl(tmp_path / "test.jsonl", [RECORD])
    train = tmp_path / "train.jsonl"
    train.write_bytes(json.dumps(RECORD).encode() + b"\n" + b'{"question": "\xff\xfe"}\n')
    with pytest.raises(HarnessError, match=r"train.jsonl:2: not UTF-8 text \(byte 0xff"):
        load_gsm8k(str(tmp_path))
    train.unlink()
    train.mkdir()  # a directory where the file should be
    (train / "x").write_text("")
    with pytest.raises(HarnessError, match=r"no train split"):
        load_gsm8k(str(tmp_path))
