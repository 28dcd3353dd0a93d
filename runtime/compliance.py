"""The tool-compliance study: can a backbone express retrieval as an executable tool call?

Above: ``mirage compliance``, which offers the memory server's ``artifact_recall``. Below: any
``Backbone`` (called directly, no agent loop or tool execution) and ``parse_reply``. A fixed set
of questions about the user's earlier artifacts is sent with that tool offered, once with an
instruction that requires the tool and once without. Each reply is parsed with the backbone's
profile parser — with adapters off, on, or both on the same replies — and tabulated per
backbone: attempted, parsed ok, every failure label, pseudo-tool, adapted, and the share that
became executable; ``COLUMNS`` says what each column counts (the top of ``compliance.md``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict

from runtime.backbones.base import Backbone, ProviderError
from runtime.messages import Message, SystemMessage, ToolCall, ToolSpec, UserMessage
from runtime.parsers import parse_reply
from runtime.parsers.base import OutcomeLabel

log = structlog.get_logger(__name__)

Variant = Literal["instructed", "plain"]

SYSTEM_PROMPT = (
    "You are a personal assistant. Earlier in this conversation the user shared documents, "
    "tables, screenshots and notes; they are no longer in your context but can be searched."
)
TOOL_INSTRUCTION = (
    "You must call artifact_recall to retrieve the evidence before answering; never answer "
    "from memory."
)
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("q3-revenue", "What was the Q3 revenue in the quarterly report I shared earlier?"),
    ("invoice-total", "How much was the total on the invoice from Northwind?"),
    ("meeting-date", "When is the design review meeting mentioned in my notes?"),
    ("chart-peak", "In the traffic chart screenshot, which month had the highest visits?"),
    ("contract-term", "How long is the notice period in the rental contract?"),
    ("recipe-oven", "What oven temperature did the bread recipe call for?"),
    ("flight-gate", "Which gate does my flight to Lisbon leave from?"),
    ("budget-line", "How much did we budget for travel in the 2024 plan spreadsheet?"),
)
FAILURE_LABELS: tuple[OutcomeLabel, ...] = (
    "marker_bad_body",
    "wrong_shape",
    "truncated",
    "unknown_tool",
    "missing_required",
    "unexpected_param",
    "type_error",
)


class StudyPrompt(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    variant: Variant
    question: str

    def messages(self, few_shot: Sequence[Message] = ()) -> list[Message]:
        """System prompt, the profile's few-shot turns (if any), then the question."""
        system = SYSTEM_PROMPT
        if self.variant == "instructed":
            system = f"{SYSTEM_PROMPT}\n{TOOL_INSTRUCTION}"
        return [SystemMessage(content=system), *few_shot, UserMessage.text(self.question)]


def study_prompts(n: int | None = None) -> list[StudyPrompt]:
    """Every question with and without the tool instruction, interleaved; ``n`` takes the
    first ``n`` (cycling through the set when ``n`` is larger)."""
    prompts = [
        StudyPrompt(id=f"{question_id}/{variant}", variant=variant, question=question)
        for question_id, question in QUESTIONS
        for variant in ("instructed", "plain")
    ]
    if n is None:
        return prompts
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return [prompts[index % len(prompts)] for index in range(n)]


class ReplyRecord(BaseModel):
    """One backbone reply as produced (or the provider error that replaced it)."""

    model_config = ConfigDict(frozen=True)

    model: str
    parser: str
    prompt_id: str
    variant: Variant
    text: str = ""
    native_tool_calls: tuple[ToolCall, ...] = ()
    truncated: bool = False
    provider_error: str | None = None


class ReplyOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    record: ReplyRecord
    adapters: bool
    overall: OutcomeLabel | Literal["provider_error"]
    call_labels: tuple[OutcomeLabel, ...] = ()
    executable: bool = False


class ComplianceRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str
    parser: str
    adapters: bool
    attempted: int
    ok: int
    adapted: int
    pseudo_tool: int
    no_call: int
    failures: dict[str, int]
    provider_error: int
    executable: int
    share_executable: float
    share_executable_instructed: float
    share_executable_plain: float


