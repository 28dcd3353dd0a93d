"""The parts of a reply a grammar can force: a tool call in a family's own syntax, or JSON.

Above: text-mode backbones that constrain generation (the embedded model's worker turns
``JsonSegment`` values into a llama.cpp grammar, ``runtime/backbones/llama/grammar.py``).
Below: nothing; the call syntax per style is the one ``runtime.profiles.render`` writes and the
profile's parser reads.

A family whose calls are a JSON object inside fixed text (Hermes ``<tool_call>…</tool_call>``,
bare JSON, InternLM, Mistral's ``[TOOL_CALLS][…]``) is forced as llama.cpp's server forces it:
the fixed text as literals around a JSON schema of the call object, whose ``name`` is a
constant per tool and whose arguments are the tool's parameter schema. Pythonic and Qwen3-XML
calls are not JSON: forcing them raises ``NotForceable``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.messages import ToolSpec
from runtime.profiles.render import ToolPromptStyle


class NotForceable(ValueError):
    """A reply shape this style cannot be forced into."""


@dataclass(frozen=True)
class JsonSegment:
    """Reply text: ``prefix``, one JSON value valid against ``schema``, ``suffix``; with
    ``repeat``, one or more of them joined by ``separator``. ``source`` is the request field
    the schema comes from (named when the schema cannot be made into a grammar)."""

    schema: Mapping[str, Any]
    prefix: str = ""
    suffix: str = ""
    repeat: bool = False
    separator: str = "\n"
    source: str = "tools"


@dataclass(frozen=True)
class _CallSyntax:
    prefix: str
    suffix: str
    arguments_key: str
    separator: str
    as_list: bool = False  # the calls are one JSON list (Mistral)


_SYNTAX: dict[str, _CallSyntax] = {
    "hermes": _CallSyntax("<tool_call>\n", "\n</tool_call>", "arguments", "\n"),
    "json_schema": _CallSyntax("", "", "parameters", "; "),
    "internlm": _CallSyntax("<|action_start|><|plugin|>\n", "<|action_end|>", "parameters", "\n"),
    "mistral": _CallSyntax("[TOOL_CALLS]", "", "arguments", "", as_list=True),
}


def tool_call_segment(
    style: ToolPromptStyle,
    tools: Sequence[ToolSpec],
    *,
    name: str | None = None,
    parallel: bool = True,
) -> JsonSegment:
    """Calls of ``tools`` (only of ``name`` when given) in ``style``'s syntax: one call, or
    one or more with ``parallel``."""
    syntax = _SYNTAX.get(style)
    if syntax is None:
        raise NotForceable(f"calls in the {style} syntax are not JSON, so no grammar forces them")
    chosen = [tool for tool in tools if name is None or tool.name == name]
    if not chosen:
        raise NotForceable(f"no offered tool is named {name!r}" if name else "no tools offered")
    definitions: dict[str, Any] = {}
    calls = []
    for index, tool in enumerate(chosen):
        parameters, defs = _hoisted(dict(tool.parameters), f"tool{index}-")
        definitions.update(defs)
        calls.append(_call_schema(tool.name, parameters, syntax.arguments_key))
    call: dict[str, Any] = calls[0] if len(calls) == 1 else {"anyOf": calls}
    if syntax.as_list:
        call = {"type": "array", "items": call, "minItems": 1}
        if not parallel:
            call["maxItems"] = 1
    if definitions:
        call = {**call, "$defs": definitions}
    if syntax.as_list:
        return JsonSegment(call, prefix=syntax.prefix, suffix=syntax.suffix)
    return JsonSegment(
        call,
        prefix=syntax.prefix,
        suffix=syntax.suffix,
        repeat=parallel,
        separator=syntax.separator,
    )


def _call_schema(name: str, parameters: dict[str, Any], arguments_key: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": name}, arguments_key: parameters},
        "required": ["name", arguments_key],
        "additionalProperties": False,
    }


_DEFINITION_KEYS = ("$defs", "definitions")


def _hoisted(parameters: dict[str, Any], prefix: str) -> tuple[Any, dict[str, Any]]:
    """``parameters`` without its local definitions, its ``#/$defs/X`` references renamed
    ``#/$defs/<prefix>X``, and the definitions so renamed: a tool schema's references are
    relative to its own root, which becomes a branch of the call's schema."""
    defs: dict[str, Any] = {}
    for key in _DEFINITION_KEYS:
        for name, schema in (parameters.pop(key, None) or {}).items():
            defs[f"{prefix}{name}"] = schema

    def renamed(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            for key in _DEFINITION_KEYS:
                if isinstance(ref, str) and ref.startswith(f"#/{key}/"):
                    node = {**node, "$ref": f"#/$defs/{prefix}{ref.removeprefix(f'#/{key}/')}"}
            return {key: renamed(value) for key, value in node.items()}
        if isinstance(node, list):
            return [renamed(item) for item in node]
        return node

    return renamed(parameters), {name: renamed(schema) for name, schema in defs.items()}


def json_segment(schema: Mapping[str, Any] | None) -> JsonSegment:
    """A JSON object valid against ``schema`` (any object when None)."""
    chosen: Mapping[str, Any] = schema if schema is not None else {"type": "object"}
    source = "response_format.json_schema.schema" if schema is not None else "response_format"
    return JsonSegment(chosen, source=source)
