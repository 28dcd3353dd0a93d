"""Schema validation and type coercion of one parsed call, shared by every parser family.

Above: the family parsers, which hand over a call's name and raw arguments. Below: the offered
tool schemas (JSON Schema, as in OpenAI function tools) and ``jsonschema`` for the final check.
Top-level argument values are coerced to the schema's type first (``"5"`` → ``5`` for an
integer, a JSON string → a list for an array), because models write numbers as strings and
text formats such as qwen3-coder XML carry every value as text. A NaN or infinite number
anywhere in the arguments (``1e999``, ``NaN``, ``Infinity``, which Python's decoders accept
but JSON has no form for) makes the call a ``type_error``: it is never executed or sent on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import jsonschema
import structlog

from runtime.messages import ToolSpec
from runtime.parsers.base import OutcomeLabel, ParsedCall

log = structlog.get_logger(__name__)

_NON_FINITE = "not a finite number (1e999, NaN and Infinity have no JSON form)"
_FAILURE_PRIORITY: tuple[OutcomeLabel, ...] = (
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
    """One label for the whole reply: ``ok`` if every call is ``ok``, ``adapted`` if every
    call is executable and one was adapted, otherwise the first failure by priority (so a
    reply mixing good and bad calls is labelled by its failure); ``no_call`` when empty."""
    if not calls:
        return "no_call"
    labels = {call.label for call in calls}
    if labels <= {"ok"}:
        return "ok"
    if labels <= {"ok", "adapted"}:
        return "adapted"
    return next((label for label in _FAILURE_PRIORITY if label in labels), "wrong_shape")


def validate_json_calls(payload: Any, tools: Sequence[ToolSpec], *, raw: str) -> list[ParsedCall]:
    """One decoded call object or a list of them, each validated on its own."""
    if isinstance(payload, list):
        if not payload:
            return [ParsedCall(label="wrong_shape", raw=raw, error="empty list of calls")]
        return [validate_call(item, tools, raw=raw) for item in payload]
    return [validate_call(payload, tools, raw=raw)]


def validate_call(
    item: Any, tools: Sequence[ToolSpec], *, raw: str, ok_label: OutcomeLabel = "ok"
) -> ParsedCall:
    """Validate one decoded call object: ``{"name", "arguments"|"parameters"}``, also wrapped
    OpenAI-style as ``{"type": "function", "function": {...}}``; string arguments are JSON."""
    if isinstance(item, dict) and isinstance(item.get("function"), dict):
        item = item["function"]
    if not isinstance(item, dict):
        return _wrong_shape(raw, f"expected a call object, found {type(item).__name__}")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        return _wrong_shape(raw, 'the call object has no "name" string')
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return _wrong_shape(raw, "arguments are a string that is not JSON", name=name)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return _wrong_shape(raw, "arguments are not an object", name=name)
    return validate_arguments(name.strip(), arguments, tools, raw=raw, ok_label=ok_label)


def _wrong_shape(raw: str, error: str, *, name: str | None = None) -> ParsedCall:
    return ParsedCall(label="wrong_shape", name=name, raw=raw, error=error)


def find_tool(name: str, tools: Sequence[ToolSpec]) -> ToolSpec | None:
    return next((tool for tool in tools if tool.name == name), None)


def validate_arguments(
    name: str,
    arguments: dict[str, Any],
    tools: Sequence[ToolSpec],
    *,
    raw: str,
    ok_label: OutcomeLabel = "ok",
) -> ParsedCall:
    """Check ``arguments`` against the offered tool named ``name`` and coerce their types."""

    def failed(label: OutcomeLabel, error: str) -> ParsedCall:
        return ParsedCall(label=label, name=name, arguments=arguments, raw=raw, error=error)

    spec = find_tool(name, tools)
    if spec is None:
        offered = ", ".join(tool.name for tool in tools) or "none"
        return failed("unknown_tool", f"no tool named {name!r} was offered (offered: {offered})")
    properties: dict[str, Any] = spec.parameters.get("properties") or {}
    required = [key for key in spec.parameters.get("required") or [] if isinstance(key, str)]
    arguments = _drop_optional_nulls(arguments, properties, required)
    missing = [key for key in required if key not in arguments]
    if missing:
        return failed("missing_required", f"missing required argument(s): {', '.join(missing)}")
    extra = [key for key in arguments if key not in properties]
    if extra and spec.parameters.get("additionalProperties", False) is False:
        return failed("unexpected_param", f"unexpected argument(s): {', '.join(extra)}")
    where = non_finite_path(arguments)
    if where is not None:
        return failed("type_error", f"argument {where!r} is {_NON_FINITE}")
    coerced: dict[str, Any] = {}
    for key, value in arguments.items():
        ok, coerced[key] = coerce(value, properties.get(key, {}))
        if not ok:
            return failed("type_error", f"argument {key!r} is not {_describe(properties[key])}")
    where = non_finite_path(coerced)
    if where is not None:
        return failed("type_error", f"argument {where!r} is {_NON_FINITE}")
    error = schema_error(spec.parameters, coerced)
    if error is not None:
        return failed("type_error", error)
    return ParsedCall(label=ok_label, name=name, arguments=coerced, raw=raw)


def non_finite_path(value: Any, path: str = "") -> str | None:
    """The path (``k``, ``filters/0``) of the first NaN or infinite number in ``value``."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = non_finite_path(item, f"{path}/{key}" if path else str(key))
        if found is not None:
            return found
    return None


