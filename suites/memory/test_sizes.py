"""harness.memory.sizes: parsing human sizes and printing them exactly as torch does."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.memory.sizes import GiB, KiB, MiB, TiB, format_size, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("64 MiB", 64 * MiB),
        ("64MiB", 64 * MiB),
        ("64 mib", 64 * MiB),
        ("2 GiB", 2 * GiB),
        ("1 TiB", TiB),
        ("3 KiB", 3 * KiB),
        ("512 B", 512),
        ("512", 512),
        ("1.5 KiB", 1536),
        (".5 GiB", GiB // 2),
        ("2 GB", 2_000_000_000),
        ("64 MB", 64_000_000),
        ("1 KB", 1000),
        ("1 TB", 10**12),
        ("  7 gb ", 7 * 10**9),
        (4096, 4096),
    ],
)
def test_parse_size(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "64 MiBs", "-1 MiB", "1e3", "64 Mi B", "1.2.3 GB"])
def test_parse_size_rejects_bad_text_with_a_clear_error(text: str) -> None:
    with pytest.raises(HarnessError, match="invalid size") as info:
        parse_size(text)
    assert "MiB" in str(info.value)  # the message says what is accepted


@pytest.mark.parametrize("value", [-1, True])
def test_parse_size_rejects_negative_and_bool(value: int) -> None:
    with pytest.raises(HarnessError):
        parse_size(value)


@pytest.mark.parametrize(
    ("num_bytes", "expected"),
    [
        (0, "0 bytes"),
        (1024, "1024 bytes"),  # torch's boundaries are inclusive: <= 1024 prints bytes
        (1025, "1.00 KiB"),
        (1536, "1.50 KiB"),
        (MiB, "1024.00 KiB"),
        (MiB + 1, "1.00 MiB"),
        (GiB, "1024.00 MiB"),
        (95 * GiB, "95.00 GiB"),
        (2_277_507_072, "2.12 GiB"),
        (4_831_838_208, "4.50 GiB"),
    ],
)
def test_format_size_matches_torch(num_bytes: int, expected: str) -> None:
    assert format_size(num_bytes) == expected
