"""Scoring profiles: which prompt wording, reply parser, value rules and source resolver a run
uses. ``paper`` (the default everywhere) reproduces the authors' released scorer
(prisma-research/MIRAGE) with the departures listed in docs/metrics.md; ``lenient`` is mirage's
tolerant reading, kept for small models and exploratory runs.

Above: the probe runner, ``mirage rescore`` and ``mirage report``. Below:
``harness.mirage.protocol`` (wording, parsers), ``harness.mirage.scoring.paper_values`` /
``harness.mirage.scoring.values`` (value rules), the workspace canonicaliser
(``memory_server.resolve``) and the kit's ``find_workspace`` (a result folder's workspace).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.kit.rundir import find_workspace
from harness.mirage.protocol import (
    DEFAULT_PROFILE,
    Condition,
    ParseOutcome,
    ProfileName,
    check_profile,
    parse_response,
    probe_prompt,
    probe_template,
)
from harness.mirage.scoring import paper_values, values
from harness.mirage.scoring.sources import ChainResolver, KnownIdResolver, SourceResolver
from harness.mirage.scoring.values import AnswerType

if TYPE_CHECKING:
    from memory_server.workspace import Workspace


class ValueMatcher(Protocol):
    def __call__(
        self,
        predicted: str | None,
        gold: str,
        answer_type: AnswerType,
        *,
        tolerance: float | None = ...,
        aliases: tuple[str, ...] = ...,
        unit: str | None = ...,
    ) -> bool: ...


@dataclass(frozen=True)
class ScoringProfile:
    """One way of asking and scoring probes."""

    name: ProfileName
    summary: str
    value_matches: ValueMatcher
    mention_fallback: bool  # after the workspace, accept a SOURCE naming exactly one artifact id

    def parse(self, reply: str | None) -> ParseOutcome:
        return parse_response(reply, self.name)

    def template(self, condition: Condition) -> str:
        return probe_template(condition, self.name)

    def prompt(self, question: str, condition: Condition) -> str:
        return probe_prompt(question, condition, self.name)

    def source_resolver(self, workspace: Workspace, version: str | None = None) -> SourceResolver:
        """How this profile canonicalises SOURCE in ``workspace`` as it was at ``version`` (the
        workspace version a probe's checkpoint names; None: the working tree)."""
        resolver = workspace.resolver(version)
        if not self.mention_fallback:
            return resolver
        manifest = workspace.manifest if version is None else workspace.version(version)
        artifact_ids = [a.id for a in manifest.artifacts.values() if not a.is_note]
        return ChainResolver(resolver, KnownIdResolver(artifact_ids))


PROFILES: dict[ProfileName, ScoringProfile] = {
    "paper": ScoringProfile(
        name="paper",
        summary="the authors' released scorer (prisma-research/MIRAGE), departures documented",
        value_matches=paper_values.value_matches,
        mention_fallback=False,
    ),
    "lenient": ScoringProfile(
        name="lenient",
        summary="mirage's tolerant reading (any markup, ':' or '=', last occurrence wins)",
        value_matches=values.value_matches,
        mention_fallback=True,
    ),
}

ProfileArg = ProfileName | ScoringProfile


def get_profile(profile: str | ScoringProfile = DEFAULT_PROFILE) -> ScoringProfile:
    """The profile of that name (a ValueError names the known ones)."""
    if isinstance(profile, ScoringProfile):
        return profile
    return PROFILES[check_profile(profile)]


def source_resolvers_for(
    result_dir: Path, profile: ScoringProfile, workspace: Path | None = None
) -> Callable[[str | None], SourceResolver]:
    """``profile``'s SOURCE canonicaliser over the workspace of ``result_dir``, per workspace
    version (a record's checkpoint's); a version that workspace does not hold (None, or
    another ``--workspace``) is read as the working tree."""
    from memory_server.workspace import Workspace

    opened = Workspace.open(find_workspace(result_dir, workspace))
    held = set(opened.store.list_versions())
    resolvers: dict[str | None, SourceResolver] = {}

    def at(version: str | None) -> SourceResolver:
        key = version if version in held else None
        if key not in resolvers:
            resolvers[key] = profile.source_resolver(opened, key)
        return resolvers[key]

    return at
