"""Fixed tool specs for the parser corpus: the retrieval tools with explicit bounds and
optional fields, frozen here so parser behaviour is tested independently of the memory
server's current schema, and the tools of the peers' parser tests the borrowed cases use."""

from __future__ import annotations

from typing import Any

from runtime.messages import ToolSpec

ARTIFACT_RECALL = ToolSpec(
    name="artifact_recall",
    description=(
        "Search earlier artifacts (documents, tables, screenshots, notes) for passages relevant "
        "to a query. Returns ranked passages with their artifact ids and line ranges."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "k": {
                "type": "integer",
                "description": "How many passages to return.",
                "default": 5,
                "minimum": 1,
                "maximum": 50,
            },
            "artifact_id": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "Only search this artifact.",
                "default": None,
            },
        },
        "required": ["query"],
    },
)

ARTIFACT_GET = ToolSpec(
    name="artifact_get",
    description=(
        "Read an artifact (or a line range of it) by the reference artifact_recall returned."
    ),
    parameters={
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "Artifact id or reference."},
            "start_line": {"type": "integer", "description": "First line (1-based).", "minimum": 1},
            "end_line": {"type": "integer", "description": "Last line (inclusive).", "minimum": 1},
        },
        "required": ["ref"],
    },
)

DEFAULT_TOOLS: tuple[ToolSpec, ...] = (ARTIFACT_RECALL, ARTIFACT_GET)


def _tool(name: str, properties: dict[str, Any], required: tuple[str, ...] = ()) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=name,
        parameters={"type": "object", "properties": properties, "required": list(required)},
    )


_STRING: dict[str, Any] = {"type": "string"}
_NUMBER: dict[str, Any] = {"type": "number"}
_WEATHER = {
    "city": _STRING,
    "state": _STRING,
    "unit": {"type": "string", "enum": ["fahrenheit", "celsius"]},
}

# The tools each peer's test offers, rebuilt from its fixtures so that replies borrowed from
# it (tests/parsers/corpus/*.yaml) are validated against the schemas they were written for.
PEER_TOOLS: dict[str, tuple[ToolSpec, ...]] = {
    "none": (),  # a peer test that offers no tools at all
    "vllm-hermes": (
        _tool("final_answer", {"trigger": {"type": "boolean"}}),
        _tool("get_current_temperature", {"location": _STRING, "unit": _STRING}, ("location",)),
        _tool("get_weather", {"city": _STRING}, ("city",)),
        _tool("search", {"q": _STRING, "query": _STRING}),
        _tool("internet_search", {"question": _STRING}, ("question",)),
        _tool("bash", {"cmd": _STRING}, ("cmd",)),
    ),
    "vllm-pythonic": (
        _tool("get_weather", {"city": _STRING, "metric": _STRING}),
        _tool(
            "register_user",
            {
                "name": _STRING,
                "age": {"type": "integer"},
                "address": {"type": "object"},
                "role": {"type": ["string", "null"]},
                "passed_test": {"type": "boolean"},
                "aliases": {"type": "array", "items": _STRING},
            },
            ("name",),
        ),
        _tool(
            "do_something_cool", {"additional_data": {"type": "object"}, "steps": {"type": "array"}}
        ),
        _tool("calc", {"x": _NUMBER}, ("x",)),
    ),
    "vllm-llama3-json": (
        _tool(
            "searchTool",
            {"query": _STRING, "limit": {"type": "integer"}, "nested": {"type": "object"}},
        ),
        _tool("getOpenIncidentsTool", {}),
        _tool("complexTool", {"level1": {"type": "object"}, "config": {"type": "object"}}),
        _tool("simpleTool", {"value": _STRING}),
        _tool("parserTool", {"text": _STRING}),
    ),
    "vllm-internlm": (
        _tool("get_weather", {"city": _STRING}),
        _tool("refresh", {}),
        _tool(
            "test_function",
            {
                "string_field": _STRING,
                "int_field": {"type": "integer"},
                "float_field": _NUMBER,
                "bool_field": {"type": "boolean"},
                "null_field": {"type": "null"},
                "array_field": {"type": "array"},
                "object_field": {"type": "object"},
                "empty_array": {"type": "array"},
                "empty_object": {"type": "object"},
                "quoted": _STRING,
                "path": _STRING,
                "newline": _STRING,
                "unicode": _STRING,
            },
        ),
    ),
    "vllm-mistral": (
        _tool("add", {"a": _NUMBER, "b": _NUMBER}),
        _tool("add_two_strings", {"a": _STRING, "b": _STRING}),
        _tool("add_this_and_that", {"a": _NUMBER, "b": _NUMBER}),
        _tool("multiply", {"a": _NUMBER, "b": _NUMBER}),
        _tool("get_current_weather", _WEATHER),
        _tool("get_age", {"name": _STRING}),
        _tool("bash", {"command": _STRING}, ("command",)),
    ),
    "vllm-qwen3": (
        _tool("get_current_weather", _WEATHER, ("city", "state")),
        _tool(
            "calculate_area",
            {"shape": _STRING, "dimensions": {"type": "object"}, "precision": {"type": "integer"}},
        ),
        _tool(
            "test_types",
            {
                "int_param": {"type": "integer"},
                "float_param": {"type": "float"},
                "bool_param": {"type": "boolean"},
                "str_param": _STRING,
                "obj_param": {"type": "object"},
            },
        ),
        _tool("write_file", {"path": _STRING, "content": _STRING}),
        _tool("process", {"name": _STRING, "data": {"type": "object"}}),
        _tool("pick", {"items": {"type": "array"}}),
        _tool("search", {"query": _STRING}),
        _tool("set_code", {"code": {"anyOf": [_STRING, {"type": "null"}]}}),
        _tool("set_count", {"count": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}),
        _tool("update_record", {"data": {"anyOf": [{"type": "object"}, {"type": "null"}]}}),
        _tool("get_weather", {"city": _STRING}),
    ),
    "sglang-pythonic": (
        _tool(
            "get_weather",
            {"location": _STRING, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            ("location",),
        ),
        _tool("search", {"query": _STRING}, ("query",)),
    ),
    "sglang-mistral": (
        _tool(
            "make_next_step_decision",
            {"decision": _STRING, "content": _STRING},
            ("decision", "content"),
        ),
    ),
    "sglang-llama32": (
        _tool("get_weather", {"city": _STRING}, ("city",)),
        _tool("get_tourist_attractions", {"city": _STRING}, ("city",)),
    ),
    "sglang-qwen3-coder": (
        _tool("get_current_weather", {"city": _STRING, "state": _STRING}),
        _tool("calculate_area", {"shape": _STRING, "dimensions": {"type": "object"}}),
    ),
    "llama.cpp": (
        _tool("special_function", {"arg1": {"type": "integer"}}, ("arg1",)),
        _tool("python", {"code": _STRING}, ("code",)),
    ),
}
