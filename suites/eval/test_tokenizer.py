"""The local tokenizer: exact round trips, Llama 3's pre-token boundaries, stable ids."""

from __future__ import annotations

import pytest

from harness.eval.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    corpus = [
        "Question: Natalia sold 48 clips in April.\nAnswer: 48/2 = <<48/2=24>>24\n#### 72"
    ] * 3
    return Tokenizer.train(corpus)


@pytest.mark.parametrize(
    "text",
    [
        "Question: Natalia sold 48 clips in April.\nAnswer:",
        "unknown wörds ½ and émojis 🙂 fall back to bytes",
        "  leading spaces,\n\n\ttabs and 1234567 digits",
        "",
    ],
)
def test_decode_inverts_encode(tokenizer: Tokenizer, text: str) -> None:
    ids = tokenizer.encode(text, add_bos=False)
    assert tokenizer.decode(ids) == text
    assert all(0 <= i < tokenizer.vocab_size for i in ids)


def test_learnt_words_and_numbers_are_single_tokens(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode("Question: Natalia sold 1234 clips", add_bos=False)
    # Llama 3's split: words keep their leading space, digits go in runs of at most three.
    pieces = [tokenizer.decode([i]) for i in ids]
    assert pieces == ["Question", ":", " Natalia", " sold", " ", "123", "4", " clips"]


def test_bos_and_special_token_text(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode("hi")
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.encode(tokenizer.bos_token + "hi", add_bos=False) == ids
    text = "a" + tokenizer.eos_token
    assert tokenizer.encode(text, add_bos=False)[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(tokenizer.encode(text, add_bos=False)) == text


def test_same_corpus_same_ids_and_rare_words_stay_out() -> None:
    corpus = ["alpha beta beta gamma gamma gamma"]
    first, second = Tokenizer.train(corpus), Tokenizer.train(list(corpus))
    assert first.encode("gamma beta alpha") == second.encode("gamma beta alpha")
    assert first.vocab_size == second.vocab_size
    # "alpha" is seen once (min_count 2): it is spelt in bytes.
    assert len(first.encode("alpha", add_bos=False)) == len("alpha")
    assert len(first.encode(" gamma", add_bos=False)) == 1
