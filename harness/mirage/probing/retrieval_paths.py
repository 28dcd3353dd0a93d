"""The four retrieval paths of a probe, as the authors' released classifier labels them
(prisma-research/MIRAGE ``scorers/axis1_rpath.py``), in priority order:

- ``R_context``: the artifact's content is in the pre-query active context — at least
  ``min(2, n)`` distinct content keywords (never its id, which the planting turn always
  mentions) or its image — and the probe turn made no retrieval call;
- ``R_boot``: the artifact (its id or any keyword) is in the start-of-session material (system
  prompt, bootstrap and memory files loaded before the query);
- ``R_tool``: the probe turn made a retrieval call (a retrieval tool, or a ``read`` of a memory
  path), or the result of a call that ran names the artifact id (a call answered with a tool
  error did not run: neither it nor its error counts);
- ``R_none``: no access path.

Above: the probe records (``path``, ``path_evidence``), the visibility map (which shares the
context rule) and the reports. Below: what an adapter reports the probe had
(``harness.kit.agents.context``, re-exported here: ``ContextMessage``, ``BootItem``,
``ProbeContext``), the probe turn's calls with their results (``ProbeCall``) — and the keyword
token rule
(``harness.mirage.protocol.keywords``). Every departure from the released rules is listed, with its
reason, in ``docs/metrics.md`` ("The four retrieval paths").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.kit.agents.context import (
    CONFIGURATION_SOURCES,
    BootItem,
    ContextMessage,
    ProbeContext,
    boot_from_chat,
    boot_from_system,
    context_from_chat,
    context_from_messages,
)
from harness.kit.attribution import RETRIEVAL_TOOLS
from harness.mirage.protocol.keywords import MIN_MATCHES, matched, threshold
from memory_server.resolve import IdMentions

__all__ = [
    "RETRIEVAL_PATHS",
    "BootItem",
    "ContextMessage",
    "PathEvidence",
    "ProbeCall",
    "ProbeContext",
    "RetrievalPath",
    "boot_from_chat",
    "boot_from_system",
    "classify_path",
    "context_from_chat",
    "context_from_messages",
]

RetrievalPath = Literal["R_context", "R_boot", "R_tool", "R_none"]
RETRIEVAL_PATHS: tuple[RetrievalPath, ...] = ("R_context", "R_boot", "R_tool", "R_none")

READ_TOOLS: frozenset[str] = frozenset({"read"})
MEMORY_PATH_PATTERNS: tuple[str, ...] = (
    "MEMORY.md",
    "memory/",
    "BOOTSTRAP.md",
    "SOUL.md",
    "USER.md",
    "IDENTITY.md",
)
"""A ``read`` whose path contains one of these reads the agent's memory (released list)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProbeCall(BaseModel):
    """One tool call of the probe turn. Builds from any object with these attributes
    (``ProbeCall.model_validate(record, from_attributes=True)``)."""

    model_config = ConfigDict(frozen=True, from_attributes=True)

    name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    executed: bool = False
    label: str = "ok"
    error: str | None = None
    result_text: str | None = None
    error_returned: bool = False


class KeywordHit(_Frozen):
    """The first message holding ``keyword`` inside or outside the compaction summary."""

    keyword: str
    message: int
    role: str
    summary: bool


class ContextEvidence(_Frozen):
    """Which content keywords the active context holds, outside the compaction summary
    (``verbatim``) and inside it (``summary``), and which messages carry the artifact's
    image."""

    verbatim: list[str] = Field(default_factory=list)
    summary: list[str] = Field(default_factory=list)
    images: list[int] = Field(default_factory=list)
    hits: list[KeywordHit] = Field(default_factory=list)

    @property
    def matched(self) -> list[str]:
        return [*self.verbatim, *(k for k in self.summary if k not in self.verbatim)]

    def holds(self, need: int) -> bool:
        """The content is in the context: its image, or ``need`` (> 0) distinct keywords."""
        return bool(self.images) or 0 < need <= len(self.matched)

    def holds_verbatim(self, need: int) -> bool:
        """As ``holds``, without the compaction summary."""
        return bool(self.images) or 0 < need <= len(self.verbatim)


