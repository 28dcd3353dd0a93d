"""Reading OpenClaw's state (compaction count, memory files), the probe-history hash, the
model endpoint's routing and the attribution of OpenClaw's own memory reads."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.kit.agents.base import ProbeReply, ToolCallRecord
from harness.kit.agents.openclaw.agent import (
    OWN_MEMORY_READS,
    OpenClawAttributedAgent,
    own_memory_reads,
    probe_context,
    reported_calls,
    restored_digest,
)
from harness.kit.agents.openclaw.endpoint import ModelEndpoint
from harness.kit.agents.openclaw.state import (
    copy_memory,
    history_digest,
    is_memory_path,
    memory_digest,
    openclaw_boot,
    session_node,
)
from harness.mirage.probing.retrieval_paths import ProbeCall, classify_path
from harness.mirage.trunk.checkpoints import Checkpoint
from harness.mirage.trunk.runner import SCRIPTED_ACKNOWLEDGEMENT
from runtime.backbones import FunctionBackbone
from runtime.serve import RequestRecord
from runtime.serve.requestlog import LoggedCall, read_request_log


def store_with(tmp_path: Path, rows: list[tuple[str, dict[str, Any], str | None]]) -> Path:
    path = tmp_path / "openclaw-agent.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE session_nodes (session_key TEXT PRIMARY KEY, current_session_id TEXT, "
            "entry_json TEXT, status TEXT)"
        )
        for key, entry, status in rows:
            db.execute(
                "INSERT INTO session_nodes VALUES (?, 'id', ?, ?)", (key, json.dumps(entry), status)
            )
    return path


def test_the_compaction_count_comes_from_the_session_node(tmp_path: Path) -> None:
    store = store_with(
        tmp_path,
        [("agent:main:trunk", {"compactionCount": 2}, "done"), ("agent:main:new", {}, "running")],
    )
    trunk = session_node(store, "agent:main:trunk")
    assert trunk is not None and trunk.compaction_count == 2 and trunk.status == "done"
    fresh = session_node(store, "agent:main:new")
    assert fresh is not None and fresh.compaction_count == 0 and fresh.status == "running"
    assert session_node(store, "agent:main:absent") is None
    assert session_node(tmp_path / "none.sqlite", "agent:main:trunk") is None


def test_memory_files_are_copied_exactly_and_hashed(tmp_path: Path) -> None:
    source, target = tmp_path / "checkpoint", tmp_path / "workspace"
    (source / "memory").mkdir(parents=True)
    (source / "MEMORY.md").write_text("# kept\n")
    (source / "memory" / "2026-12-01.md").write_text("rent 2110\n")
    (target / "memory").mkdir(parents=True)
    (target / "memory" / "written-by-a-probe.md").write_text("leak\n")
    assert copy_memory(source, target) == memory_digest(source)
    assert not (target / "memory" / "written-by-a-probe.md").exists()
    assert memory_digest(target) != memory_digest(tmp_path / "empty")


@pytest.mark.parametrize(
    ("path", "counted"),
    [("MEMORY.md", True), ("memory/2026-12-01.md#L1-L4", True), ("notes.md", False), (3, False)],
)
def test_memory_paths(path: object, counted: bool) -> None:
    assert is_memory_path(path) is counted


def first_request(session: str, probe: str) -> list[dict[str, Any]]:
    runtime = f"Runtime: agent=main | session=agent:main:{session} | sessionId={session}-uuid"
    return [
        {"role": "system", "content": f"You are OpenClaw. session {session}"},
        {"role": "user", "content": f"[Tue] planted turn\n\n{runtime}"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": probe},
    ]


def test_the_history_hash_ignores_the_fork_and_the_probe_but_not_the_history() -> None:
    one = history_digest(first_request("p-1", "question one"))
    assert one == history_digest(first_request("p-2", "question two"))
    leaked = first_request("p-3", "question three")
    leaked.insert(3, {"role": "user", "content": "question one"})
    assert history_digest(leaked) != one
    assert history_digest(None) is None


def record(
    model: str, calls: list[LoggedCall], messages: Any = None, eit: int = 10
) -> RequestRecord:
    return RequestRecord(
        request_id="r", model=model, tool_calls=calls, eit=eit, request_messages=messages
    )


def test_reported_calls_and_own_memory_reads() -> None:
    requests = [
        record("answer", [LoggedCall(name="mirage__artifact_recall", arguments={"query": "x"})]),
        record(
            "answer",
            [
                LoggedCall(name="memory_get", arguments={"path": "memory/a.md"}),
                LoggedCall(name="memory_get", arguments={"path": "SOUL.md"}),
            ],
        ),
    ]
    calls = reported_calls(requests)
    assert [c.name for c in calls] == ["artifact_recall", "memory_get", "memory_get"]
    assert [c.executed for c in calls] == [True, False, False]  # the last call got no reply
    own = own_memory_reads(calls)
    assert [c.arguments["path"] for c in own] == ["memory/a.md"]
    assert restored_digest("m", []) is None
    assert restored_digest("m", [record("answer", [], first_request("p", "q"))]) is not None


def test_the_probe_context_is_the_first_request_without_the_probe() -> None:
    system = (
        "You are OpenClaw.\n# Project Context\n## /home/u/ws/SOUL.md\nBe kind.\n"
        "## /home/u/ws/MEMORY.md\nRent is 2110 EUR (rent_1).\n"
    )
    messages = first_request("p-1", "What is the rent?")
    messages[0] = {"role": "system", "content": system}
    followup = [
        *messages,
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "tool_call_id": "c1", "content": "rent_1: 2110 EUR"},
    ]
    requests = [
        record("answer", [LoggedCall(name="read", arguments={"path": "MEMORY.md"})], messages),
        record("answer", [], followup),
    ]
    context = probe_context(requests)
    assert context.source == "openclaw_session" and context.messages is not None
    assert [m.role for m in context.messages] == ["user", "assistant"]  # no system, no probe
    assert all("What is the rent?" not in m.text for m in context.messages)
    assert [b.source for b in context.boot] == ["system_prompt", "SOUL.md", "MEMORY.md"]
    assert "2110 EUR" in context.boot[2].text
    [read] = reported_calls(requests)
    assert read.executed and read.result_text == "rent_1: 2110 EUR"
    assert own_memory_reads([read]) == [read]
    path, evidence = classify_path(
        "rent_1", ["2110", "Elmbrook"], active=context.messages, boot=context.boot
    )
    assert path == "R_boot" and evidence.boot[0].source == "MEMORY.md"
    missing = probe_context([])
    assert missing.messages is None and missing.unavailable
    assert openclaw_boot("plain prompt") == [openclaw_boot("plain prompt")[0]]


async def test_the_endpoint_routes_by_model_name_and_logs_without_prompts(tmp_path: Path) -> None:
    answer = FunctionBackbone(lambda messages: "real answer", model="real", context_window=4096)
    endpoint = ModelEndpoint(answer, 512, tmp_path / "requests.jsonl")
    base = endpoint.start()
    try:
        endpoint.trunk.reply = "scripted planting reply"
        async with httpx.AsyncClient(timeout=30) as client:
            replies = {}
            for model in ("trunk", "answer", "housekeeping"):
                body = {
                    "model": model,
                    "messages": [{"role": "user", "content": "secret text"}],
                    "max_completion_tokens": 32,  # as OpenClaw sends it
                }
                response = await client.post(f"{base}/chat/completions", json=body)
                replies[model] = response.json()["choices"][0]["message"]["content"]
        mark = 0
        assert replies == {
            "trunk": "scripted planting reply",
            "answer": "real answer",
            "housekeeping": "real answer",
        }
        assert endpoint.trunk.last_eit is not None and endpoint.trunk.last_eit > 0
        observed = endpoint.trunk.last_eit
        async with httpx.AsyncClient(timeout=30) as client:
            summary = {
                "model": "trunk",  # OpenClaw sends a turn's compaction summary here
                "messages": [
                    {"role": "system", "content": "You are a context summarization assistant."},
                    {"role": "user", "content": "<conversation>…</conversation>"},
                ],
            }
            response = await client.post(f"{base}/chat/completions", json=summary)
        assert response.json()["choices"][0]["message"]["content"] == "real answer"
        assert endpoint.trunk.last_eit == observed  # a summary is not a trunk turn
        assert endpoint.in_flight.idle
        kept = endpoint.requests.since(mark, "answer")
        assert kept and kept[0].request_messages  # content in memory for the driver
    finally:
        endpoint.stop()
    logged = read_request_log(tmp_path / "requests.jsonl")
    assert [r.model for r in logged] == ["trunk", "answer", "housekeeping", "trunk"]
    assert "secret text" not in (tmp_path / "requests.jsonl").read_text()
    assert SCRIPTED_ACKNOWLEDGEMENT  # the filler turns' reply


class StubOpenClaw:
    name = "openclaw/stub"
    memory_url = None

    async def probe(self, checkpoint: Checkpoint, message: str, *, tag: str) -> ProbeReply:
        read = ToolCallRecord(name="memory_search", arguments={"query": "rent"}, executed=True)
        trace = {"tool_calls_reported": True, OWN_MEMORY_READS: [read.model_dump()]}
        return ProbeReply(text="2110 EUR", tool_calls=[read], trace=trace)


async def test_openclaws_own_memory_search_is_r_tool(tmp_path: Path) -> None:
    agent = OpenClawAttributedAgent(StubOpenClaw(), tmp_path / "calls.jsonl")
    reply = await agent.probe(None, "q", tag="t1")  # type: ignore[arg-type]
    assert [c.name for c in reply.tool_calls] == ["memory_search"]
    calls = [ProbeCall.model_validate(c, from_attributes=True) for c in reply.tool_calls]
    assert classify_path("rent_1", ["2110"], active=None, calls=calls)[0] == "R_tool"
    assert reply.trace["attribution"]["disagreement"] is None  # not a memory-server tool
