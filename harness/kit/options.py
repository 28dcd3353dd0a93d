"""Run options declared once, on the fields of a protocol's run configuration (a pydantic
model): ``field: Annotated[T, RunOption(...)] = Field(default, description=...)``.

A field's ``RunOption`` says how the command line gives it (help panel and text, parameter name,
short flag, environment variable, how a flag's value becomes the field's: ``Given``), what it is
to the study a run folder holds (``StudyRole``: kept by a resume, may only grow, shared by the
shards, or none of these) and whether a resolved study file writes it; the field's pydantic
``description`` is its meaning in the docs' key table, and ``Field(exclude=True)`` makes it a
secret (never in a dump, never a study-file key). The command's typer options, the study file's
keys, the resume check's fixed keys and the docs' key table are generated from these
declarations (``declared_options``), so adding an option is one field.

Above: ``harness.mirage.config`` (``RunConfig`` declares its fields), ``harness.mirage.study``
(the keys and the docs' table), ``harness.mirage.run`` (``study.json``, the resume check) and
``mirage.cli.run_options`` (the typer options). Below: pydantic's field metadata; nothing else.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo


class Given(StrEnum):
    """How a flag's value becomes the field's (and what the docs' flag column adds)."""

    AS_IS = ""
    """The flag's value is the field's (a boolean: ``--x/--no-x``)."""
    REPEATED = "repeatable"
    """``--model A --model B``: a list; the field's default when the flag is not given."""
    REPEATED_OR_COMMAS = "repeatable, or a comma list"
    """``--summary-format A,B --summary-format C``: the items in order."""
    COMMA_LIST = "a comma list"
    """One comma list of the field's choices (``--conditions C0,Cm``), refused as a usage error
    naming them otherwise."""
    ZERO_FOR_NONE = "0 for none"
    """An integer, 0 for None (``--limit 0``: every question), in a flag and in a study file."""
    TEXT = "text"
    """Text the field's validator parses (``--shard 2/3``), in a flag and in a study file."""


class StudyRole(StrEnum):
    """What an option is to the study a run folder holds (``study.json``: what the shards of
    one study share and a resume compares)."""

    KEPT = "kept"
    """It defines the checkpoints or records: every shard has the same, a resume keeps it."""
    GROWS = "grows"
    """It says which probes run: every shard has the same, a resume may only add probes."""
    SHARED = "shared"
    """Every shard has the same, a resume may change it (an answerer has its own folder)."""
    NONE = ""
    """This machine's or this invocation's: not part of the study."""


@dataclass(frozen=True)
class RunOption:
    """The declaration of one run option, as ``Annotated`` metadata of its field."""

    panel: str | None = None
    """The help panel of its flag; None: no flag (only a study file sets it)."""
    help: str = ""
    """The flag's help text."""
    param: str | None = None
    """The command's parameter (and flag) when not the field's name (``--model`` → models)."""
    short: str | None = None
    envvar: str | None = None
    min: float | None = None
    """The flag's lower bound when not the field's ``ge`` (``--limit 0`` below ``ge=2``)."""
    given: Given = Given.AS_IS
    study: StudyRole = StudyRole.NONE
    resolved: str | None = None
    """The key ``study.json`` holds it under, resolved against the other options, when that
    is not the field itself (``summarizer_model`` → ``summarizer``)."""
    written: bool = True
    """False: a study file may set it but a resolved study leaves it out (what to do to a
    folder, not the study)."""
    existing_file: bool = False
    """True: the flag names a file that must exist (checked by the command line before any
    work, like every other path option)."""


@dataclass(frozen=True)
class DeclaredOption:
    """A field of a run configuration with its ``RunOption``."""

    name: str
    """The field: the study file's key."""
    option: RunOption
    field: FieldInfo

    @property
    def param(self) -> str:
        return self.option.param or self.name

    @property
    def flag(self) -> str | None:
        """``--summary-format`` (None: a study file sets it, no flag)."""
        return None if self.option.panel is None else "--" + self.param.replace("_", "-")

    @property
    def secret(self) -> bool:
        """Never dumped, never a study-file key (``Field(exclude=True)``)."""
        return bool(self.field.exclude)

    @property
    def default(self) -> Any:
        return self.field.get_default(call_default_factory=True)

    @property
    def is_bool(self) -> bool:
        return self.field.annotation in (bool, bool | None)

    @property
    def choices(self) -> tuple[str, ...]:
        """The items a ``list[Literal[...]]`` field may hold (empty for any other)."""
        args = typing.get_args(self.field.annotation)
        inner = args[0] if typing.get_origin(self.field.annotation) is list else None
        return typing.get_args(inner) if typing.get_origin(inner) is Literal else ()

    @property
    def is_path(self) -> bool:
        return self.field.annotation in (Path, Path | None)

    @property
    def lower_bound(self) -> float | None:
        """The flag's lower bound: the declared ``min``, else the field's ``ge``."""
        if self.option.min is not None:
            return self.option.min
        bounds = (getattr(item, "ge", None) for item in self.field.metadata)
        return next((bound for bound in bounds if bound is not None), None)

    @property
    def study_key(self) -> str | None:
        """The key of ``study.json`` that holds it (None: not part of the study)."""
        if self.option.study is StudyRole.NONE:
            return None
        return self.option.resolved or self.name


def declared_options(model: type[BaseModel]) -> dict[str, DeclaredOption]:
    """Every field of ``model`` with its ``RunOption``, in the model's order; a field that
    declares none (or two) is a ``TypeError`` naming it."""
    options = {}
    for name, field in model.model_fields.items():
        found = [item for item in field.metadata if isinstance(item, RunOption)]
        if len(found) != 1:
            raise TypeError(f"{model.__name__}.{name} must declare one RunOption, not {len(found)}")
        options[name] = DeclaredOption(name, found[0], field)
    return options
