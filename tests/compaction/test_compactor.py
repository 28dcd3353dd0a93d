"""Manual compaction of sessions and snapshots: the record, the tail, the previous summary."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from compaction.compactor import compact, compact_snapshot
from compaction.errors import NothingToCompact
from compaction.transcript import SUMMARY_MARKER, previous_summary
from mirage.cli import app
from runtime.backbones.scripted import ScriptedBackbone
from runtime.messages import AssistantMessage, ToolResultMessage, UserMessage
from runtime.snapshot import load_snapshot, save_snapshot
from tests.compaction.helpers import conversation, session_with


async def test_manual_compaction_keeps_the_tail_and_records_everything() -> None:
    original = conversation(turns=20)
    session = session_with(original)
    before = session.history_tokens
    summarizer = ScriptedBackbone(["## Goal\nkeep the chart ids"], model="summarizer-m")

    record = await compact(
        session, "free-form", summarizer, focus="chart values", keep_recent_tokens=2_000
    )

    start = record.first_kept_index
    assert session.messages[1:] == original[start:]
    assert sum(session.message_tokens[1:]) <= 2_000
    assert not isinstance(session.messages[1], ToolResultMessage)
    assert previous_summary(session.messages[0]) == "## Goal\nkeep the chart ids"
    assert record.first_kept_message == original[start]
    assert record.summary == "## Goal\nkeep the chart ids"
    assert (record.format, record.summarizer_model, record.focus, record.reason) == (
        "free-form",
        "summarizer-m",
        "chart values",
        "manual",
    )
    assert record.tokens_before > before > record.tokens_after  # system prompt counted
    assert session.compaction.count == 1 and session.compaction.records == [record]
    assert session.ledger.calls[-1].purpose == "summary"
    assert session.ledger.current_eit == 0  # summary calls are not the agent's EIT

    prompt = summarizer.calls[0].messages[-1]
    assert isinstance(prompt, UserMessage)
    assert "[0] USER: turn 0" in prompt.plain_text
    assert f"[{start - 1}]" in prompt.plain_text and f"[{start}]" not in prompt.plain_text
    assert "chart values" in prompt.plain_text


async def test_a_second_compaction_folds_the_previous_summary_in() -> None:
    session = session_with(conversation(turns=20))
    summarizer = ScriptedBackbone(["first summary", "second summary"])
    await compact(session, "verbatim", summarizer, keep_recent_tokens=4_000)
    kept_after_first = list(session.messages[1:])
    await compact(session, "verbatim", summarizer, keep_recent_tokens=1_000)

    second_prompt = summarizer.calls[1].messages[-1]
    assert isinstance(second_prompt, UserMessage)
    assert "<previous_summary>\nfirst summary\n</previous_summary>" in second_prompt.plain_text
    assert SUMMARY_MARKER not in second_prompt.plain_text
    assert previous_summary(session.messages[0]) == "second summary"
    assert session.messages[1:] == kept_after_first[-(len(session.messages) - 1) :]
    assert session.compaction.count == 2


async def test_nothing_to_compact() -> None:
    session = session_with(conversation(turns=2))
    with pytest.raises(NothingToCompact, match="fit in the"):
        await compact(session, "verbatim", ScriptedBackbone([]), keep_recent_tokens=50_000)
    assert session.compaction.count == 0


async def test_default_keep_comes_from_the_window_budget() -> None:
    session = session_with(conversation(turns=30), window=8_192)
    await compact(session, "verbatim", ScriptedBackbone(["s"]))
    assert sum(session.message_tokens[1:]) <= 2_048  # keep_recent(8k)


async def test_compacting_a_snapshot_never_touches_the_input(tmp_path: Path) -> None:
    source = save_snapshot(session_with(conversation(turns=20)), tmp_path / "in")
    raw = source.read_bytes()
    path, record = await compact_snapshot(
        source,
        tmp_path / "out",
        "per-fact-citations",
        ScriptedBackbone(["- fact [source: x.csv]"]),
        keep_recent_tokens=1_500,
    )
    assert source.read_bytes() == raw
    assert path.parent == tmp_path / "out" and path != source
    restored = load_snapshot(path)
    assert restored.compaction.records == [record]
    assert restored.compaction.records[0].format == "per-fact-citations"
    assert len(restored.messages) < len(load_snapshot(source).messages)


def test_cli_reports_bad_input_clearly(tmp_path: Path, cli_runner: CliRunner) -> None:
    runner = cli_runner
    missing = runner.invoke(app, ["compact", str(tmp_path / "x.session"), "--out", str(tmp_path)])
    assert missing.exit_code == 1 and "cannot read snapshot" in missing.output
    source = save_snapshot(session_with(conversation(turns=3)), tmp_path)
    bad = runner.invoke(app, ["compact", str(source), "--format", "haiku", "--out", str(tmp_path)])
    assert bad.exit_code == 1 and "unknown summary format 'haiku'" in bad.output
    assert isinstance(load_snapshot(source).messages[-1], AssistantMessage)
