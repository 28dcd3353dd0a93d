"""Schema validation and coercion shared by every parser family."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.messages import ToolSpec
from runtime.parsers.validation import coerce, validate_arguments

TOOL = ToolSpec(
    name="t",
    parameters={
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "flag": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "mode": {"type": "string", "enum": ["fast", "exact"]},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        },
        "required": [],
    },
)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"n": "42"}, {"n": 42}),
        ({"n": 3.0}, {"n": 3}),
        ({"x": "2.5"}, {"x": 2.5}),
        ({"flag": "True"}, {"flag": True}),
        ({"tags": '["a", "b"]'}, {"tags": ["a", "b"]}),
        ({"maybe": "7"}, {"maybe": "7"}),
        ({"mode": "fast"}, {"mode": "fast"}),
    ],
)
def test_values_are_coerced_to_the_schema_type(
    arguments: dict[str, Any], expected: dict[str, Any]
) -> None:
    call = validate_arguments("t", arguments, [TOOL], raw="")
    assert (call.label, call.arguments) == ("ok", expected)


@pytest.mark.parametrize(
    "arguments",
    [
        {"n": "4.5"},
        {"n": True},
        {"flag": "yes"},
        {"tags": ["a", 1]},
        {"mode": "slow"},
        {"tags": "a,b"},
    ],
)
def test_values_that_cannot_fit_are_type_errors(arguments: dict[str, Any]) -> None:
    call = validate_arguments("t", arguments, [TOOL], raw="")
    assert call.label == "type_error"
    assert call.error


def test_extra_arguments_allowed_only_when_the_schema_says_so() -> None:
    open_tool = ToolSpec(
        name="o", parameters={"type": "object", "properties": {}, "additionalProperties": True}
    )
    assert validate_arguments("o", {"any": 1}, [open_tool], raw="").label == "ok"
    assert validate_arguments("t", {"any": 1}, [TOOL], raw="").label == "unexpected_param"


def test_invalid_tool_schema_is_not_held_against_the_model() -> None:
    broken = ToolSpec(name="b", parameters={"type": "object", "properties": {"a": {"type": 5}}})
    assert validate_arguments("b", {"a": "x"}, [broken], raw="").label == "ok"


def test_coerce_prefers_an_exact_type_match() -> None:
    assert coerce("5", {"type": ["string", "integer"]}) == (True, "5")
    assert coerce("5", {"type": ["integer", "string"]}) == (True, "5")
    assert coerce("5", {"type": "integer"}) == (True, 5)


def test_native_call_with_non_object_arguments_is_a_bad_body() -> None:
    from mirage.wiring import default_tools
    from runtime.messages import RAW_ARGUMENTS_KEY, ToolCall
    from runtime.parsers import parse_reply

    call = ToolCall(id="1", name="artifact_recall", arguments={RAW_ARGUMENTS_KEY: "[1, 2"})
    result = parse_reply("", default_tools(), family="native", native_calls=[call])
    assert result.overall == "marker_bad_body"
    assert result.calls[0].raw == "[1, 2"


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"x": float("inf")}, "x"),
        ({"x": float("-inf")}, "x"),
        ({"x": float("nan")}, "x"),
        ({"x": "NaN"}, "x"),
        ({"x": "1e999"}, "x"),
        ({"mode": float("nan")}, "mode"),
        ({"tags": "[NaN]"}, "tags/0"),
    ],
)
def test_non_finite_numbers_are_type_errors(arguments: dict[str, Any], where: str) -> None:
    """JSON has no NaN or Infinity: such an argument must never become executable (Python's
    decoders accept ``1e999``, ``NaN`` and ``Infinity``; a string one converts to them)."""
    call = validate_arguments("t", arguments, [TOOL], raw="")
    assert call.label == "type_error"
    assert (
        call.error
        == f"argument {where!r} is not a finite number (1e999, NaN and Infinity have no JSON form)"
    )


@pytest.mark.parametrize(
    ("family", "text"),
    [
        ("hermes", '<tool_call>{"name": "t", "arguments": {"x": 1e999}}</tool_call>'),
        ("hermes", '<tool_call>{"name": "t", "arguments": {"x": NaN}}</tool_call>'),
        ("json", '{"name": "t", "parameters": {"x": -Infinity}}'),
        ("mistral", '[TOOL_CALLS]t{"x": Infinity}'),
        (
            "internlm",
            '<|action_start|><|plugin|>{"name": "t", "parameters": {"x": NaN}}<|action_end|>',
        ),
        ("pythonic", "[t(x=1e999)]"),
        (
            "qwen3_xml",
            "<tool_call><function=t><parameter=x>1e999</parameter></function></tool_call>",
        ),
    ],
)
def test_no_family_makes_a_non_finite_argument_executable(family: str, text: str) -> None:
    from runtime.parsers import parse_reply

    result = parse_reply(text, [TOOL], family=family)
    assert result.overall == "type_error", result.model_dump()
    assert not result.executable_calls("c")


def test_a_native_call_with_a_non_finite_argument_is_not_executable() -> None:
    """Providers decode arguments with decoders that accept ``NaN``; the call is still
    validated like a parsed one."""
    import json

    from runtime.messages import ToolCall
    from runtime.parsers import parse_reply

    arguments = json.loads('{"x": NaN, "n": 1}')
    call = ToolCall(id="1", name="t", arguments=arguments)
    result = parse_reply("", [TOOL], family="native", native_calls=[call])
    assert result.overall == "type_error"
    assert not result.executable_calls("c")
