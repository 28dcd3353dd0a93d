"""Summary formats: what each prompt must contain, template errors, chunked summaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from compaction.errors import CompactionError, TemplateError, UnknownStrategyError
from compaction.strategies import FORMAT_NAMES, SummaryRequest, get_strategy
from compaction.strategies.builtin import SECTIONS
from runtime.backbones.base import ProviderError
from runtime.backbones.scripted import FunctionBackbone, ScriptedBackbone
from runtime.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from runtime.tokens import count_message_tokens
from tests.compaction.helpers import conversation, words

EVIDENCE: list[Message] = [
    UserMessage.text("Please track invoice INV-2023-0042; the total is 4812.5 EUR."),
    AssistantMessage(
        tool_calls=(
            ToolCall(
                id="call-3",
                name="artifact_get",
                arguments={"path": "derived/chart_3f9a1c20.table.csv"},
            ),
        )
    ),
    ToolResultMessage(tool_call_id="call-3", name="artifact_get", content="Berlin,2019,1830"),
]
REQUEST = SummaryRequest(
    transcript="[0] USER: hello",
    focus="rent values",
    previous_summary="earlier: cat is Miso",
    first_index=0,
    last_index=0,
    message_count=1,
)


def _prompt_text(messages: list[Message]) -> tuple[str, str]:
    system, user = messages
    assert isinstance(system, SystemMessage) and isinstance(user, UserMessage)
    return system.content, user.plain_text


def test_registry_names_and_unknown_format() -> None:
    assert FORMAT_NAMES == ("verbatim", "free-form", "per-fact-citations", "template:FILE")
    for name in FORMAT_NAMES[:3]:
        assert get_strategy(name).name == name
    with pytest.raises(UnknownStrategyError, match="unknown summary format 'bullets'"):
        get_strategy("bullets")


def test_verbatim_prompt_has_the_sections_and_the_exactness_rule() -> None:
    system, user = _prompt_text(get_strategy("verbatim").build_prompt(REQUEST))
    positions = [system.index(f"## {section}") for section in SECTIONS]
    assert positions == sorted(positions)
    assert "opaque identifier" in system and "exactly as written" in system
    assert "[0] USER: hello" in user
    assert "rent values" in user and "earlier: cat is Miso" in user


def test_free_form_prompt_asks_for_prose() -> None:
    system, _ = _prompt_text(get_strategy("free-form").build_prompt(REQUEST))
    assert "prose" in system and "without headings" in system
    assert "## Goal" not in system and "exactly as written" in system


def test_citations_prompt_requires_a_source_per_value() -> None:
    system, user = _prompt_text(get_strategy("per-fact-citations").build_prompt(REQUEST))
    assert "[source: <source>]" in system and "artifact id" in system
    assert "[source: message N]" in system
    assert "source:" in user


def test_optional_blocks_are_left_out_when_empty() -> None:
    bare = SummaryRequest(transcript="[0] USER: hi")
    _, user = _prompt_text(get_strategy("verbatim").build_prompt(bare))
    assert "previous_summary" not in user and "Focus" not in user


async def test_the_summarizer_sees_every_identifier_of_the_compacted_messages() -> None:
    summarizer = ScriptedBackbone(["## Goal\ntrack INV-2023-0042"])
    result = await get_strategy("per-fact-citations").summarize(EVIDENCE, summarizer)
    assert result.summary == "## Goal\ntrack INV-2023-0042"
    assert summarizer.calls[0].tools == ()
    _, user = _prompt_text(list(summarizer.calls[0].messages))
    for needle in (
        "INV-2023-0042",
        "4812.5 EUR",
        "call-3",
        "derived/chart_3f9a1c20.table.csv",
        "Berlin,2019,1830",
    ):
        assert needle in user


def test_template_placeholders(tmp_path: Path) -> None:
    template = tmp_path / "t.txt"
    template.write_text(
        "Focus={focus} prev={previous_summary} n={message_count} "
        "range={first_index}-{last_index} {{literal}}\n{transcript}"
    )
    strategy = get_strategy(f"template:{template}")
    assert strategy.name == f"template:{template}"
    _, user = _prompt_text(strategy.build_prompt(REQUEST))
    assert user == (
        "Focus=rent values prev=earlier: cat is Miso n=1 range=0-0 {literal}\n[0] USER: hello"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("Summarise {transcript} for {audience}", r"unknown placeholder \{audience\}"),
        ("Summarise {} please", r"unknown placeholder \{\}"),
        ("Summarise {transcript.upper}", r"unknown placeholder"),
        ("Summarise {transcript:>10}", "no format spec"),
        ("Summarise {transcript!r}", "no format spec"),
        ("Summarise {transcript", "malformed template"),
        ("Summarise this }", "malformed template"),
        ("Summarise {focus} only", r"must contain the \{transcript\}"),
        ("   \n", "is empty"),
    ],
)
def test_template_errors(tmp_path: Path, content: str, message: str) -> None:
    template = tmp_path / "bad.txt"
    template.write_text(content)
    with pytest.raises(TemplateError, match=message):
        get_strategy(f"template:{template}")


def test_template_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="does not exist"):
        get_strategy(f"template:{tmp_path / 'missing.txt'}")
    with pytest.raises(TemplateError, match="give the template file"):
        get_strategy("template:")


async def test_long_transcripts_are_summarised_in_chunks_that_fit_the_window() -> None:
    window = 1_500
    seen: list[int] = []

    def summarize(messages: list[Message]) -> str:
        size = sum(count_message_tokens(message) for message in messages)
        seen.append(size)
        if size > window:
            raise ProviderError("context_length", f"{size} > {window}")
        return f"summary after call {len(seen)} " + words(60, "s")

    summarizer = FunctionBackbone(summarize, context_window=window)
    summarizer.max_output_tokens = 200  # type: ignore[attr-defined]
    messages = conversation(turns=12)
    result = await get_strategy("verbatim").summarize(messages, summarizer)
    assert result.chunks == len(seen) > 2
    assert max(seen) <= window - 200
    assert result.summary.startswith(f"summary after call {len(seen)}")
    for index, call in enumerate(summarizer.calls[1:], start=1):
        assert f"summary after call {index} " in _prompt_text(list(call.messages))[1]
    transcript = "".join(_prompt_text(list(call.messages))[1] for call in summarizer.calls)
    assert all(f"[{index}]" in transcript for index in range(len(messages)))


async def test_an_oversized_message_is_shortened_with_a_note() -> None:
    summarizer = ScriptedBackbone(["short summary"], context_window=1_000)
    huge = [UserMessage.text("START " + words(3_000) + " END")]
    result = await get_strategy("free-form").summarize(huge, summarizer)
    assert result.shortened_messages == 1
    _, user = _prompt_text(list(summarizer.calls[0].messages))
    assert "START" in user and "END" in user and "tokens omitted" in user


async def test_context_length_errors_shrink_the_chunk_then_give_up() -> None:
    summarizer = ScriptedBackbone(
        [ProviderError("context_length", "too long")] * 10, context_window=4_000
    )
    with pytest.raises(CompactionError, match="rejected every chunk size"):
        await get_strategy("verbatim").summarize(conversation(turns=6), summarizer)
    sizes = [sum(count_message_tokens(m) for m in call.messages) for call in summarizer.calls]
    assert len(sizes) == 4 and sizes == sorted(sizes, reverse=True)


async def test_empty_summary_and_window_too_small_are_errors() -> None:
    with pytest.raises(CompactionError, match="empty summary"):
        await get_strategy("verbatim").summarize(EVIDENCE, ScriptedBackbone(["   "]))
    tiny = ScriptedBackbone([], context_window=300)
    with pytest.raises(CompactionError, match="cannot hold the verbatim prompt"):
        await get_strategy("verbatim").summarize(EVIDENCE, tiny)


async def test_other_provider_errors_propagate() -> None:
    summarizer = ScriptedBackbone([ProviderError("server_error", "503")])
    with pytest.raises(ProviderError, match="server_error"):
        await get_strategy("verbatim").summarize(EVIDENCE, summarizer)
