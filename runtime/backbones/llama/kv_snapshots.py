"""Copies of the embedded model's KV cache, kept when a call would throw much of it away.

Above: ``LlamaRunner`` (``runtime/backbones/llama/child.py``, in the worker process), which
asks before every call whether to keep the cache it holds and whether a kept copy serves the
new prompt better. Below: llama.cpp's per-sequence state calls (``llama_state_seq_get_data`` /
``llama_state_seq_set_data``), reached only through the runner's ``KVCache`` adapter.

llama.cpp keeps one KV cache: a prompt that shares a prefix with the previous call reuses it,
anything else overwrites it. A run alternates between prompts that share long prefixes with
calls made minutes earlier: a deep trunk prompt, then a compaction summary, then probes of a
shallower state whose history is a prefix of that trunk prompt. Keeping a copy of the cache
whenever a call would discard at least ``min_discard`` of its tokens, and restoring the copy
that shares the longest prefix with a prompt, turns those re-reads into a memory copy
(a 7,144-token SmolLM2 cache: 157 MB, kept in 0.16 s, restored in 0.1 s, versus 44 s of
prefill; ``benchmarks/bench_backbones.py --sections snapshots``). Copies are evicted least
recently used first, within ``capacity_bytes``.

A restored copy holds the values earlier calls computed, and they are the ones a cold prefill
computes: the runner evaluates prompts by ``runtime/backbones/llama/prefill.py``'s rule (no
batch of a single token; a reply's entries, decoded one token at a time, dropped once it is
returned), under which llama.cpp gives the same bits however a prompt was split into batches.
So the live cache and every copy hold only prompt tokens, and a reply does not depend on
whether it came from a copy, the live cache or a cold prefill, nor on which calls came before
(tests/backbones/test_prefill_real.py compares the caches bit for bit). Before that rule,
reused entries of decoded replies made 16 of 96 SmolLM2 replies of the default ``mirage run``
differ from a run without copies.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

# A copy is worth keeping when the call would discard this many of the cache's tokens: a
# probe's question and reply (a few hundred tokens) is not, a trunk history is.
MIN_DISCARD_TOKENS = 512
# A kept copy replaces the live cache only when it saves this many more tokens of prefill
# than the live cache does: restoring costs a copy of the whole state.
MIN_GAIN_TOKENS = 256
DEFAULT_CAPACITY_BYTES = 1 << 30


def common_prefix_length(left: tuple[int, ...] | list[int], right: list[int]) -> int:
    length = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        length += 1
    return length


@dataclass(frozen=True)
class KVSnapshot:
    tokens: tuple[int, ...]  # what the cache held, in order
    state: bytes  # llama.cpp's serialised sequence state


class KVCache(Protocol):
    """The live cache, as the snapshot store sees it."""

    def held_tokens(self) -> list[int]: ...

    def save(self) -> KVSnapshot | None: ...

    def restore(self, snapshot: KVSnapshot) -> bool: ...


@dataclass(frozen=True)
class Decision:
    kept: bool  # the live cache was copied before the call
    restored: int  # prefix tokens a restored copy shares with the prompt (0: none restored)


class KVSnapshots:
    """Kept copies, least recently used first, within ``capacity_bytes``."""

    def __init__(
        self,
        capacity_bytes: int = DEFAULT_CAPACITY_BYTES,
        *,
        min_discard: int = MIN_DISCARD_TOKENS,
        min_gain: int = MIN_GAIN_TOKENS,
    ) -> None:
        self.capacity_bytes = capacity_bytes
        self.min_discard = min_discard
        self.min_gain = min_gain
        self._kept: OrderedDict[tuple[int, ...], KVSnapshot] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def size_bytes(self) -> int:
        return sum(len(snapshot.state) for snapshot in self._kept.values())

    def prepare(self, cache: KVCache, prompt: list[int]) -> Decision:
        """Before a call on ``prompt``: keep the live cache if the call would discard much of
        it, then restore the kept copy that shares the most with ``prompt`` if it beats the
        live cache by ``min_gain`` tokens."""
        held = cache.held_tokens()
        live = common_prefix_length(held, prompt)
        kept = False
        if self.capacity_bytes > 0 and len(held) - live >= self.min_discard:
            snapshot = cache.save()
            kept = snapshot is not None and self._add(snapshot)
        best, shared = self._best(prompt)
        if best is None or shared < live + self.min_gain:
            return Decision(kept=kept, restored=0)
        if not cache.restore(best):
            del self._kept[best.tokens]  # llama.cpp refused it: never offer it again
            return Decision(kept=kept, restored=0)
        self._kept.move_to_end(best.tokens)
        return Decision(kept=kept, restored=shared)

    def _add(self, snapshot: KVSnapshot) -> bool:
        if len(snapshot.state) > self.capacity_bytes:
            return False
        self._kept.pop(snapshot.tokens, None)
        self._kept[snapshot.tokens] = snapshot
        while self.size_bytes > self.capacity_bytes:
            self._kept.popitem(last=False)
        return True

    def _best(self, prompt: list[int]) -> tuple[KVSnapshot | None, int]:
        best: KVSnapshot | None = None
        best_shared = 0
        for snapshot in self._kept.values():
            shared = common_prefix_length(snapshot.tokens, prompt)
            if shared > best_shared:
                best, best_shared = snapshot, shared
        return best, best_shared
