"""The tool error the agent loop returns to the model for a call it cannot run.

Above: the agent loop (``runtime.agent``), which answers such a call with a tool-result message
marked ``is_error`` instead of ending the turn, while a round remains, so the model can correct
itself. Below: the parsers' per-call outcome labels (``runtime.parsers.base``).

Which calls are answered (``RETURNED_LABELS``): a complete call whose body does not decode
(``marker_bad_body``) or decodes but not as a call (``wrong_shape``), and a call whose arguments
fail the offered tool's schema (``missing_required``, ``unexpected_param``, ``type_error``). Not
answered: ``truncated`` (the reply ran out of budget inside the call), ``unknown_tool`` (no
such tool was offered) and ``pseudo_tool`` (tool-like text outside the family's format, which
is not a call the runtime reads); these end the turn as before.

The wording is the OpenAI Agents SDK's default tool error function (``agents.tool``): a body
that does not decode gets "An error occurred while parsing tool arguments. Please try again
with valid JSON. Error: …", any other failure "An error occurred while running the tool. Please
try again. Error: …". Departures (docs/parsers.md, "Calls the runtime cannot run"): a family
whose calls are not JSON is asked for its own syntax, and a schema failure names the check that
failed without echoing the arguments (the SDK says "Invalid JSON input for tool NAME: " and
pydantic's error with the input).
"""

from __future__ import annotations

from runtime.parsers import OutcomeLabel, ParsedCall

BODY_LABELS: frozenset[OutcomeLabel] = frozenset({"marker_bad_body", "wrong_shape"})
SCHEMA_LABELS: frozenset[OutcomeLabel] = frozenset(
    {"missing_required", "unexpected_param", "type_error"}
)
RETURNED_LABELS: frozenset[OutcomeLabel] = BODY_LABELS | SCHEMA_LABELS
"""Labels of the calls the loop answers with a tool error rather than ending the turn."""

_SYNTAX = {
    "pythonic": "a valid Python call",
    "qwen3_xml": "a well-formed <function=NAME><parameter=KEY>VALUE</parameter></function> call",
}
"""What a family other than the JSON ones is asked for instead of "valid JSON"."""


def returns_error(call: ParsedCall) -> bool:
    """Whether the loop answers ``call`` with a tool error (see ``RETURNED_LABELS``)."""
    return call.label in RETURNED_LABELS


def tool_error_message(call: ParsedCall, family: str) -> str:
    """The tool-result text that tells the model what was wrong with ``call`` (read by the
    parser ``family``). Raises ``ValueError`` for a call whose label is not returned."""
    detail = call.error or call.label
    if call.label in BODY_LABELS:
        syntax = _SYNTAX.get(family, "valid JSON")
        return (
            "An error occurred while parsing tool arguments. "
            f"Please try again with {syntax}. Error: {detail}"
        )
    if call.label in SCHEMA_LABELS:
        return (
            "An error occurred while running the tool. Please try again. "
            f"Error: Invalid arguments for tool {call.name}: {detail}"
        )
    raise ValueError(f"a {call.label} call is not answered with a tool error")