def _drop_optional_nulls(
    arguments: dict[str, Any], properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    """Models often send ``null`` for an optional argument they mean to leave out."""
    return {
        key: value
        for key, value in arguments.items()
        if not (
            value is None
            and key not in required
            and key in properties
            and not coerce(None, properties[key])[0]
        )
    }


def _describe(schema: dict[str, Any]) -> str:
    options = _options(schema)
    types = [str(option.get("type", "any")) for option in options]
    return "of type " + " | ".join(types) if types else "valid"


def _options(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a property schema allows: ``anyOf``/``oneOf`` or a list of types."""
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return [option for option in schema[key] if isinstance(option, dict)]
    expected = schema.get("type")
    if isinstance(expected, list):
        return [{**schema, "type": option} for option in expected]
    return [schema]


def coerce(value: Any, schema: dict[str, Any]) -> tuple[bool, Any]:
    """``(True, value)`` if ``value`` already fits one of the schema's types, else the first
    successful conversion, else ``(False, value)``. Enum membership is checked later."""
    if not isinstance(schema, dict):
        return True, value
    options = _options(schema)
    types = [option.get("type") for option in options]
    if any(expected is None for expected in types):
        return True, value
    if any(_is_type(value, expected) for expected in types):
        return True, value
    for expected in types:
        converter = _CONVERTERS.get(expected) if isinstance(expected, str) else None
        if converter is not None:
            try:
                return True, converter(value)
            except (ValueError, TypeError, OverflowError, RecursionError):
                continue
    return False, value


def _is_type(value: Any, expected: Any) -> bool:
    checks: dict[str, Callable[[Any], bool]] = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    check = checks.get(expected) if isinstance(expected, str) else None
    return True if check is None else check(value)


def _to_string(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise TypeError("not a number")


def _to_integer(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        number = float(text) if "." in text or "e" in text.lower() else int(text)
        if isinstance(number, float) and not number.is_integer():
            raise ValueError("not an integer")
        return int(number)
    raise TypeError("not an integer")


def _to_number(value: Any) -> float | int:
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            return float(text)
    raise TypeError("not a number")


def _to_boolean(value: Any) -> bool:
    if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    raise TypeError("not a boolean")


def _to_null(value: Any) -> None:
    if isinstance(value, str) and value.strip().lower() in {"null", "none"}:
        return None
    raise TypeError("not null")


def _json_of(kind: type) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if isinstance(value, str):
            decoded = json.loads(value)
            if isinstance(decoded, kind):
                return decoded
        raise TypeError(f"not a JSON {kind.__name__}")

    return convert


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "string": _to_string,
    "integer": _to_integer,
    "number": _to_number,
    "boolean": _to_boolean,
    "null": _to_null,
    "array": _json_of(list),
    "object": _json_of(dict),
}


def schema_error(parameters: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """The first JSON-Schema violation of ``arguments`` (enums, nested types, bounds), or
    ``None``. A tool whose own schema is invalid is not held against the model."""
    validator = _validator(json.dumps(parameters, sort_keys=True, default=str))
    if validator is None:
        return None
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except (RecursionError, jsonschema.exceptions.SchemaError, TypeError, ValueError):
        return None
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "arguments"
    return f"{where}: {error.message}"[:300]


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        log.warning("tool_schema_invalid", error=str(exc.message)[:200])
        return None
    return validator_class(schema)
