"""The compliance study's logic, driven by scripted backbones (no model needed)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from mirage.wiring import artifact_recall_tool
from runtime.backbones.base import ProviderError
from runtime.backbones.scripted import FunctionBackbone, ScriptedBackbone
from runtime.compliance import (
    TOOL_INSTRUCTION,
    legend,
    render_markdown,
    run_compliance,
    study_prompts,
    write_report,
)
from runtime.messages import Message, SystemMessage, ToolSpec, UserMessage
from runtime.profiles import resolve_profile

CALL = '<tool_call>{"name": "artifact_recall", "arguments": {"query": "%s"}}</tool_call>'
PSEUDO = '<|im_start|>tool\nartifact_recall(query="%s")'
TOOLS = [artifact_recall_tool()]


def _obedient_only_when_told(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    """Emits a Hermes call under the instruction, InternVL-style pseudo-tool text without."""
    assert [tool.name for tool in tools] == ["artifact_recall"]
    system, user = messages[0], messages[1]
    assert isinstance(system, SystemMessage) and isinstance(user, UserMessage)
    question = user.plain_text[:20]
    return CALL % question if TOOL_INSTRUCTION in system.content else PSEUDO % question


async def test_rows_count_labels_and_adapters_parse_the_same_replies() -> None:
    backbone = FunctionBackbone(_obedient_only_when_told, model="served/qwen3-8b")
    report = await run_compliance([backbone], tools=TOOLS, adapter_modes=(False, True))
    assert len(backbone.calls) == 16
    off, on = report.rows
    assert (off.adapters, off.attempted, off.ok, off.pseudo_tool, off.adapted) == (
        False,
        16,
        8,
        8,
        0,
    )
    assert (off.share_executable, off.share_executable_instructed, off.share_executable_plain) == (
        0.5,
        1.0,
        0.0,
    )
    assert (on.adapters, on.ok, on.pseudo_tool, on.adapted, on.share_executable) == (
        True,
        8,
        0,
        8,
        1.0,
    )
    assert on.parser == "hermes"
    assert len(report.replies) == 32


async def test_failures_and_provider_errors_are_counted_separately() -> None:
    replies = [
        '<tool_call>{"name": "artifact_recall", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "artifact_recall", "arguments": {"query": "x", "k": "lots"}}',
        ProviderError("timeout", "no answer in 60 s"),
        "The bread recipe called for 220 °C.",
    ]
    backbone = ScriptedBackbone(replies, model="gemma-3-27b-it")
    report = await run_compliance([backbone], tools=TOOLS, n=4)
    (row,) = report.rows
    assert row.parser == "pythonic"
    assert (row.attempted, row.ok, row.no_call, row.provider_error, row.pseudo_tool) == (
        4,
        0,
        1,
        1,
        2,
    )
    assert row.executable == 0


async def test_one_row_per_model_and_report_files(tmp_path: Path) -> None:
    good = ScriptedBackbone([CALL % "a"] * 2, model="qwen3-a")
    silent = ScriptedBackbone(["I don't know."] * 2, model="qwen3-b")
    report = await run_compliance([good, silent], tools=TOOLS, n=2)
    markdown_path, json_path = write_report(report, tmp_path / "out")
    table = markdown_path.read_text()
    assert table.count("\n| qwen3-") == 2
    assert "| qwen3-a | hermes | off | 2 | 2 |" in table
    assert "| qwen3-b | hermes | off | 2 | 0 |" in table
    data = json.loads(json_path.read_text())
    assert [row["share_executable"] for row in data["rows"]] == [1.0, 0.0]
    assert data["replies"][0]["record"]["text"] == CALL % "a"
    assert table.startswith("# Tool-call compliance\n\n" + legend())
    assert table.endswith("\n" + render_markdown(report.rows))


async def test_text_mode_backbones_get_their_profile_few_shot_turns() -> None:
    backbone = ScriptedBackbone([CALL % "a"], model="local/smollm2-135m")
    report = await run_compliance([backbone], tools=TOOLS, n=1)
    sent = backbone.calls[0].messages
    assert [message.role for message in sent] == ["system", "user", "assistant", "user"]
    assert report.rows[0].ok == 1


def test_study_prompts_alternate_variants_and_cycle() -> None:
    prompts = study_prompts()
    assert len(prompts) == 16 and len({prompt.id for prompt in prompts}) == 16
    assert [prompt.variant for prompt in prompts[:2]] == ["instructed", "plain"]
    assert TOOL_INSTRUCTION in str(prompts[0].messages()[0])
    assert TOOL_INSTRUCTION not in str(prompts[1].messages()[0])
    assert study_prompts(20)[16] == prompts[0]
    with pytest.raises(ValueError, match="at least 1"):
        study_prompts(0)


def test_profile_of_the_backbone_picks_the_parser() -> None:
    backbone = ScriptedBackbone([], model="x", profile=resolve_profile("mistral-small"))
    assert backbone.profile.parser == "mistral"
