"""Schema validation shared by every parser family: arguments as written, checked against the
tool's own schema (``ok`` means the tool's server would run the call)."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.messages import ToolSpec
from runtime.parsers.validation import fits, validate_arguments

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
        ({"n": 42}, {"n": 42}),
        ({"n": 3.0}, {"n": 3}),  # the same JSON number: an integer in JSON Schema
        ({"x": 2.5}, {"x": 2.5}),
        ({"x": 2}, {"x": 2}),
        ({"flag": True}, {"flag": True}),
        ({"tags": ["a", "b"]}, {"tags": ["a", "b"]}),
        ({"maybe": "7"}, {"maybe": "7"}),
        ({"maybe": 7}, {"maybe": 7}),
        ({"mode": "fast"}, {"mode": "fast"}),
        ({"n": None}, {}),  # an optional argument sent as null: left out
    ],
)
def test_values_of_the_schema_type_are_ok(
    arguments: dict[str, Any], expected: dict[str, Any]
) -> None:
    call = validate_arguments("t", arguments, [TOOL], raw="")
    assert (call.label, call.arguments) == ("ok", expected)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"n": "42"}, "argument 'n' is a string, not of type integer"),
        ({"n": "4.5"}, "argument 'n' is a string, not of type integer"),
        ({"n": 4.5}, "argument 'n' is a number, not of type integer"),
        ({"n": True}, "argument 'n' is a boolean, not of type integer"),
        ({"x": "2.5"}, "argument 'x' is a string, not of type number"),
        ({"flag": "True"}, "argument 'flag' is a string, not of type boolean"),
        ({"flag": "yes"}, "argument 'flag' is a string, not of type boolean"),
        ({"tags": '["a", "b"]'}, "argument 'tags' is a string, not of type array"),
        ({"tags": "a,b"}, "argument 'tags' is a string, not of type array"),
        ({"mode": 1}, "argument 'mode' is a number, not of type string"),
        ({"tags": ["a", 1]}, "tags/1: 1 is not of type 'string'"),
        ({"mode": "slow"}, "mode: 'slow' is not one of ['fast', 'exact']"),
    ],
)
def test_values_of_another_type_are_type_errors_never_converted(
    arguments: dict[str, Any], error: str
) -> None:
    """The issue's case: ``"k": "5"`` is not an integer, and the memory server refuses it."""
    call = validate_arguments("t", arguments, [TOOL], raw="")
    assert (call.label, call.error) == ("type_error", error)
    assert call.arguments == arguments


def test_the_memory_servers_k_as_a_string_is_a_type_error() -> None:
    from mirage.wiring import default_tools
    from runtime.parsers import parse_reply

    text = (
        '<tool_call>{"name": "artifact_recall", "arguments": {"query": "x", "k": "5"}}</tool_call>'
    )
    result = parse_reply(text, default_tools(), family="hermes")
    assert result.overall == "type_error"
    assert result.calls[0].error == "argument 'k' is a string, not of type integer"
    assert not result.executable


def test_extra_arguments_allowed_only_when_the_schema_says_so() -> None:
    open_tool = ToolSpec(
        name="o", parameters={"type": "object", "properties": {}, "additionalProperties": True}
    )
    assert validate_arguments("o", {"any": 1}, [open_tool], raw="").label == "ok"
    assert validate_arguments("t", {"any": 1}, [TOOL], raw="").label == "unexpected_param"


def test_invalid_tool_schema_is_not_held_against_the_model() -> None:
    broken = ToolSpec(name="b", parameters={"type": "object", "properties": {"a": {"type": 5}}})
    assert validate_arguments("b", {"a": "x"}, [broken], raw="").label == "ok"


def test_a_value_fits_any_type_the_schema_allows() -> None:
    assert fits("5", {"type": ["string", "integer"]})
    assert fits(5, {"type": ["string", "integer"]})
    assert not fits("5", {"type": "integer"})
    assert fits(None, {"anyOf": [{"type": "integer"}, {"type": "null"}]})
    assert fits("anything", {"description": "no type"})


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
        ({"mode": float("nan")}, "mode"),
        ({"tags": [float("nan")]}, "tags/0"),
    ],
)
def test_non_finite_numbers_are_type_errors(arguments: dict[str, Any], where: str) -> None:
    """JSON has no NaN or Infinity: such an argument must never become executable (Python's
    decoders accept ``1e999``, ``NaN`` and ``Infinity``); a string ``"NaN"`` is a string."""
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
