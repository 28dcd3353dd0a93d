"""Reference summarizers: compaction summarizers whose retention is declared in advance.

Like the reference agents (``harness.mirage.references``) they are deterministic, take no
model and run in milliseconds; each is a ``Backbone`` and is used wherever a summarizer is
(``mirage run --summarizer reference/keep-charts``, ``--summary-format FORMAT~reference/…``,
``CompactionConfig.summarizer_model``). A reference summarizer sees only what any summarizer
sees — the prompt a summary format built (its system message tells the format, its user
message holds the numbered transcript) — and, for the memory flush, the session's messages.

Retention is declared per artifact kind (the part of an artifact id before ``_``:
``chart_1121ed9b`` is a ``chart``):

- ``facts``: every line of the message that brought the artifact (title, bullets, table rows)
  is kept with its values; the artifact id is kept too, except in ``free-form`` (prose names
  an artifact by its title: ids are what prose loses first);
- ``names``: the artifact's id and title, no values;
- ``notes``: left out of the summary; the memory flush appends the artifact's lines to the
  workspace notes (``memory_append``), so its class becomes ``notes_only``;
- ``nothing``: left out of the summary and the notes.

Above: the compactor and ``CompactionPolicy`` (which asks a ``NoteWriter`` summarizer for the
flush's notes instead of running a model turn). Below: the summary formats' prompts
(``compaction.strategies``) and the transcript rendering (``compaction.transcript``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from compaction.strategies.builtin import (
    CITATIONS_SYSTEM,
    FREE_FORM_SYSTEM,
    SECTIONS,
    VERBATIM_SYSTEM,
)
from compaction.strategies.template import TEMPLATE_SYSTEM
from compaction.transcript import previous_summary, render_message
from runtime.backbones.base import Backbone, Completion, ProviderError, ToolMode
from runtime.messages import Message, SystemMessage, ToolSpec, UserMessage
from runtime.profiles import resolve_profile
from runtime.tokens import estimate_usage

REFERENCE_SUMMARIZER_PREFIX = "reference/"
ARTIFACT_ID = re.compile(r"(?<![\w-])([a-z]+_[0-9a-f]{8})(?![\w-])")
"""An artifact id: ``<kind>_<8 hex digits>`` (the shape of the bundled packs' ids)."""
REFERENCE_WINDOW = 1_000_000  # the whole transcript in one chunk: no rolling summary

Retention = Literal["facts", "names", "notes", "nothing"]
SummaryShape = Literal["verbatim", "free-form", "per-fact-citations", "template"]
DeclaredClass = Literal["summary_only", "notes_only", "nowhere"]
ANY_KIND = "*"

_BLOCK = re.compile(r"^\[(\d+)\] (SYSTEM|USER|ASSISTANT|TOOL RESULT [^:\n]*):[ ]?", re.MULTILINE)
_IMAGE_LINE = re.compile(r"^\[image [^\]]*\]$")
_SHAPES: dict[str, SummaryShape] = {
    VERBATIM_SYSTEM: "verbatim",
    FREE_FORM_SYSTEM: "free-form",
    CITATIONS_SYSTEM: "per-fact-citations",
    TEMPLATE_SYSTEM: "template",
}
_NOTHING_KEPT = "The conversation so far held nothing this summary keeps."


class ReferenceSpec(BaseModel):
    """A reference summarizer's name, what it does in one line, and its declared retention."""

    model_config = ConfigDict(frozen=True)

    kind: str
    description: str
    retention: Mapping[str, Retention]

    @property
    def model(self) -> str:
        return REFERENCE_SUMMARIZER_PREFIX + self.kind

    def retention_of(self, artifact_id: str) -> Retention:
        """The declared retention of ``artifact_id``'s kind (else of any kind)."""
        kind = artifact_id.partition("_")[0]
        return self.retention.get(kind, self.retention[ANY_KIND])

    def declared_class(self, artifact_id: str, *, flushed: bool) -> DeclaredClass:
        """The visibility class the declaration predicts right after the compaction, for an
        artifact the compacted span held (``flushed``: the memory flush ran)."""
        retention = self.retention_of(artifact_id)
        if retention == "facts":
            return "summary_only"
        if retention == "notes" and flushed:
            return "notes_only"
        return "nowhere"

    def keeps_ids(self, artifact_id: str, summary_format: str) -> bool:
        """Whether the summary cites ``artifact_id`` (facts or names in any format but
        free-form)."""
        return self.retention_of(artifact_id) in ("facts", "names") and (
            summary_format != "free-form"
        )


REFERENCE_SPECS: dict[str, ReferenceSpec] = {
    spec.model: spec
    for spec in (
        ReferenceSpec(
            kind="keep-charts",
            description="keeps every chart's facts with their values and id; UI screenshots "
            "go to the memory flush's notes, not the summary",
            retention={"chart": "facts", "ui": "notes", ANY_KIND: "nothing"},
        ),
        ReferenceSpec(
            kind="names-only",
            description="keeps each artifact's id and title, no values",
            retention={ANY_KIND: "names"},
        ),
        ReferenceSpec(
            kind="keep-nothing",
            description="keeps nothing of the artifacts, in the summary or the notes",
            retention={ANY_KIND: "nothing"},
        ),
    )
}
REFERENCE_SUMMARIZERS: tuple[str, ...] = tuple(REFERENCE_SPECS)


def is_reference_summarizer(model: str) -> bool:
    return model in REFERENCE_SPECS


def reference_spec(model: str) -> ReferenceSpec:
    """The declaration of the reference summarizer ``model``; ``ValueError`` (one line) for a
    name that is not one."""
    try:
        return REFERENCE_SPECS[model]
    except KeyError:
        known = ", ".join(REFERENCE_SUMMARIZERS)
        raise ValueError(
            f"unknown reference summarizer {model!r}; expected one of {known}"
        ) from None


class ArtifactBlock(BaseModel):
    """What the transcript said about one artifact: its id, a title and its lines."""

    model_config = ConfigDict(frozen=True)

    artifact_id: str
    title: str
    lines: tuple[str, ...]


def artifact_blocks(texts: Sequence[str]) -> list[ArtifactBlock]:
    """One block per artifact id mentioned in ``texts`` (messages as rendered text), in order
    of first mention: the longest text mentioning it gives its lines (``[image …]`` tags
    left out) and its first Markdown heading (else first line) the title."""
    best: dict[str, str] = {}
    for text in texts:
        for artifact_id in dict.fromkeys(ARTIFACT_ID.findall(text)):
            if len(text) > len(best.get(artifact_id, "")):
                best[artifact_id] = text
    blocks = []
    for artifact_id, text in best.items():
        lines = tuple(
            line.rstrip()
            for line in text.splitlines()
            if line.strip() and not _IMAGE_LINE.match(line.strip())
        )
        headings = [line.lstrip("#").strip() for line in lines if line.startswith("#")]
        title = headings[0] if headings else (lines[0] if lines else artifact_id)
        blocks.append(ArtifactBlock(artifact_id=artifact_id, title=title, lines=lines))
    return blocks


class SummaryPrompt(BaseModel):
    """What a reference summarizer reads off a summary format's prompt."""

    shape: SummaryShape
    messages: list[str]
    previous: str | None = None
    headings: list[str] = []


def read_prompt(messages: Sequence[Message]) -> SummaryPrompt:
    """The format (from the system message), the transcript's messages (``[i] ROLE: …``
    blocks), the previous summary and, for a template, its headings before the transcript;
    ``ProviderError`` for a prompt that is not a compaction prompt."""
    system = next((m.content for m in messages if isinstance(m, SystemMessage)), None)
    user = "\n".join(m.plain_text for m in messages if isinstance(m, UserMessage))
    shape = _SHAPES.get(system or "")
    starts = list(_BLOCK.finditer(user))
    if shape is None or not starts:
        raise ProviderError(
            "bad_request",
            "a reference summarizer answers only the prompts of mirage's summary formats "
            "(verbatim, free-form, per-fact-citations, template:FILE)",
        )
    ends = [match.start() for match in starts[1:]] + [len(user)]
    blocks = [user[match.end() : end].strip() for match, end in zip(starts, ends, strict=True)]
    previous = _between(user, "<previous_summary>\n", "\n</previous_summary>")
    headings = [
        line.lstrip("#").strip()
        for line in user[: starts[0].start()].splitlines()
        if line.startswith("#")
    ]
    return SummaryPrompt(shape=shape, messages=blocks, previous=previous, headings=headings)


def _between(text: str, start: str, end: str) -> str | None:
    _, found, rest = text.partition(start)
    if not found:
        return None
    return rest.partition(end)[0].strip() or None


def _table_rows(lines: Sequence[str]) -> list[list[tuple[str, str]]]:
    """The rows of the comma-separated table in ``lines`` as (header, cell) pairs."""
    header: list[str] | None = None
    rows = []
    for line in lines:
        cells = [cell.strip() for cell in line.split(",")]
        if header is not None and len(cells) == len(header):
            rows.append(list(zip(header, cells, strict=True)))
        elif len(cells) >= 3 and header is None:
            header = cells
        else:
            header = None
    return rows


def _fact_lines(block: ArtifactBlock) -> list[str]:
    """The block's facts one per line: each bullet, and each table row as ``name: value``
    pairs (the title first, so the row says which chart it is from)."""
    rows = _table_rows(block.lines)
    in_table = {", ".join(cell for _, cell in row) for row in rows}
    facts = []
    for line in block.lines:
        text = line.lstrip("-* ").strip()
        if line.startswith("#") or not text or text.endswith(":"):
            continue
        if ", ".join(c.strip() for c in line.split(",")) in in_table or ARTIFACT_ID.search(text):
            continue
        if "," in text and len(text.split(",")) >= 3 and ":" not in text:
            continue  # a table header
        facts.append(text)
    for row in rows:
        facts.append(f"{block.title} — " + "; ".join(f"{name}: {cell}" for name, cell in row))
    return facts


def _prose(block: ArtifactBlock) -> str:
    """The block's facts as sentences, without its id."""
    sentences = [fact.rstrip(".") + "." for fact in _fact_lines(block)]
    return f"The user shared “{block.title}”. " + " ".join(sentences)


class ReferenceSummarizer(Backbone):
    """A reference summarizer (``REFERENCE_SPECS``) as a backbone: it writes the summary of the
    format whose prompt it is given, keeping what its retention declares; ``notes`` gives
    the memory flush's notes."""

    tool_mode: ToolMode = "native"

    def __init__(self, model: str) -> None:
        self.spec = reference_spec(model)
        self.model = model
        self.context_window = REFERENCE_WINDOW
        self.profile = resolve_profile(model)

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        started = time.perf_counter()
        prompt = read_prompt(messages)
        text = self.summary(prompt)
        return Completion(
            text=text,
            usage=estimate_usage(messages, tools, text),
            finish_reason="stop",
            model=self.model,
            latency_s=time.perf_counter() - started,
        )

    def summary(self, prompt: SummaryPrompt) -> str:
        blocks = artifact_blocks(prompt.messages)
        kept = [b for b in blocks if self.spec.retention_of(b.artifact_id) in ("facts", "names")]
        body = _SHAPE_WRITERS[prompt.shape](self.spec, kept, prompt)
        parts = [prompt.previous, body] if prompt.previous else [body]
        return "\n\n".join(parts).strip()

    def notes(self, messages: Sequence[Message]) -> list[str]:
        """The memory flush's notes: one per artifact declared ``notes`` that ``messages``
        (the active context) hold outside a compaction summary, its title, id and lines."""
        texts = [render_message(m) for m in messages if previous_summary(m) is None]
        return [
            "\n".join([f"# {block.title} ({block.artifact_id})", *block.lines])
            for block in artifact_blocks(texts)
            if self.spec.retention_of(block.artifact_id) == "notes"
        ]


def _facts(block: ArtifactBlock, spec: ReferenceSpec) -> bool:
    return spec.retention_of(block.artifact_id) == "facts"


def _verbatim(spec: ReferenceSpec, kept: Sequence[ArtifactBlock], prompt: SummaryPrompt) -> str:
    critical = []
    for block in kept:
        critical.append(f"### {block.title} ({block.artifact_id})")
        if _facts(block, spec):
            critical.extend(block.lines)
    sections = {section: "None." for section in SECTIONS}
    sections["Goal"] = "Continue the conversation with the user."
    if critical:
        sections["Critical context"] = "\n".join(critical)
    return "\n".join(f"## {name}\n{text}" for name, text in sections.items())


def _free_form(spec: ReferenceSpec, kept: Sequence[ArtifactBlock], prompt: SummaryPrompt) -> str:
    paragraphs = [
        _prose(block) if _facts(block, spec) else f"The user shared “{block.title}”."
        for block in kept
    ]
    return "\n\n".join(paragraphs) or _NOTHING_KEPT


def _citations(spec: ReferenceSpec, kept: Sequence[ArtifactBlock], prompt: SummaryPrompt) -> str:
    lines = ["- The user's goal: continue the conversation [source: message 0]"]
    for block in kept:
        cite = f" [source: {block.artifact_id}]"
        facts = _fact_lines(block) if _facts(block, spec) else []
        lines.append(f"- The user shared “{block.title}”{cite}")
        lines.extend(f"- {fact}{cite}" for fact in facts)
    return "\n".join(lines)


def _template(spec: ReferenceSpec, kept: Sequence[ArtifactBlock], prompt: SummaryPrompt) -> str:
    """The template's own headings (those before its transcript), the artifacts under the last."""
    body = [f"## {heading}" for heading in prompt.headings]
    for block in kept:
        body.append(f"### {block.title} ({block.artifact_id})")
        if _facts(block, spec):
            body.extend(block.lines)
    if not kept:
        body.append(_NOTHING_KEPT)
    return "\n".join(body)


_SHAPE_WRITERS = {
    "verbatim": _verbatim,
    "free-form": _free_form,
    "per-fact-citations": _citations,
    "template": _template,
}


@runtime_checkable
class NoteWriter(Protocol):
    """A summarizer that also writes the memory flush's notes itself (no model turn)."""

    def notes(self, messages: Sequence[Message]) -> list[str]: ...


def make_summarizer(model: str, **options: object) -> Backbone:
    """The summarizer ``model``: a reference summarizer (``options`` do not apply), else the
    backbone ``runtime.backbones.make_backbone`` makes."""
    if model.startswith(REFERENCE_SUMMARIZER_PREFIX):
        return ReferenceSummarizer(model)
    from runtime.backbones import make_backbone

    return make_backbone(model, **options)
