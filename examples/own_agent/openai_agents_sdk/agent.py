#!/usr/bin/env python3
"""An agent built with the OpenAI Agents SDK, run by MIRAGE as ``--agent cmd:…``.

It knows nothing about MIRAGE's harness beyond the command protocol (docs/own_agent.md, "The
command adapter"): one JSON request on stdin, one JSON reply on stdout. Per probe it builds an
``agents.Agent`` whose model is an OpenAI-compatible endpoint (``mirage serve-model``, through
``OpenAIChatCompletionsModel``) and whose one MCP server is the probe's own memory URL
(``MCPServerStreamableHttp`` on the request's ``memory_url``), runs it on the checkpoint's
transcript plus the probe message, and replies with the final output, the tool calls the run
made (the agent's own report, compared by MIRAGE with the memory server's log) and its usage.

``--tool-choice required`` forces the first model call to call a tool, through the SDK's
``ModelSettings(tool_choice="required")``; the SDK resets it after that call
(``reset_tool_choice``), so the model can answer. For small served models the agent offers the
memory tool with its required argument only and bounded (``MemoryServer``), and sends the system
prompt and the newest transcript messages within ``--context-chars``.

Run: ``mirage run --agent "cmd:examples/own_agent/openai_agents_sdk/agent.py --model-url
http://127.0.0.1:8000/v1 --tool-choice required" --trunk-model scripted --limit 2``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    RunResult,
    ToolCallItem,
    set_tracing_disabled,
)
from agents.mcp import MCPServerStreamableHttp, create_static_tool_filter
from openai import AsyncOpenAI

MEMORY_TOOLS = ["artifact_recall"]
STRING_LIMIT = 100  # characters of a string argument the model may write


class MemoryServer(MCPServerStreamableHttp):
    """The memory server as this agent offers it to its model: each tool with its required
    arguments only, every string at most ``STRING_LIMIT`` characters (``maxLength``). A small
    model forced to call a tool (a served model enforces ``tool_choice="required"`` by a grammar
    over the tool's schema) may otherwise repeat inside a string until its reply budget ends,
    and an unfinished call is no call."""

    async def list_tools(self, run_context: Any = None, agent: Any = None) -> list[Any]:
        tools = await super().list_tools(run_context, agent)
        if not tools:
            return tools
        field = "input_schema" if "input_schema" in type(tools[0]).model_fields else "inputSchema"
        return [t.model_copy(update={field: essential(getattr(t, field))}) for t in tools]


def essential(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its required properties only, strings bounded."""
    required = list(schema.get("required", []))
    properties = {name: dict(schema["properties"][name]) for name in required}
    for spec in properties.values():
        if spec.get("type") == "string":
            spec.setdefault("maxLength", STRING_LIMIT)
    return {**schema, "properties": properties, "required": required}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-url", required=True, help="OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--model", default="smollm2", help="model name the endpoint serves")
    parser.add_argument("--tool-choice", choices=["auto", "required"], default="auto")
    parser.add_argument(
        "--max-tokens", type=int, default=160, help="reply budget per call (fits a forced call)"
    )
    parser.add_argument(
        "--context-chars", type=int, default=6000, help="transcript characters sent (newest)"
    )
    parser.add_argument("--max-turns", type=int, default=4, help="model calls per probe")
    return parser.parse_args(argv)


def recent(transcript: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The system prompt and the newest messages that fit ``budget`` characters, never starting
    on a tool result. The cut depends on the checkpoint only, so every probe of a state sends the
    same prefix (the served model reuses its cache)."""
    head, tail = transcript[:1], list(transcript[1:])
    size = sum(len(json.dumps(m)) for m in transcript)
    while tail and (size > budget or tail[0]["role"] == "tool"):
        size -= len(json.dumps(tail.pop(0)))
    return head + tail


def input_items(transcript: list[dict[str, Any]], message: str) -> list[Any]:
    """OpenAI chat messages (assistant ``tool_calls``, role ``tool``) as the SDK's input items,
    then the probe message."""
    items: list[Any] = []
    for entry in transcript:
        role, content = entry["role"], entry.get("content") or ""
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        if role == "tool":
            output = {"type": "function_call_output", "output": content}
            items.append({**output, "call_id": entry["tool_call_id"]})
            continue
        if content:
            items.append({"role": role, "content": content})
        for call in entry.get("tool_calls") or []:
            function = call["function"]
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": function["name"],
                    "arguments": function["arguments"],
                }
            )
    return [*items, {"role": "user", "content": message}]


def reported_calls(result: RunResult) -> list[dict[str, Any]]:
    """The tool calls this run made, as ``{"name", "arguments"}`` (arguments as the model wrote
    them: a JSON string)."""
    return [
        {"name": item.tool_name, "arguments": getattr(item.raw_item, "arguments", None) or "{}"}
        for item in result.new_items
        if isinstance(item, ToolCallItem)
    ]


def usage_of(result: RunResult) -> dict[str, int]:
    usage = result.context_wrapper.usage
    entries = usage.request_usage_entries
    return {
        "eit": entries[0].input_tokens if entries else usage.input_tokens,
        "input_tokens": usage.input_tokens,
        "cached_tokens": usage.input_tokens_details.cached_tokens or 0,
        "output_tokens": usage.output_tokens,
        "calls": usage.requests,
    }


async def answer(request: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    memory_url = request.get("memory_url") or os.environ.get("MIRAGE_MEMORY_URL")
    if not memory_url:
        raise ValueError("the request names no memory_url (run it through mirage run --agent)")
    client = AsyncOpenAI(base_url=args.model_url, api_key="unused", max_retries=0)
    memory = MemoryServer(
        params={"url": memory_url, "timeout": 60},
        name="mirage-memory",
        client_session_timeout_seconds=120,
        tool_filter=create_static_tool_filter(allowed_tool_names=MEMORY_TOOLS),
    )
    async with memory:
        agent = Agent(
            name="sdk-example",
            model=OpenAIChatCompletionsModel(model=args.model, openai_client=client),
            mcp_servers=[memory],
            model_settings=ModelSettings(
                temperature=0.0,
                max_tokens=args.max_tokens,
                tool_choice=None if args.tool_choice == "auto" else args.tool_choice,
            ),
        )
        result = await Runner.run(
            agent,
            input_items(recent(request["transcript"], args.context_chars), request["message"]),
            max_turns=args.max_turns,
            run_config=RunConfig(tool_not_found_behavior="return_error_to_model"),
            error_handlers={"max_turns": lambda data: ""},
        )
    return {
        "reply": str(result.final_output or ""),
        "tool_calls": reported_calls(result),
        "usage": usage_of(result),
    }


def main() -> None:
    args = parse_args(sys.argv[1:])
    set_tracing_disabled(True)  # nothing leaves the machine
    request = json.load(sys.stdin)
    try:
        reply = asyncio.run(answer(request, args))
    except Exception as exc:  # the agent's own failure, reported in the protocol's error field
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    json.dump(reply, sys.stdout)


if __name__ == "__main__":
    main()
