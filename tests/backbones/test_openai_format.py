"""Typed messages → OpenAI chat dicts, per tool mode and profile."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from runtime.backbones.openai_format import to_openai_messages, to_openai_tools
from runtime.messages import (
    AssistantMessage,
    ImagePart,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from runtime.parsers import get_parser
from runtime.profiles import resolve_profile

RECALL = ToolSpec(
    name="artifact_recall",
    description="Recall an artifact by id.",
    parameters={
        "type": "object",
        "properties": {"artifact_id": {"type": "string"}},
        "required": ["artifact_id"],
    },
)
CALL = ToolCall(id="call_7", name="artifact_recall", arguments={"artifact_id": "a1"})
HISTORY = (
    SystemMessage(content="You are careful."),
    UserMessage.text("What was in a1?"),
    AssistantMessage(
        content="Let me look.",
        tool_calls=(CALL,),
        raw='Let me look.<tool_call>\n{"name": "artifact_recall"}\n</tool_call>',
    ),
    ToolResultMessage(tool_call_id="call_7", name="artifact_recall", content="a1: 42 apples"),
)
OPENAI = resolve_profile("gpt-4o")
SMOLLM = resolve_profile("local/smollm2-135m")
QWEN = resolve_profile("hosted_vllm/Qwen2.5-7B-Instruct")


def test_native_mode_keeps_tool_calls_and_results_structured() -> None:
    converted = to_openai_messages(HISTORY, [RECALL], OPENAI, "native")
    assert converted[0] == {"role": "system", "content": "You are careful."}
    assert converted[1] == {"role": "user", "content": "What was in a1?"}
    assistant = converted[2]
    assert assistant["content"] == "Let me look."
    assert assistant["tool_calls"] == [
        {
            "id": "call_7",
            "type": "function",
            "function": {"name": "artifact_recall", "arguments": '{"artifact_id": "a1"}'},
        }
    ]
    assert converted[3] == {"role": "tool", "tool_call_id": "call_7", "content": "a1: 42 apples"}
    assert to_openai_tools([RECALL], "native") == [RECALL.to_openai()]


def test_text_mode_puts_tools_in_system_prompt_and_replays_raw() -> None:
    converted = to_openai_messages(HISTORY, [RECALL], SMOLLM, "text")
    system = converted[0]["content"]
    assert system.startswith("You are careful.\n\n")
    assert "<tools>" in system and '"name": "artifact_recall"' in system
    assert converted[2] == {"role": "assistant", "content": HISTORY[2].raw}
    assert "tool_calls" not in converted[2]
    assert to_openai_tools([RECALL], "text") == []


def test_text_mode_tool_result_as_user_is_wrapped_for_hermes_profiles() -> None:
    converted = to_openai_messages(HISTORY, [RECALL], SMOLLM, "text")
    assert converted[3] == {
        "role": "user",
        "content": "<tool_response>\na1: 42 apples\n</tool_response>",
    }


def test_text_mode_tool_role_is_left_for_the_chat_template_to_wrap() -> None:
    converted = to_openai_messages(HISTORY, [RECALL], QWEN, "text")
    assert converted[3] == {"role": "tool", "tool_call_id": "call_7", "content": "a1: 42 apples"}


def test_text_mode_adds_a_system_message_when_there_is_none() -> None:
    converted = to_openai_messages([UserMessage.text("hi")], [RECALL], SMOLLM, "text")
    assert converted[0]["role"] == "system" and "<tools>" in converted[0]["content"]
    assert converted[1] == {"role": "user", "content": "hi"}


def test_text_mode_without_tools_leaves_the_system_prompt_alone() -> None:
    converted = to_openai_messages(HISTORY[:2], [], SMOLLM, "text")
    assert converted[0] == {"role": "system", "content": "You are careful."}


@pytest.mark.parametrize("model", ["local/smollm2-135m", "ollama/llama3.2", "qwen3-coder"])
def test_text_mode_replays_calls_without_raw_in_the_profile_format(model: str) -> None:
    profile = resolve_profile(model)
    message = AssistantMessage(content="Checking.", tool_calls=(CALL,))
    converted = to_openai_messages([message], [], profile, "text")
    assert converted[0]["content"] == f"Checking.\n{profile.render_call(CALL)}"
    assert "artifact_recall" in converted[0]["content"]


def test_hermes_replay_matches_what_the_hermes_parser_reads() -> None:
    message = AssistantMessage(tool_calls=(CALL,))
    text = to_openai_messages([message], [], SMOLLM, "text")[0]["content"]
    parsed = get_parser("hermes").parse(text, [RECALL])
    assert parsed.overall == "ok"
    assert (parsed.calls[0].name, parsed.calls[0].arguments) == (
        "artifact_recall",
        {"artifact_id": "a1"},
    )


def test_profiles_without_a_tool_prompt_leave_the_system_message_alone() -> None:
    converted = to_openai_messages(HISTORY[:2], [RECALL], OPENAI, "text")
    assert converted[0] == {"role": "system", "content": "You are careful."}


def test_image_reaches_a_vision_model_as_a_data_url(tmp_path: Path) -> None:
    image_file = tmp_path / "chart.png"
    image_file.write_bytes(b"\x89PNG fake pixels")
    message = UserMessage.text(
        "Look:", images=(ImagePart(path=str(image_file), artifact_id="chart-1"),)
    )
    converted = to_openai_messages([message], [], OPENAI, "native")
    parts = converted[0]["content"]
    assert parts[0] == {"type": "text", "text": "Look:"}
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == b"\x89PNG fake pixels"


def test_image_from_inline_data_keeps_its_media_type() -> None:
    message = UserMessage.text("x", images=(ImagePart(data_b64="QUJD", media_type="image/jpeg"),))
    parts = to_openai_messages([message], [], OPENAI, "native")[0]["content"]
    assert parts[1]["image_url"]["url"] == "data:image/jpeg;base64,QUJD"


def test_image_for_a_text_only_model_becomes_its_text_representation() -> None:
    image = ImagePart(
        data_b64="QUJD", artifact_id="chart-1", text_representation="month,sales\nJan,3"
    )
    converted = to_openai_messages([UserMessage.text("Look:", images=(image,))], [], SMOLLM, "text")
    assert converted[0]["content"] == "Look:\n[image chart-1: month,sales\nJan,3]"


def test_image_without_text_for_a_text_only_model_becomes_a_clear_placeholder() -> None:
    image = ImagePart(data_b64="QUJD", artifact_id="photo-9")
    content = to_openai_messages([UserMessage.text("Look:", images=(image,))], [], SMOLLM, "text")[
        0
    ]["content"]
    assert content.startswith("Look:\n[image photo-9: ")
    assert "cannot see images" in content


def test_missing_image_file_is_a_clear_error(tmp_path: Path) -> None:
    image = ImagePart(path=str(tmp_path / "gone.png"), artifact_id="gone")
    with pytest.raises(ValueError, match=r"image gone: file not found"):
        to_openai_messages([UserMessage.text("x", images=(image,))], [], OPENAI, "native")


def test_native_arguments_are_json_strings() -> None:
    converted = to_openai_messages(HISTORY, [RECALL], OPENAI, "native")
    arguments = converted[2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"artifact_id": "a1"}
