"""The one trunk driver: T = plant ⊕ filler turn by turn, each state captured the moment it is
reached (papers/mirage.txt, Algorithm 1, lines 1–2).

Above: the built-in trunk (``harness.mirage.trunk.runner.TrunkRunner``), the trunk replayed through
OpenClaw's gateway (``harness.mirage.openclaw.trunk.OpenClawTrunk``) and the dry run's
token-level replay (``harness.mirage.run.replay``). Below: ``TrunkSteps`` — how one turn is taken
and one state captured, and the trunk's turn count, EIT and compaction count after its last turn.
The driver decides nothing else; the steps decide nothing about states.

The walk: every planting turn of the pack, then the ``plant_end`` states; then the seeded filler,
one turn at a time until every state is captured, the depth and compaction states now reached
captured after each turn. A depth state is reached at the first turn whose EIT reaches its depth
before any compaction, a compaction state once the trunk has compacted that many times, a
``plant_end`` state at once. Once the trunk has compacted, a depth state not captured yet never
will be: the walk stops there, as it does when the filler runs out (``TrunkError``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from harness.mirage.packs import Pack
from harness.mirage.packs.pack import PlantedTurn
from harness.mirage.trunk.states import DepthProfile, StateSpec
from runtime.messages import ImagePart, UserMessage

MAX_FILLER_TURNS = 5_000

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class TrunkError(RuntimeError):
    """The trunk could not reach every requested state."""


@dataclass(frozen=True)
class TrunkTurn:
    """One user turn of the trunk: its message, the reply the pack scripts for it (None: the
    trunk answers itself), and the message as one text for an agent that takes text only."""

    message: UserMessage
    scripted: str | None
    text: str

    @classmethod
    def planted(cls, turn: PlantedTurn) -> TrunkTurn:
        """A planting turn; its text renders images by their text stand-in and inlines other
        attachments (as ``PlantedTurn.to_user_message`` renders them)."""
        message = turn.to_user_message()
        parts = message.content
        text = "\n\n".join(
            p.text_representation or "" if isinstance(p, ImagePart) else p.text for p in parts
        ).strip()
        return cls(message=message, scripted=turn.assistant, text=text)

    @classmethod
    def filler(cls, text: str) -> TrunkTurn:
        return cls(message=UserMessage.text(text), scripted=None, text=text)


class TrunkSteps(Protocol[T_co]):
    """The concrete trunk under the driver: a real agent, OpenClaw's gateway, or token counts."""

    @property
    def label(self) -> str:
        """What the errors call this trunk (``the trunk``, ``the OpenClaw trunk``)."""
        ...

    @property
    def position(self) -> int:
        """Turns taken so far."""
        ...

    @property
    def eit(self) -> int:
        """The EIT after the last turn."""
        ...

    @property
    def compactions(self) -> int:
        """Compactions so far."""
        ...

    async def turn(self, turn: TrunkTurn) -> None:
        """Take one turn (with whatever maintenance follows it: memory flush, compaction)."""
        ...

    async def capture(self, spec: StateSpec) -> T_co:
        """The state ``spec`` as of now (a checkpoint written, or a copy of the session)."""
        ...


class TrunkDriver(Generic[T]):
    """Walks the pack's trunk turns through ``steps`` and captures every state of ``profile``."""

    def __init__(self, steps: TrunkSteps[T], pack: Pack, profile: DepthProfile, seed: int) -> None:
        self.steps, self.pack, self.profile, self.seed = steps, pack, profile, seed
        self.captured: dict[str, T] = {}

    def reached(self, spec: StateSpec) -> bool:
        steps = self.steps
        if spec.kind == "depth":
            return steps.compactions == 0 and steps.eit >= (spec.eit or 0)
        if spec.kind == "compaction":
            return steps.compactions >= spec.compactions
        return True

    async def capture_due(self, kinds: set[str]) -> None:
        """Capture every state of ``kinds`` reached and not captured yet, in profile order."""
        for spec in self.profile.states:
            if spec.name not in self.captured and spec.kind in kinds and self.reached(spec):
                self.captured[spec.name] = await self.steps.capture(spec)

    def missing(self, kind: str | None = None) -> list[str]:
        """The states (of ``kind``, or all) not captured yet."""
        return [
            s.name
            for s in self.profile.states
            if s.name not in self.captured and kind in (None, s.kind)
        ]

    def check_depths_reachable(self) -> None:
        """Depth states come before the first compaction: once the trunk has compacted, one
        not captured yet never will be (a large fixed prompt may fill a small window)."""
        missed = self.missing("depth") if self.steps.compactions else []
        if missed:
            steps = self.steps
            raise TrunkError(
                f"{steps.label} compacted at EIT {steps.eit} (turn {steps.position}) before it "
                f"reached state(s) {', '.join(missed)} on a {self.profile.window}-token window; "
                "use a larger --window"
            )

    async def run(self, on_turn: Callable[[int, int], None] | None = None) -> dict[str, T]:
        """Every state's capture, in profile order; ``on_turn(position, eit)`` after each turn."""
        steps = self.steps
        for planted in self.pack.planting_turns():
            await steps.turn(TrunkTurn.planted(planted))
            if on_turn:
                on_turn(steps.position, steps.eit)
        await self.capture_due({"plant_end"})
        self.check_depths_reachable()
        for filler in self.pack.filler_turns(self.seed, n_turns=MAX_FILLER_TURNS):
            if len(self.captured) == len(self.profile.states):
                break
            await steps.turn(TrunkTurn.filler(filler.text))
            await self.capture_due({"depth", "compaction"})
            self.check_depths_reachable()
            if on_turn:
                on_turn(steps.position, steps.eit)
        missing = self.missing()
        if missing:
            raise TrunkError(
                f"{steps.label} ended after {steps.position} turns at EIT {steps.eit} with "
                f"{steps.compactions} compaction(s) without reaching state(s) {', '.join(missing)}"
            )
        return {spec.name: self.captured[spec.name] for spec in self.profile.states}


def run_without_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never waits on anything (the dry run's steps), run to its
    end without an event loop, so a caller inside a running loop can use it too."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    raise RuntimeError("the coroutine waited on something: it needs an event loop")
