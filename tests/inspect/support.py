"""Small MIRAGE runs for the Inspect tests: a scripted trunk and summarizer on the bundled pack,
and a command agent whose replies are a pure function of the probe (``reply_for``), so the
Inspect task's scripted solver can give the very same replies."""

from __future__ import annotations

import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

from harness.mirage.config import RunConfig
from harness.mirage.run import MirageRun
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message

LIMIT = 2
AGENT_MODEL = "scripted-agent"

REPLIES = (
    "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE",
    "ANSWERABLE=YES\nSOURCE=NONE\nANSWER=42",
    "I cannot say.",
)


def reply_for(tag: str) -> str:
    """The scripted reply to the probe tagged ``tag`` (a refusal, a guess, or a PF)."""
    return REPLIES[zlib.crc32(tag.encode()) % len(REPLIES)]


def recalls(tag: str) -> bool:
    """Whether the scripted agent calls ``artifact_recall`` before replying to ``tag``."""
    return zlib.crc32(tag.encode()) % 2 == 0


def query_for(prompt: str) -> str:
    """The scripted agent's recall query: the prompt's longest line, cut to 100 characters."""
    return max(prompt.splitlines(), key=len)[:100]


AGENT = f"""
import asyncio, json, sys, zlib
from mcp.client import Client
REPLIES = {REPLIES!r}
request = json.load(sys.stdin)
tag = request["tag"]
reply = REPLIES[zlib.crc32(tag.encode()) % len(REPLIES)]
calls = []
if zlib.crc32(tag.encode()) % 2 == 0:
    query = max(request["message"].splitlines(), key=len)[:100]

    async def recall():
        async with Client(request["memory_url"]) as client:
            await client.call_tool("artifact_recall", {{"query": query}})

    asyncio.run(recall())
    calls = [{{"name": "artifact_recall", "arguments": {{"query": query}}}}]
print(json.dumps({{"reply": reply, "tool_calls": calls}}))
"""


def summary(messages: Sequence[Message]) -> str:
    return "## Goal\nHelp the user.\n## Critical context\nArtifacts were shared earlier."


def write_agent(folder: Path) -> Path:
    script = folder / "agent.py"
    script.write_text(f"#!{sys.executable}\n{AGENT}")
    script.chmod(0o755)
    return script


async def command_run(out: Path, agent: Path, **options: object) -> Path:
    """``mirage run --agent cmd:AGENT --agent-model scripted-agent --trunk-model scripted
    --limit 2`` with a scripted summarizer; returns the answerer's result folder."""
    config = RunConfig(
        trunk_model="scripted",
        summarizer_model="summarizer",
        limit=LIMIT,
        out=out,
        agent=f"cmd:{agent}",
        agent_model=AGENT_MODEL,
        **options,  # type: ignore[arg-type]
    )
    backbones = {"summarizer": FunctionBackbone(summary, model="summarizer")}
    [folder] = await MirageRun(config, backbones=backbones).execute()
    return folder
