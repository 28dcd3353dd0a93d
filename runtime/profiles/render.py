"""Text-mode tool prompts and call renderings, one style per parser family.

Above: ``ModelProfile.render_tools`` / ``render_call``, used by text-mode backbones to put the
offered tools (and optional few-shot examples) into the system prompt and to replay earlier
calls. Each style tells the model to answer in exactly the format its profile's parser reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from runtime.messages import ToolSpec

ToolPromptStyle = Literal[
    "hermes", "qwen3_xml", "pythonic", "json_schema", "internlm", "mistral", "none"
]
STYLE_OF_PARSER: dict[str, ToolPromptStyle] = {
    "hermes": "hermes",
    "pythonic": "pythonic",
    "json": "json_schema",
    "internlm": "internlm",
    "mistral": "mistral",
    "qwen3_xml": "qwen3_xml",
}
"""For each text parser family, the prompt style whose calls it reads."""

_HERMES_INSTRUCTIONS = (
    "You may call one or more functions to assist with the user query.\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n{specs}\n</tools>\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
_QWEN3_XML_INSTRUCTIONS = (
    "You have access to the following functions:\n<tools>\n{specs}\n</tools>\n"
    "If you choose to call a function, reply in the following format:\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    "</parameter>\n</function>\n</tool_call>\n"
    "Function calls MUST follow this format; every parameter is its own <parameter=...> "
    "element; you may write reasoning before the call but nothing after it."
)
_JSON_INSTRUCTIONS = (
    "You have access to the following functions. To call a function, respond with a JSON "
    'object of the form {{"name": function name, "parameters": dictionary of argument name '
    "and its value}}. Do not use variables.\n\n{specs}"
)
_PYTHONIC_INSTRUCTIONS = (
    "You can call the following Python functions. To call functions, write a list of calls "
    "[func_name1(param=value, ...), func_name2(...)] and nothing else; use literal values "
    "only.\n\n{specs}"
)
_INTERNLM_INSTRUCTIONS = (
    "You can use the following plugins:\n{specs}\n"
    "To call a plugin, write <|action_start|><|plugin|>\n"
    '{{"name": plugin name, "parameters": {{argument name: value}}}}<|action_end|>'
)
_MISTRAL_INSTRUCTIONS = (
    "[AVAILABLE_TOOLS]{specs}[/AVAILABLE_TOOLS]\n"
    "To call tools, write [TOOL_CALLS] followed by a JSON list of calls: "
    '[TOOL_CALLS][{{"name": tool name, "arguments": {{argument name: value}}}}]'
)


def render_tool_prompt(style: ToolPromptStyle, tools: Sequence[ToolSpec]) -> str:
    """The system-prompt text that offers ``tools`` in ``style``; empty without tools."""
    if not tools or style == "none":
        return ""
    if style == "hermes":
        return _HERMES_INSTRUCTIONS.format(specs=_spec_lines(tools))
    if style == "qwen3_xml":
        return _QWEN3_XML_INSTRUCTIONS.format(specs=_spec_lines(tools))
    if style == "json_schema":
        functions = [tool.to_openai()["function"] for tool in tools]
        return _JSON_INSTRUCTIONS.format(specs=json.dumps(functions, indent=1))
    if style == "internlm":
        return _INTERNLM_INSTRUCTIONS.format(specs=_spec_lines(tools))
    if style == "mistral":
        return _MISTRAL_INSTRUCTIONS.format(specs=json.dumps([t.to_openai() for t in tools]))
    return _PYTHONIC_INSTRUCTIONS.format(specs="\n".join(python_signature(t) for t in tools))


def _spec_lines(tools: Sequence[ToolSpec]) -> str:
    return "\n".join(json.dumps(tool.to_openai()) for tool in tools)


def render_tool_call(style: ToolPromptStyle, name: str, arguments: dict[str, Any]) -> str:
    """One call written the way a model of ``style`` is asked to write it."""
    if style == "qwen3_xml":
        parameters = "".join(
            f"<parameter={key}>\n{_xml_value(value)}\n</parameter>\n"
            for key, value in arguments.items()
        )
        return f"<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>"
    if style == "json_schema":
        return json.dumps({"name": name, "parameters": arguments})
    if style == "internlm":
        body = json.dumps({"name": name, "parameters": arguments})
        return f"<|action_start|><|plugin|>\n{body}<|action_end|>"
    if style == "mistral":
        return "[TOOL_CALLS]" + json.dumps([{"name": name, "arguments": arguments}])
    if style == "pythonic":
        rendered = ", ".join(f"{key}={python_literal(value)}" for key, value in arguments.items())
        return f"[{name}({rendered})]"
    body = json.dumps({"name": name, "arguments": arguments})
    return f"<tool_call>\n{body}\n</tool_call>"


def _xml_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def python_literal(value: Any) -> str:
    """A Python literal for a JSON value (``True``/``None`` rather than ``true``/``null``)."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}: {python_literal(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return json.dumps(str(value))


_PY_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


def python_signature(tool: ToolSpec) -> str:
    """``def name(query: str, k: int = 5) -> dict:`` plus the description as a docstring."""
    properties: dict[str, Any] = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    ordered = sorted(properties.items(), key=lambda item: item[0] not in required)
    parameters = []
    for key, schema in ordered:
        annotation = _python_type(schema)
        if key in required:
            parameters.append(f"{key}: {annotation}")
        else:
            default = schema.get("default") if isinstance(schema, dict) else None
            if default is None and "None" not in annotation:
                annotation += " | None"
            parameters.append(f"{key}: {annotation} = {python_literal(default)}")
    docstring = (tool.description or tool.name).replace('"""', "'''")
    return f'def {tool.name}({", ".join(parameters)}):\n    """{docstring}"""'


def _python_type(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "Any"
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        return " | ".join(_python_type(option) for option in options) or "Any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_PY_TYPES.get(str(item), "Any") for item in kind) or "Any"
    return _PY_TYPES.get(str(kind), "Any")
