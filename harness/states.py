"""Named conversation states and depth profiles (papers/mirage.txt, 3.3 and 4.1).

A state is captured from the trunk either at the first turn whose EIT reaches a depth, at
the end of planting, or right after the N-th native compaction. The ``paper`` profile uses
the paper's coordinates on an effective window of 120k tokens; ``scaled`` maps the same
coordinates proportionally onto a backbone's window (the default for small local models).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PAPER_WINDOW = 120_000


class StateSpec(BaseModel):
    """``kind='plant_end'``: after the last planting turn; ``'depth'``: first trunk turn whose
    EIT reaches ``eit``; ``'compaction'``: right after compaction number ``compactions``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")
    kind: Literal["plant_end", "depth", "compaction"]
    eit: int | None = Field(default=None, ge=1)
    compactions: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _depth_needs_eit(self) -> StateSpec:
        if self.kind == "depth" and self.eit is None:
            raise ValueError(f"state {self.name!r}: a depth state needs 'eit'")
        return self


class DepthProfile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    window: int = Field(ge=1024)
    states: tuple[StateSpec, ...]

    def state(self, name: str) -> StateSpec:
        for spec in self.states:
            if spec.name == name:
                return spec
        raise KeyError(f"profile {self.name!r} has no state {name!r}")

    @property
    def deepest_depth(self) -> int:
        return max((spec.eit or 0) for spec in self.states)


def paper_profile() -> DepthProfile:
    return DepthProfile(
        name="paper",
        window=PAPER_WINDOW,
        states=(
            StateSpec(name="S1-d0", kind="plant_end"),
            StateSpec(name="S1-d50k", kind="depth", eit=50_000),
            StateSpec(name="S1-d80k", kind="depth", eit=80_000),
            StateSpec(name="S2", kind="compaction", compactions=1),
        ),
    )


def scaled_profile(window: int) -> DepthProfile:
    """The paper's coordinates mapped proportionally onto ``window``."""
    paper = paper_profile()
    states = tuple(
        spec.model_copy(update={"eit": round(spec.eit * window / PAPER_WINDOW)})
        if spec.eit is not None
        else spec
        for spec in paper.states
    )
    return DepthProfile(name="scaled", window=window, states=states)


def resolve_profile(name: str, backbone_window: int) -> DepthProfile:
    if name == "paper":
        return paper_profile()
    if name == "scaled":
        return scaled_profile(backbone_window)
    raise ValueError(f"unknown depth profile {name!r} (known: paper, scaled, or a YAML file)")
