"""KVSnapshots' keep/restore decisions, against an in-memory cache (the real llama.cpp cache is
exercised by tests/backbones/test_local.py)."""

from __future__ import annotations

from runtime.backbones.llama.kv_snapshots import KVSnapshot, KVSnapshots


class MemoryKV:
    """A KV cache that holds tokens; its serialised state is one byte per token."""

    def __init__(self, *, refuse_restore: bool = False) -> None:
        self.tokens: list[int] = []
        self.refuse_restore = refuse_restore
        self.saves = 0

    def held_tokens(self) -> list[int]:
        return list(self.tokens)

    def save(self) -> KVSnapshot | None:
        self.saves += 1
        return KVSnapshot(tuple(self.tokens), bytes(len(self.tokens)))

    def restore(self, snapshot: KVSnapshot) -> bool:
        if self.refuse_restore:
            self.tokens = []
            return False
        self.tokens = list(snapshot.tokens)
        return True

    def call(self, store: KVSnapshots, prompt: list[int]) -> int:
        """One model call: the store prepares, then the prompt replaces the cache. Returns the
        tokens that had to be prefilled."""
        store.prepare(self, prompt)
        shared = 0
        for held, wanted in zip(self.tokens, prompt, strict=False):
            if held != wanted:
                break
            shared += 1
        self.tokens = list(prompt)
        return len(prompt) - shared


def history(length: int, start: int = 0) -> list[int]:
    return list(range(start, start + length))


def test_a_deep_prompt_kept_before_an_unrelated_call_serves_a_shallower_one() -> None:
    store = KVSnapshots(10_000, min_discard=100, min_gain=50)
    cache = MemoryKV()
    trunk = history(2000)
    assert cache.call(store, trunk) == 2000
    assert cache.call(store, history(500, start=90_000)) == 500  # a summary call
    assert len(store) == 1
    assert cache.call(store, [*trunk[:1200], -1, -2]) == 2  # a probe of an earlier state


def test_small_discards_are_not_kept() -> None:
    store = KVSnapshots(10_000, min_discard=100, min_gain=50)
    cache = MemoryKV()
    state = history(1000)
    cache.call(store, state + [-1] * 40)
    cache.call(store, state + [-2] * 40)  # the next probe of the same state
    assert cache.saves == 0 and len(store) == 0


def test_the_live_cache_is_kept_when_it_beats_every_copy() -> None:
    store = KVSnapshots(10_000, min_discard=100, min_gain=50)
    cache = MemoryKV()
    cache.call(store, history(1000))
    cache.call(store, history(300, start=50_000))
    prompt = [*history(300, start=50000), 7, 8]
    assert cache.call(store, prompt) == 2  # the live cache already serves it


def test_a_copy_must_save_min_gain_tokens_over_the_live_cache() -> None:
    store = KVSnapshots(10_000, min_discard=100, min_gain=50)
    cache = MemoryKV()
    cache.call(store, history(1000))
    cache.call(store, history(980) + history(200, start=70_000))
    # the kept copy shares 990, the live cache 980: not worth a restore
    assert cache.call(store, [*history(990), -1]) == 11


def test_copies_are_evicted_least_recently_used_within_capacity() -> None:
    store = KVSnapshots(2500, min_discard=100, min_gain=50)
    cache = MemoryKV()
    a, b, c = history(1000), history(1000, start=10_000), history(1000, start=20_000)
    for prompt in (a, b, c, history(10, start=30_000)):
        cache.call(store, prompt)
    assert store.size_bytes <= 2500
    assert cache.call(store, [*a, -1]) == 1001  # the oldest copy went first
    assert cache.call(store, [*c, -1]) == 1


def test_a_copy_larger_than_capacity_is_not_kept_and_zero_disables() -> None:
    cache = MemoryKV()
    store = KVSnapshots(500, min_discard=100, min_gain=50)
    cache.call(store, history(1000))
    cache.call(store, history(10, start=5000))
    assert len(store) == 0
    off, off_cache = KVSnapshots(0), MemoryKV()
    off_cache.call(off, history(1000))
    off_cache.call(off, history(10, start=5000))
    assert off_cache.saves == 0 and len(off) == 0


def test_a_copy_llama_cpp_refuses_is_dropped() -> None:
    store = KVSnapshots(10_000, min_discard=100, min_gain=50)
    cache = MemoryKV(refuse_restore=True)
    cache.call(store, history(1000))
    cache.call(store, history(10, start=5000))
    assert cache.call(store, history(1000)) == 1000
    assert len(store) == 0