class BootHit(_Frozen):
    source: str
    term: str
    kind: Literal["id", "keyword"]


class CallVerdict(_Frozen):
    """How one probe-turn call counts: ``retrieval`` (a retrieval tool or a memory read that
    ran) and ``result_names_id`` both give R_tool; only ``retrieval`` rules out R_context."""

    index: int
    name: str | None
    retrieval: bool
    result_names_id: bool
    reason: str


class PathEvidence(_Frozen):
    """What a probe's retrieval path was decided on, checkable by hand."""

    artifact_id: str
    keywords: list[str]
    threshold: int
    context: ContextEvidence | None = Field(
        description="None when the agent did not report its active context"
    )
    boot: list[BootHit] = Field(default_factory=list)
    calls: list[CallVerdict] = Field(default_factory=list)
    reason: str


def content_keywords(artifact_id: str, keywords: Iterable[str]) -> list[str]:
    """``keywords`` without blanks, case-insensitive repeats and the id (never content)."""
    seen: set[str] = set()
    kept = []
    for keyword in keywords:
        key = keyword.strip().casefold()
        if key and key != artifact_id.casefold() and key not in seen:
            seen.add(key)
            kept.append(keyword.strip())
    return kept


_SCANNED: OrderedDict[tuple[int, str, tuple[str, ...]], tuple[object, ContextEvidence]] = (
    OrderedDict()
)
_SCANS_KEPT = 256


def context_evidence(
    messages: Sequence[ContextMessage], artifact_id: str, keywords: Sequence[str]
) -> ContextEvidence:
    """Where ``keywords`` and the image of ``artifact_id`` occur in ``messages``. Every probe of
    a state hands over the same context object: it is scanned once per artifact (the last
    ``_SCANS_KEPT`` scans are kept, each with the object it scanned)."""
    key = (id(messages), artifact_id, tuple(keywords))
    kept = _SCANNED.get(key)
    if kept is not None and kept[0] is messages:
        _SCANNED.move_to_end(key)
        return kept[1]
    evidence = _scan(messages, artifact_id, keywords)
    _SCANNED[key] = (messages, evidence)
    if len(_SCANNED) > _SCANS_KEPT:
        _SCANNED.popitem(last=False)
    return evidence


def _scan(
    messages: Sequence[ContextMessage], artifact_id: str, keywords: Sequence[str]
) -> ContextEvidence:
    found: dict[bool, list[str]] = {False: [], True: []}
    hits: list[KeywordHit] = []
    images: list[int] = []
    for index, message in enumerate(messages):
        if not message.summary and artifact_id in message.images:
            images.append(index)
        zone = found[message.summary]
        for keyword in matched(message.text, keywords):
            if keyword not in zone:
                zone.append(keyword)
                hits.append(
                    KeywordHit(
                        keyword=keyword, message=index, role=message.role, summary=message.summary
                    )
                )
    order = {keyword: rank for rank, keyword in enumerate(keywords)}
    return ContextEvidence(
        verbatim=sorted(found[False], key=order.__getitem__),
        summary=sorted(found[True], key=order.__getitem__),
        images=images,
        hits=hits,
    )


def boot_evidence(
    items: Sequence[BootItem], artifact_id: str, keywords: Sequence[str]
) -> list[BootHit]:
    """Each start-of-session item naming the artifact id or holding a keyword; the agent's
    configuration (``CONFIGURATION_SOURCES``) counts by the id only (departure R9)."""
    ids = IdMentions([artifact_id])
    hits = []
    for item in items:
        if ids.find(item.text):
            hits.append(BootHit(source=item.source, term=artifact_id, kind="id"))
        if item.source in CONFIGURATION_SOURCES:
            continue
        hits += [
            BootHit(source=item.source, term=k, kind="keyword")
            for k in matched(item.text, keywords)
        ]
    return hits


def memory_path(arguments: Mapping[str, Any]) -> str | None:
    """The path a ``read`` call names when it lies in the agent's memory, else None."""
    path = arguments.get("path")
    if isinstance(path, str) and any(pattern in path for pattern in MEMORY_PATH_PATTERNS):
        return path
    return None