class ComplianceReport(BaseModel):
    rows: list[ComplianceRow]
    replies: list[ReplyOutcome]


async def collect_replies(
    backbone: Backbone,
    prompts: Sequence[StudyPrompt],
    tools: Sequence[ToolSpec],
    *,
    on_reply: Callable[[ReplyRecord], None] | None = None,
) -> list[ReplyRecord]:
    """Send every prompt to ``backbone`` once; provider failures are recorded, not raised."""
    text_mode = backbone.tool_mode == "text"
    parser = backbone.profile.parser if text_mode else "native"
    few_shot = backbone.profile.example_turns(tools) if text_mode else []
    records = []
    for prompt in prompts:
        record = ReplyRecord(
            model=backbone.model, parser=parser, prompt_id=prompt.id, variant=prompt.variant
        )
        try:
            completion = await backbone.complete(prompt.messages(few_shot), tools)
        except ProviderError as exc:
            log.warning("compliance_provider_error", model=backbone.model, kind=exc.kind)
            record = record.model_copy(update={"provider_error": str(exc)})
        else:
            record = record.model_copy(
                update={
                    "text": completion.text,
                    "truncated": completion.truncated,
                    "native_tool_calls": completion.native_tool_calls,
                }
            )
        records.append(record)
        if on_reply is not None:
            on_reply(record)
    return records


def judge(record: ReplyRecord, tools: Sequence[ToolSpec], *, adapters: bool) -> ReplyOutcome:
    if record.provider_error is not None:
        return ReplyOutcome(record=record, adapters=adapters, overall="provider_error")
    result = parse_reply(
        record.text,
        tools,
        family=record.parser,
        adapters=adapters,
        truncated=record.truncated,
        native_calls=record.native_tool_calls,
    )
    return ReplyOutcome(
        record=record,
        adapters=adapters,
        overall=result.overall,
        call_labels=tuple(call.label for call in result.calls),
        executable=result.executable,
    )


def tabulate(outcomes: Sequence[ReplyOutcome]) -> ComplianceRow:
    """One row from the outcomes of one backbone under one adapter setting."""
    if not outcomes:
        raise ValueError("cannot tabulate a backbone without replies")
    first = outcomes[0].record
    counts = Counter(outcome.overall for outcome in outcomes)
    executable = sum(outcome.executable for outcome in outcomes)
    return ComplianceRow(
        model=first.model,
        parser=first.parser,
        adapters=outcomes[0].adapters,
        attempted=len(outcomes),
        ok=counts["ok"],
        adapted=counts["adapted"],
        pseudo_tool=counts["pseudo_tool"],
        no_call=counts["no_call"],
        failures={label: counts[label] for label in FAILURE_LABELS},
        provider_error=counts["provider_error"],
        executable=executable,
        share_executable=executable / len(outcomes),
        share_executable_instructed=_share(outcomes, "instructed"),
        share_executable_plain=_share(outcomes, "plain"),
    )


def _share(outcomes: Sequence[ReplyOutcome], variant: Variant) -> float:
    chosen = [outcome for outcome in outcomes if outcome.record.variant == variant]
    return sum(outcome.executable for outcome in chosen) / len(chosen) if chosen else 0.0


async def run_compliance(
    backbones: Sequence[Backbone],
    *,
    tools: Sequence[ToolSpec],
    adapter_modes: Sequence[bool] = (False,),
    n: int | None = None,
    on_reply: Callable[[ReplyRecord], None] | None = None,
) -> ComplianceReport:
    """Run the study on each backbone with ``tools`` offered (``mirage compliance`` offers the
    memory server's ``artifact_recall``); every adapter mode parses the same replies."""
    prompts = study_prompts(n)
    rows: list[ComplianceRow] = []
    replies: list[ReplyOutcome] = []
    for backbone in backbones:
        records = await collect_replies(backbone, prompts, tools, on_reply=on_reply)
        for adapters in adapter_modes:
            outcomes = [judge(record, tools, adapters=adapters) for record in records]
            rows.append(tabulate(outcomes))
            replies.extend(outcomes)
    return ComplianceReport(rows=rows, replies=replies)


COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "the backbone's model string"),
    ("parser", "the parser family its replies were read with (`native`: the provider's own calls)"),
    (
        "adapters",
        "`on` when the pseudo-tool adapters read the replies (`--adapters both` parses "
        "the same replies both ways, one row each)",
    ),
    (
        "attempted",
        f"prompts sent: each of the {len(QUESTIONS)} questions once with the tool instruction "
        f"and once without ({2 * len(QUESTIONS)}; `--n N` sends the first N)",
    ),
    ("ok", "replies whose every call could run as written (label `ok`)"),
    ("adapted", "replies whose calls could run only once an adapter read them (label `adapted`)"),
    (
        "pseudo_tool",
        "replies with tool-like text in no format the parser reads "
        "(ReAct `Action:`, Qwen-Agent `✿FUNCTION✿`, a `tool_code` block, `<|im_start|>tool`, …) "
        "and not recovered as a call that could run",
    ),
    ("no_call", "replies with no call and nothing tool-like: an answer or a refusal"),
    ("marker_bad_body", "replies with a complete call whose body does not decode"),
    (
        "wrong_shape",
        "replies with a call that decodes but not as a call (no name, arguments not an object)",
    ),
    ("truncated", "replies that ended inside a call (the output budget ran out)"),
    ("unknown_tool", "replies calling a tool that was not offered"),
    ("missing_required", "replies with a call that leaves out a required argument"),
    ("unexpected_param", "replies with a call passing an argument the tool does not take"),
    (
        "type_error",
        "replies with a call whose argument is of a type the tool's schema does not "
        'allow (`"k": "5"` for an integer), out of its enum, or not a finite number',
    ),
    ("provider_error", "prompts the provider failed on (no reply; each reason in compliance.json)"),
    (
        "executable",
        "replies with at least one call that could run (`ok` or `adapted`; a reply "
        "mixing a good and a bad call counts here and under its failure)",
    ),
    ("share_executable", "executable / attempted"),
    (
        "instructed",
        "share executable among the prompts whose system prompt requires the tool "
        f'("{TOOL_INSTRUCTION}")',
    ),
    ("plain", "share executable among the prompts that offer the tool without asking for it"),
)
"""Every column of the compliance table and what it counts, written at the top of
``compliance.md`` and in docs/parsers.md ("The compliance table")."""


def legend() -> str:
    """What the table's columns count, as a Markdown list (the top of ``compliance.md``)."""
    lines = [f"- `{name}`: {meaning}" for name, meaning in COLUMNS]
    intro = (
        "Each backbone is sent every question about the user's earlier artifacts twice, with "
        "`artifact_recall` offered: once told to call it (`instructed`), once not (`plain`). "
        "Every reply is parsed with the backbone's parser; the label columns count replies by "
        "their overall label (docs/parsers.md)."
    )
    return intro + "\n\n" + "\n".join(lines) + "\n"


def render_markdown(rows: Sequence[ComplianceRow]) -> str:
    header = [name for name, _ in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [
            row.model,
            row.parser,
            "on" if row.adapters else "off",
            row.attempted,
            row.ok,
            row.adapted,
            row.pseudo_tool,
            row.no_call,
            *(row.failures[label] for label in FAILURE_LABELS),
            row.provider_error,
            row.executable,
            f"{row.share_executable:.0%}",
            f"{row.share_executable_instructed:.0%}",
            f"{row.share_executable_plain:.0%}",
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def write_report(report: ComplianceReport, out_dir: Path) -> tuple[Path, Path]:
    """``compliance.md`` (what the columns count, then the table) and ``compliance.json`` (rows
    and every reply)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = out_dir / "compliance.md"
    text = f"# Tool-call compliance\n\n{legend()}\n{render_markdown(report.rows)}"
    markdown.write_text(text, encoding="utf-8")
    data = out_dir / "compliance.json"
    data.write_text(json.dumps(report.model_dump(mode="json"), indent=1), encoding="utf-8")
    return markdown, data
