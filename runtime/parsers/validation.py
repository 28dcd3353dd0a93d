"""Schema validation and type coercion of one parsed call, shared by every parser family."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.messages import ToolSpec
from runtime.parsers.base import OutcomeLabel, ParsedCall

_LABEL_PRIORITY: tuple[OutcomeLabel, ...] = (
    "ok",
    "adapted",
    "truncated",
    "missing_required",
    "unexpected_param",
    "type_error",
    "unknown_tool",
    "wrong_shape",
    "marker_bad_body",
    "pseudo_tool",
)


def overall_label(calls: Sequence[ParsedCall]) -> OutcomeLabel:
    """One label for the whole reply: ``ok`` if every call is executable; otherwise the first
    failure by priority; ``no_call`` when there are none."""
    if not calls:
        return "no_call"
    labels = {call.label for call in calls}
    if labels <= {"ok"}:
        return "ok"
    if labels <= {"ok", "adapted"}:
        return "adapted"
    for label in _LABEL_PRIORITY[2:]:
        if label in labels:
            return label
    return "wrong_shape"


def _coerce(value: Any, schema: dict[str, Any]) -> tuple[bool, Any]:
    expected = schema.get("type")
    if expected is None:
        return True, value
    if isinstance(expected, list):
        for option in expected:
            ok, coerced = _coerce(value, {**schema, "type": option})
            if ok:
                return True, coerced
        return False, value
    if expected == "string":
        if isinstance(value, str):
            return True, value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return True, str(value)
        return False, value
    if expected == "integer":
        if isinstance(value, bool):
            return False, value
        if isinstance(value, int):
            return True, value
        if isinstance(value, float) and value.is_integer():
            return True, int(value)
        if isinstance(value, str):
            try:
                return True, int(value.strip())
            except ValueError:
                return False, value
        return False, value
    if expected == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return True, value
        if isinstance(value, str):
            try:
                return True, float(value.strip())
            except ValueError:
                return False, value
        return False, value
    if expected == "boolean":
        if isinstance(value, bool):
            return True, value
        if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            return True, value.strip().lower() == "true"
        return False, value
    if expected == "null":
        return value is None, value
    if expected == "array":
        return isinstance(value, list), value
    if expected == "object":
        return isinstance(value, dict), value
    return True, value


def validate_call(
    item: Any, tools: Sequence[ToolSpec], *, raw: str, ok_label: OutcomeLabel = "ok"
) -> ParsedCall:
    """Validate one ``{"name": ..., "arguments"|"parameters": {...}}`` object."""
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        return ParsedCall(label="wrong_shape", raw=raw, error="expected an object with a name")
    name = item["name"]
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):
        import json

        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return ParsedCall(label="wrong_shape", name=name, raw=raw, error="arguments not JSON")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ParsedCall(label="wrong_shape", name=name, raw=raw, error="arguments not an object")
    return validate_arguments(name, arguments, tools, raw=raw, ok_label=ok_label)


def validate_arguments(
    name: str,
    arguments: dict[str, Any],
    tools: Sequence[ToolSpec],
    *,
    raw: str,
    ok_label: OutcomeLabel = "ok",
) -> ParsedCall:
    spec = next((tool for tool in tools if tool.name == name), None)
    if spec is None:
        return ParsedCall(label="unknown_tool", name=name, arguments=arguments, raw=raw,
                          error=f"no tool named {name!r} was offered")
    properties: dict[str, Any] = spec.parameters.get("properties", {}) or {}
    required: list[str] = list(spec.parameters.get("required", []) or [])
    missing = [key for key in required if key not in arguments]
    if missing:
        return ParsedCall(label="missing_required", name=name, arguments=arguments, raw=raw,
                          error=f"missing required argument(s): {', '.join(missing)}")
    extra = [key for key in arguments if key not in properties]
    if extra and spec.parameters.get("additionalProperties", False) is not True:
        return ParsedCall(label="unexpected_param", name=name, arguments=arguments, raw=raw,
                          error=f"unexpected argument(s): {', '.join(extra)}")
    coerced: dict[str, Any] = {}
    for key, value in arguments.items():
        ok, new_value = _coerce(value, properties.get(key, {}))
        if not ok:
            return ParsedCall(label="type_error", name=name, arguments=arguments, raw=raw,
                              error=f"argument {key!r} does not match type "
                              f"{properties.get(key, {}).get('type')!r}")
        coerced[key] = new_value
    return ParsedCall(label=ok_label, name=name, arguments=coerced, raw=raw)
