"""The batch prefetch process hands the trainer exactly the batches, and the sampler
states after them, that drawing from the same sampler in the trainer's process gives:
what makes a resumed run equal an uninterrupted one."""

from __future__ import annotations

import torch

from runtime.config import V41Config
from runtime.tokenizer import ByteTokenizer
from training.batches import BatchSampler, Prefetcher


def _sampler() -> BatchSampler:
    tokenizer = ByteTokenizer(vocab_size=V41Config.preset("testbed").vocab_size)
    return BatchSampler({"testbed_lookup": 1.0, "testbed_arith": 2.0}, (512, 1024), 2048, 7, tokenizer)


def test_prefetched_batches_equal_the_sequential_draws():
    sequential, feed = _sampler(), Prefetcher(_sampler(), depth=2)
    try:
        for _ in range(6):
            want = sequential.next_batch()
            got, state = feed.next()
            assert torch.equal(got.tokens, want.tokens) and torch.equal(got.labels, want.labels)
            assert torch.equal(got.task, want.task) and got.real_tokens == want.real_tokens
            assert got.tokens.dtype == torch.int64
            assert state == sequential.state()  # the state after this batch, for a resume
    finally:
        feed.close()


def test_a_sampler_restored_from_a_prefetched_state_continues_the_stream():
    feed = Prefetcher(_sampler(), depth=4)
    try:
        for _ in range(3):
            _, state = feed.next()
    finally:
        feed.close()
    resumed, straight = _sampler(), _sampler()
    resumed.restore(state)
    for _ in range(3):
        straight.next_batch()
    assert torch.equal(resumed.next_batch().tokens, straight.next_batch().tokens)