def call_verdict(index: int, call: ProbeCall, artifact_id: str) -> CallVerdict:
    """Whether the call is a retrieval call (and why, or why not), and whether its result
    names ``artifact_id``. A call that did not run has no result to name it: what it got back
    (an agent's tool error for a call it could not run) is not evidence."""
    result = call.result_text if call.executed else None
    names_id = bool(IdMentions([artifact_id]).find(result or ""))
    retrieval, reason = _call_kind(call)
    if names_id:
        reason += f"; its result names {artifact_id}"
    return CallVerdict(
        index=index, name=call.name, retrieval=retrieval, result_names_id=names_id, reason=reason
    )


def _call_kind(call: ProbeCall) -> tuple[bool, str]:
    if not call.executed:
        answered = "; answered with a tool error" if call.error_returned else ""
        return False, f"not executed ({call.label}{answered}): no access"
    failed = " (it returned an error)" if call.error else ""
    if call.name in RETRIEVAL_TOOLS:
        return True, f"retrieval tool {call.name}{failed}"
    if call.name in READ_TOOLS:
        path = memory_path(call.arguments)
        if path is not None:
            return True, f"read of memory path {path}{failed}"
        return False, f"read of {call.arguments.get('path')!r}, not a memory path"
    return False, f"{call.name} is not a retrieval tool"


def classify_path(
    artifact_id: str,
    keywords: Sequence[str],
    *,
    active: Sequence[ContextMessage] | None,
    boot: Sequence[BootItem] = (),
    calls: Sequence[ProbeCall] = (),
    min_matches: int = MIN_MATCHES,
) -> tuple[RetrievalPath, PathEvidence]:
    """The retrieval path of one probe about ``artifact_id`` and the evidence behind it.

    ``active`` is the pre-query active context (None: unknown, so never R_context); ``boot``
    the start-of-session material; ``calls`` the probe turn's tool calls with their results.
    For an unanswerable probe ``artifact_id`` is the artifact the question is about."""
    kept = content_keywords(artifact_id, keywords)
    need = threshold(kept, min_matches)
    context = None if active is None else context_evidence(active, artifact_id, kept)
    verdicts = [call_verdict(index, call, artifact_id) for index, call in enumerate(calls)]
    boot_hits = boot_evidence(boot, artifact_id, kept)
    retrieved = [v for v in verdicts if v.retrieval]
    path: RetrievalPath
    if context is not None and context.holds(need) and not retrieved:
        path = "R_context"
    elif boot_hits:
        path = "R_boot"
    elif any(v.retrieval or v.result_names_id for v in verdicts):
        path = "R_tool"
    else:
        path = "R_none"
    reason = _reason(path, context, need, len(kept), boot_hits, verdicts)
    evidence = PathEvidence(
        artifact_id=artifact_id,
        keywords=kept,
        threshold=need,
        context=context,
        boot=boot_hits,
        calls=verdicts,
        reason=reason,
    )
    return path, evidence


def _reason(
    path: RetrievalPath,
    context: ContextEvidence | None,
    need: int,
    total: int,
    boot: list[BootHit],
    verdicts: list[CallVerdict],
) -> str:
    """One line a reader can check against the evidence."""
    if context is None:
        seen = "active context not reported"
    elif context.images and path == "R_context":
        seen = f"its image is in the active context (message {context.images[0]})"
    else:
        found = len(context.matched)
        seen = f"{found} of {total} content keywords in the active context (need {need})"
    retrieval = next((v for v in verdicts if v.retrieval), None)
    named = next((v for v in verdicts if v.result_names_id), None)
    if path == "R_context":
        return f"R_context: {seen}; no retrieval call"
    if path == "R_boot":
        first = boot[0]
        return f"R_boot: {first.source} holds its {first.kind} {first.term!r}; {seen}"
    if path == "R_tool":
        call = retrieval or named
        assert call is not None
        return f"R_tool: call {call.index}: {call.reason}; {seen}"
    return f"R_none: {seen}; not in the start-of-session material; no retrieval call"
