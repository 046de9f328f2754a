r"""A small word-level tokenizer built locally from text, never downloaded.

It counts tokens the way Llama 3 does for gsm8k text: Llama 3's pre-tokenising split
(:data:`LLAMA3_SPLIT_PATTERN`, ``meta-llama/llama3``'s ``pat_str`` for the standard ``re``), then a
vocabulary of whole pre-tokens learnt from a corpus; anything else becomes its UTF-8 bytes, so
``decode(encode(s)) == s``. Ids: 0-255 bytes, 256 BOS, 257 EOS, then two- and three-digit runs,
then the learnt pre-tokens, most frequent first (ties by text). ``docs/architecture.md`` says why.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

LLAMA3_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|(?:_|[^\r\n\w])?[^\W\d_]+|\d{1,3}|"
    r" ?(?:_|[^\s\w])+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
r"""Llama 3's pre-tokenisation expression (``pat_str`` in ``meta-llama/llama3``'s tokenizer.py),
with its ``\p{L}`` / ``\p{N}`` classes spelt for ``re``."""

BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|end_of_text|>"
NUM_BYTE_TOKENS = 256


class Tokenizer:
    """Bytes, BOS/EOS and whole-pre-token words; see the module docstring."""

    def __init__(self, words: Sequence[str]) -> None:
        self.bos_token = BOS_TOKEN
        self.eos_token = EOS_TOKEN
        self.bos_token_id = NUM_BYTE_TOKENS
        self.eos_token_id = NUM_BYTE_TOKENS + 1
        first_word = NUM_BYTE_TOKENS + 2
        self._id_to_bytes: list[bytes] = [bytes([b]) for b in range(NUM_BYTE_TOKENS)]
        self._id_to_bytes += [BOS_TOKEN.encode(), EOS_TOKEN.encode()]
        self._id_to_bytes += [w.encode() for w in words]
        self._word_to_id = {w: first_word + i for i, w in enumerate(words)}
        if len(self._word_to_id) != len(words):
            raise ValueError("tokenizer words must be distinct")
        self._split = re.compile(LLAMA3_SPLIT_PATTERN)
        self._special = re.compile(f"({re.escape(BOS_TOKEN)}|{re.escape(EOS_TOKEN)})")
        self._special_ids = {BOS_TOKEN: self.bos_token_id, EOS_TOKEN: self.eos_token_id}

    @classmethod
    def train(cls, texts: Iterable[str], *, max_words: int = 8192, min_count: int = 2) -> Tokenizer:
        """The ``max_words`` pre-tokens of ``texts`` seen at least ``min_count`` times, as words."""
        split = re.compile(LLAMA3_SPLIT_PATTERN)
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(split.findall(text))
        numbers = [str(n).zfill(width) for width in (2, 3) for n in range(10**width)]
        common = {w for w, n in counts.items() if n >= min_count and len(w.encode()) > 1}
        ranked = sorted(common - set(numbers), key=lambda w: (-counts[w], w))
        return cls(numbers + ranked[:max_words])

    @property
    def vocab_size(self) -> int:
        return len(self._id_to_bytes)

    def encode(self, text: str, *, add_bos: bool = True) -> list[int]:
        """Token ids of ``text``; BOS first when ``add_bos``. Special-token text maps to its id."""
        ids = [self.bos_token_id] if add_bos else []
        for i, chunk in enumerate(self._special.split(text)):
            if i % 2:  # a special token matched by the capturing split
                ids.append(self._special_ids[chunk])
                continue
            for piece in self._split.findall(chunk):
                word_id = self._word_to_id.get(piece)
                if word_id is not None:
                    ids.append(word_id)
                else:
                    ids.extend(piece.encode())
        return ids

    def token_bytes(self, token_id: int) -> bytes:
        """The UTF-8 bytes of one token (a byte token may be part of a multi-byte character)."""
        return self._id_to_bytes[token_id]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids`` (invalid UTF-8, e.g. a cut multi-byte character, becomes U+FFFD)."""
        return b"".join(self._id_to_bytes[i] for i in ids).decode("utf-8", errors="replace")
