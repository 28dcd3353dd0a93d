"""Schema validation of one parsed call, shared by every parser family.

Above: the family parsers, which hand over a call's name and decoded arguments. Below: the
offered tool schemas (JSON Schema, as in OpenAI function tools) and ``jsonschema`` for the final
check. A call is ``ok`` only when its arguments, as written, are valid against the tool's own
schema, so an ``ok`` call is one the tool's server runs: ``"k": "5"`` where the schema says
integer is a ``type_error`` (the memory server refuses a string ``k``), not converted. Two
rewrites keep the JSON value and nothing else: an integral float for an integer (``5.0`` → ``5``,
an integer in JSON Schema) and an optional argument sent as ``null`` that the schema does not
allow (dropped: the model meant to leave it out). Text formats decode their values themselves
(qwen3-coder XML by the parameter's schema type, as vLLM's parser does). A NaN or infinite
number anywhere in the arguments (``1e999``, ``NaN``, ``Infinity``, which Python's decoders
accept but JSON has no form for) makes the call a ``type_error``: it is never executed or sent
on.
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
    """Check ``arguments``, as written, against the offered tool named ``name`` (its JSON
    Schema): a value of a type the schema does not allow is a ``type_error``, never
    converted."""

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
    for key, value in arguments.items():
        schema = properties.get(key, {})
        if not fits(value, schema):
            return failed(
                "type_error",
                f"argument {key!r} is {_json_type(value)}, not {_describe(schema)}",
            )
    arguments = {key: _integral(value, properties.get(key, {})) for key, value in arguments.items()}
    error = schema_error(spec.parameters, arguments)
    if error is not None:
        return failed("type_error", error)
    return ParsedCall(label=ok_label, name=name, arguments=arguments, raw=raw)


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
            and not fits(None, properties[key])
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


def fits(value: Any, schema: Any) -> bool:
    """Whether ``value`` has one of the JSON types ``schema`` allows (any, when it names none);
    enums, bounds and nested values are ``schema_error``'s."""
    if not isinstance(schema, dict):
        return True
    types = [option.get("type") for option in _options(schema)]
    return any(expected is None or _is_type(value, expected) for expected in types)


def _integral(value: Any, schema: Any) -> Any:
    """``5.0`` as ``5`` where the schema allows an integer and no other number."""
    if not isinstance(value, float) or not value.is_integer() or not isinstance(schema, dict):
        return value
    types = {option.get("type") for option in _options(schema)}
    return int(value) if "integer" in types and "number" not in types else value


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value, with an article (``a string``)."""
    names = {bool: "a boolean", str: "a string", list: "an array", dict: "an object"}
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "a boolean" if isinstance(value, bool) else "a number"
    return next((text for kind, text in names.items() if isinstance(value, kind)), "a value")


def _is_type(value: Any, expected: Any) -> bool:
    checks: dict[str, Callable[[Any], bool]] = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: (
            (isinstance(v, int) and not isinstance(v, bool))
            or (isinstance(v, float) and v.is_integer())
        ),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    check = checks.get(expected) if isinstance(expected, str) else None
    return True if check is None else check(value)


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
