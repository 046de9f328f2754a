"""The serving sequence: chunked prefills, decodes, preemptions, arrivals, finished requests."""

from __future__ import annotations

import pytest

from harness.adapter.sequence import SequenceSpec, generate_sequence
from harness.errors import HarnessError


def test_the_default_sequence_exercises_every_kind_of_step() -> None:
    sequence = generate_sequence(SequenceSpec(num_steps=120))
    steps = sequence.steps
    assert len(steps) == 120
    assert sequence.num_preemptions > 0 and sequence.num_finished > 0
    assert any(s.scheduled_new_reqs for s in steps[10:])  # arrivals after the start
    assert any(any(c.resumed_from_preemption for c in s.scheduled_cached_reqs) for s in steps)
    chunked = [n for s in steps for n in s.num_scheduled_tokens.values() if n > 1]
    assert chunked and max(chunked) <= SequenceSpec().max_num_batched_tokens
    assert any(
        1 in s.num_scheduled_tokens.values() and len(set(s.num_scheduled_tokens.values())) > 1
        for s in steps
    )
    block_ids = [b for s in steps for r in s.scheduled_new_reqs for b in r.block_ids[0]]
    assert max(block_ids) < sequence.spec.num_blocks


def test_a_seed_replays_the_same_sequence() -> None:
    a = generate_sequence(SequenceSpec(seed=3, num_steps=30))
    b = generate_sequence(SequenceSpec(seed=3, num_steps=30))
    assert a.steps == b.steps
    assert a.steps != generate_sequence(SequenceSpec(seed=4, num_steps=30)).steps


def test_the_pool_scales_with_the_block_size() -> None:
    assert SequenceSpec(block_size=1).num_blocks == 1024
    assert SequenceSpec(block_size=64).num_blocks == 16
    with pytest.raises(HarnessError, match="cannot hold one request"):
        SequenceSpec(pool_tokens=256)
