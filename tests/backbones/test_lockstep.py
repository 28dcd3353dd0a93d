"""``LockstepGroup``: a batch goes out when every running member waits on a call, in member
order, so which calls share a batch never depends on timing."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import pytest

from runtime.backbones.lockstep import LockstepGroup, current_member


class Recorder:
    """A batch call that answers each request with the batch it went out in."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def __call__(self, requests: Sequence[object]) -> list[object]:
        batch = [str(request) for request in requests]
        self.batches.append(batch)
        return [f"{request}@{len(self.batches)}" for request in batch]


async def member_turn(
    group: LockstepGroup, key: str, calls: int, call: Recorder, pause: float
) -> list[str]:
    replies = []
    with group.member(key):
        await asyncio.sleep(pause)  # restoring, rendering: arrives at its own time
        for index in range(calls):
            member = current_member()
            assert member is not None
            replies.append(await member.submit(call, f"{key}:{index}"))
            await asyncio.sleep(pause / 2)  # a tool call between the rounds
    assert current_member() is None
    return replies


def run_group(turns: dict[str, int], seed: int) -> tuple[list[list[str]], dict[str, list[str]]]:
    pauses = random.Random(seed)

    async def main() -> tuple[list[list[str]], dict[str, list[str]]]:
        group, call = LockstepGroup(turns), Recorder()
        keys = list(turns)
        pauses.shuffle(keys)
        results = await asyncio.gather(
            *(member_turn(group, k, turns[k], call, pauses.random() / 50) for k in keys)
        )
        return call.batches, dict(zip(keys, results, strict=True))

    return asyncio.run(main())


def test_batches_are_rounds_in_member_order_whatever_the_timing() -> None:
    turns = {"a": 1, "b": 3, "c": 2, "d": 1}
    batches, replies = run_group(turns, seed=0)
    assert batches == [["a:0", "b:0", "c:0", "d:0"], ["b:1", "c:1"], ["b:2"]]
    assert replies["b"] == ["b:0@1", "b:1@2", "b:2@3"]
    for seed in range(1, 6):  # other arrival orders and pauses: the same batches
        assert run_group(turns, seed) == (batches, replies)


def test_a_failed_batch_fails_every_member_in_it() -> None:
    def broken(requests: Sequence[object]) -> list[object]:
        raise RuntimeError("worker died")

    async def main() -> list[BaseException | str]:
        group = LockstepGroup(["x", "y"])

        async def turn(key: str) -> str:
            with group.member(key) as member:
                return str(await member.submit(broken, key))

        return await asyncio.gather(turn("x"), turn("y"), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, RuntimeError) and "worker died" in str(o) for o in outcomes)


def test_a_member_that_leaves_without_calling_releases_the_others() -> None:
    async def main() -> list[list[str]]:
        group, call = LockstepGroup(["a", "b"]), Recorder()

        async def caller() -> None:
            with group.member("a") as member:
                await member.submit(call, "a:0")

        async def quitter() -> None:
            with group.member("b"):
                await asyncio.sleep(0.01)

        await asyncio.wait_for(asyncio.gather(caller(), quitter()), timeout=5)
        return call.batches

    assert asyncio.run(main()) == [["a:0"]]


def test_members_are_named_up_front_and_run_once() -> None:
    group = LockstepGroup(["a"])
    with pytest.raises(ValueError, match="not a lockstep member"), group.member("b"):
        pass
    with (
        group.member("a"),
        pytest.raises(ValueError, match="not a lockstep member"),
        group.member("a"),
    ):
        pass


def test_the_first_batch_waits_for_a_member_that_starts_late() -> None:
    async def main() -> list[list[str]]:
        group, call = LockstepGroup(["early", "late"]), Recorder()

        async def turn(key: str, start_after: float) -> None:
            await asyncio.sleep(start_after)
            with group.member(key) as member:
                await member.submit(call, key)

        await asyncio.gather(turn("early", 0), turn("late", 0.02))
        return call.batches

    assert asyncio.run(main()) == [["early", "late"]]
