"""Named conversation states and depth profiles (papers/mirage.txt, 3.3 and 4.1).

A state is captured from the trunk either at the first turn whose EIT reaches a depth, at
the end of planting, or right after the N-th native compaction. The ``paper`` profile uses
the paper's coordinates on an effective window of 120k tokens; ``scaled`` maps the same
coordinates proportionally onto a backbone's window (the default for small local models); a
YAML file defines a profile of the user's own states.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

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


def load_profile(path: Path) -> DepthProfile:
    """A user-defined profile from YAML: ``name``, ``window`` and a list of ``states``
    (each ``{name, kind: plant_end|depth|compaction, eit?, compactions?}``)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read depth profile {path}: {exc}") from exc
    try:
        profile = DepthProfile.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"{path} is not a valid depth profile:\n{exc}") from exc
    names = [spec.name for spec in profile.states]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"{path}: states must be a non-empty list with unique names")
    return profile


def depth_profile(name: str, backbone_window: int) -> DepthProfile:
    """``paper``, ``scaled`` (onto ``backbone_window``), or the path of a YAML profile."""
    if name == "paper":
        return paper_profile()
    if name == "scaled":
        return scaled_profile(backbone_window)
    if name.endswith((".yaml", ".yml")):
        return load_profile(Path(name))
    raise ValueError(f"unknown depth profile {name!r} (known: paper, scaled, or a YAML file)")
