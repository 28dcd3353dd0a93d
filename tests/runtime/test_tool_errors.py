"""The tool error the loop returns for a call it cannot run: which calls, and its words (those of
the OpenAI Agents SDK's default tool error function, the family's own syntax asked for)."""

from __future__ import annotations

import pytest

from runtime.messages import ToolSpec
from runtime.parsers import parse_reply
from runtime.tool_errors import returns_error, tool_error_message

LOOKUP = ToolSpec(
    name="lookup",
    parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
)


@pytest.mark.parametrize(
    ("family", "reply", "label", "words"),
    [
        (
            "hermes",
            '<tool_call>{"name": "lookup", "arguments": {"key": }}</tool_call>',
            "marker_bad_body",
            "An error occurred while parsing tool arguments. Please try again with valid JSON. "
            "Error: ",
        ),
        (
            "pythonic",
            "[lookup(key='a'), lookup(key=)]",
            "marker_bad_body",
            "Please try again with a valid Python call. Error: ",
        ),
        (
            "hermes",
            '<tool_call>{"arguments": {"key": "a"}}</tool_call>',
            "wrong_shape",
            'Please try again with valid JSON. Error: the call object has no "name" string',
        ),
        (
            "hermes",
            '<tool_call>{"name": "lookup", "arguments": {"key": "a", "k": 5}}</tool_call>',
            "unexpected_param",
            "An error occurred while running the tool. Please try again. Error: Invalid "
            "arguments for tool lookup: unexpected argument(s): k",
        ),
        (
            "hermes",
            '<tool_call>{"name": "lookup", "arguments": {"key": ["a"]}}</tool_call>',
            "type_error",
            "Error: Invalid arguments for tool lookup: argument 'key' is an array, not of type "
            "string",
        ),
    ],
)
def test_the_error_says_what_was_wrong(family: str, reply: str, label: str, words: str) -> None:
    calls = [c for c in parse_reply(reply, [LOOKUP], family=family).calls if not c.executable]
    assert [c.label for c in calls] == [label]
    assert returns_error(calls[0])
    assert words in tool_error_message(calls[0], family)


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>{"name": "lookup", "arguments": {"key": "a',  # cut off: truncated
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',  # unknown_tool
    ],
)
def test_cut_off_and_unknown_calls_get_no_error(reply: str) -> None:
    (call,) = parse_reply(reply, [LOOKUP], family="hermes").calls
    assert not returns_error(call)
    with pytest.raises(ValueError, match=f"a {call.label} call is not answered"):
        tool_error_message(call, "hermes")
