"""The one trunk driver (``harness.mirage.trunk.driver``) against fake steps: when each state is
reached, the reachability stop, progress, and running the dry run's steps without a loop."""

from __future__ import annotations

import asyncio

import pytest

from harness.mirage.packs import load_pack
from harness.mirage.trunk.driver import TrunkDriver, TrunkError, TrunkTurn, run_without_loop
from harness.mirage.trunk.states import StateSpec, scaled_profile
from runtime.messages import ImagePart


class CountingSteps:
    """Each turn adds ``per_turn`` to the EIT; past ``compact_at`` the trunk compacts to
    ``keep``."""

    label = "the fake trunk"

    def __init__(self, base: int, per_turn: int, compact_at: int, keep: int = 100) -> None:
        self.position, self.eit, self.compactions = 0, base, 0
        self.per_turn, self.compact_at, self.keep = per_turn, compact_at, keep
        self.turns: list[TrunkTurn] = []

    async def turn(self, turn: TrunkTurn) -> None:
        self.turns.append(turn)
        self.position += 1
        self.eit += self.per_turn
        if self.eit > self.compact_at:
            self.compactions += 1
            self.eit = self.keep

    async def capture(self, spec: StateSpec) -> tuple[int, int, int]:
        return self.position, self.eit, self.compactions


def test_every_state_is_captured_the_turn_it_is_reached() -> None:
    pack, profile = load_pack("mirage-core"), scaled_profile(8192)
    steps = CountingSteps(base=500, per_turn=100, compact_at=6000)
    seen: list[tuple[int, int]] = []
    driver = TrunkDriver(steps, pack, profile, seed=0)
    captured = run_without_loop(driver.run(lambda position, eit: seen.append((position, eit))))

    planted = len(pack.planting_turns())
    assert list(captured) == [s.name for s in profile.states]
    assert captured["S1-d0"][0] == planted
    for name in ("S1-d50k", "S1-d80k"):
        depth = profile.state(name).eit or 0
        _, eit, compactions = captured[name]
        assert compactions == 0 and eit >= depth > eit - steps.per_turn
    assert captured["S2"][2] == 1 and captured["S2"][0] == steps.position
    assert seen[:planted] == [(n, 500 + 100 * n) for n in range(1, planted + 1)]
    assert len(seen) == steps.position
    assert [t.scripted for t in steps.turns[:planted]] == [
        p.assistant for p in pack.planting_turns()
    ]
    assert all(t.scripted is None for t in steps.turns[planted:])


def test_a_compaction_before_a_depth_state_stops_the_walk_at_once() -> None:
    pack, profile = load_pack("mirage-core"), scaled_profile(8192)
    steps = CountingSteps(base=3000, per_turn=400, compact_at=3300)
    with pytest.raises(TrunkError, match=r"the fake trunk compacted .* use a larger --window"):
        run_without_loop(TrunkDriver(steps, pack, profile, seed=0).run())
    assert steps.position <= len(pack.planting_turns()) + 1


def test_a_planted_turn_as_text_names_images_by_their_stand_in() -> None:
    pack = load_pack("mirage-core")
    for planted in pack.planting_turns():
        turn = TrunkTurn.planted(planted)
        for part in turn.message.content:
            if isinstance(part, ImagePart) and part.text_representation:
                assert part.text_representation.strip() in turn.text
    assert TrunkTurn.filler(" text ").text == " text "


def test_a_coroutine_that_waits_needs_a_loop() -> None:
    async def done() -> int:
        return 3

    assert run_without_loop(done()) == 3
    with pytest.raises(RuntimeError, match="needs an event loop"):
        run_without_loop(asyncio.sleep(0))
