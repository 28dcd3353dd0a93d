"""Each memory system retrieving for real: chroma + MiniLM (naive RAG), the memory server over a
real MCP session (mirage-memory), an agent through the command adapter (slow), and full-context
truncation to the window."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.cue.config import (
    AgentSpec,
    FullContextSpec,
    MirageMemorySpec,
    NaiveRagSpec,
    SystemSpec,
)
from harness.cue.pack import DEFAULT_PACK, CuePack, load_cue_pack
from harness.cue.responder import ProfileRun, Response
from harness.cue.schema import Question
from harness.cue.systems import CueSystem, SystemContext
from harness.cue.textualize import textualize
from memory_server.calllog import read_calls
from runtime.backbones import FunctionBackbone
from runtime.messages import Message, UserMessage


@pytest.fixture(scope="module")
def pack() -> CuePack:
    return load_cue_pack(DEFAULT_PACK)


def _profile(pack: CuePack, question: Question) -> ProfileRun:
    history = pack.histories[question.profile]
    return ProfileRun(
        profile_id=question.profile,
        name=history.name,
        label=f"{question.profile}-test",
        units=tuple(textualize(history, "detailed", "split")),
        questions=(question,),
    )


class PromptRecorder:
    def __init__(self, window: int = 8192) -> None:
        self.prompts: list[str] = []
        self.backbone = FunctionBackbone(self.reply, context_window=window)

    def reply(self, messages: list[Message]) -> str:
        last = messages[-1]
        assert isinstance(last, UserMessage)
        self.prompts.append(last.plain_text)
        return "The answer is C."


async def _respond(
    spec: SystemSpec, pack: CuePack, qid: str, work: Path, recorder: PromptRecorder | None = None
) -> Response:
    question = next(q for q in pack.questions if q.id == qid)
    recorder = recorder or PromptRecorder()
    system = CueSystem("s", spec, SystemContext(work_dir=work, backbone=recorder.backbone))
    async with system.profile(_profile(pack, question)) as responder:
        return await responder.respond(question, f"t.{qid}")


async def test_naive_rag_ranks_the_stated_clues_in_its_top_10(
    pack: CuePack, tmp_path: Path
) -> None:
    recorder = PromptRecorder()
    response = await _respond(NaiveRagSpec(), pack, "p1-ER-E1", tmp_path, recorder)
    question = next(q for q in pack.questions if q.id == "p1-ER-E1")
    assert len(response.ranked) == 10 and set(pack.clue_rounds(question)) <= set(response.ranked)
    order = [u.round_id for u in _profile(pack, question).units]
    assert list(response.in_context) == sorted(response.ranked, key=order.index)  # history order
    assert "Biscuit chewed through" in recorder.prompts[0]
    assert response.memory_tokens > 0 and response.text == "The answer is C."
    assert (tmp_path / "index" / "naive-rag" / "chroma").is_dir()


async def test_mirage_memory_retrieves_over_mcp_and_logs_the_tag(
    pack: CuePack, tmp_path: Path
) -> None:
    response = await _respond(MirageMemorySpec(k=5), pack, "p2-ER-E1", tmp_path)
    question = next(q for q in pack.questions if q.id == "p2-ER-E1")  # Daniel's daughter Zara
    assert len(response.ranked) == 5
    assert set(response.ranked) & set(pack.clue_rounds(question))
    calls = read_calls(
        tmp_path / "workspaces" / "p2-test" / ".mirage" / "calls.jsonl", tag="t.p2-ER-E1"
    )
    assert [c.tool for c in calls] == ["artifact_recall"] and calls[0].transport == "http"
    assert len(calls[0].hits) == 5


async def test_full_context_keeps_the_newest_rounds_that_fit(pack: CuePack, tmp_path: Path) -> None:
    whole = await _respond(FullContextSpec(), pack, "p2-LP-E1", tmp_path)
    assert len(whole.in_context) == 40 and whole.ranked == ()
    recorder = PromptRecorder(window=1200)
    cut = await _respond(FullContextSpec(), pack, "p2-LP-E1", tmp_path, recorder)
    assert 0 < len(cut.in_context) < 40
    assert list(cut.in_context) == list(whole.in_context[-len(cut.in_context) :])
    assert recorder.backbone.calls[0].messages  # answered within the window
    budget = await _respond(FullContextSpec(context_tokens=300), pack, "p2-LP-E1", tmp_path)
    assert budget.memory_tokens < 400 and len(budget.in_context) < len(cut.in_context)


RECALL_AGENT = """
import asyncio, json, os, sys
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

request = json.load(sys.stdin)

async def main():
    async with Client(streamable_http_client(request["memory_url"])) as client:
        await client.call_tool("artifact_recall", {"query": request["message"][:500], "k": 3})

asyncio.run(main())
print(json.dumps({"reply": "B"}))
"""


@pytest.mark.slow
async def test_an_agent_retrieves_through_the_memory_server(pack: CuePack, tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(f"#!{sys.executable}\n{RECALL_AGENT}")
    script.chmod(0o755)
    spec = AgentSpec(agent=f"cmd:{script}", timeout_s=60)
    response = await _respond(spec, pack, "p1-LP-E2", tmp_path)
    assert response.error is None and response.text is not None and response.text.strip() == "B"
    assert 1 <= len(response.ranked) <= 3 and response.ranked == response.in_context
    assert response.memory_tokens > 0
    assert any((tmp_path / "checkpoints" / "p1-test").glob("*.session"))
