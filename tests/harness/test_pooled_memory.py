"""Pooled memory-server connections: the built-in agent's probes borrow connections, and the
server's call log still attributes every call to its own probe when probes overlap (real memory
server over streamable HTTP, real checkpoint restores, concurrent probes); the pool
opens no more connections than leases overlap, and never lends one whose transport failed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

from harness.kit.agents import BuiltinAgent
from harness.kit.results import ResultsLog, read_records
from harness.mirage.probing.loop import plan_probes, run_probes
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.scoring import Gold, KnownIdResolver, get_profile
from memory_server.calllog import read_calls
from memory_server.http import HttpServerThread, untagged
from memory_server.server import TAG_HEADER, build_server
from runtime.backbones.scripted import FunctionBackbone
from runtime.mcp_client import MCPConnectionPool, MCPServerConfig
from runtime.messages import Message, ToolResultMessage, UserMessage
from tests.harness.agents_support import make_checkpoint
from tests.memory_server.conftest import write_workspace

CONCURRENCY = 4
QUESTIONS = 6  # x 2 conditions = 12 probes, three times the concurrency
REPLY = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"


def reading_backbone(in_flight: asyncio.Barrier) -> FunctionBackbone:
    """Reads the line of MEMORY.md numbered like the probe's question (so a logged call names
    its probe) once every worker's probe is in flight, then answers."""

    async def reply(messages: Sequence[Message]) -> str:
        if isinstance(messages[-1], ToolResultMessage):
            return REPLY
        await in_flight.wait()
        question = next(m for m in reversed(messages) if isinstance(m, UserMessage))
        number = int(question.plain_text.split("Question ")[1].split(":")[0])
        arguments = {"ref": "MEMORY.md", "start_line": number + 1, "end_line": number + 1}
        call = json.dumps({"name": "artifact_get", "arguments": arguments})
        return f"<tool_call>{call}</tool_call>"

    return FunctionBackbone(reply, model="reader")


async def test_concurrent_probes_share_connections_and_keep_their_attribution(
    tmp_path: Path,
) -> None:
    server = build_server(write_workspace(tmp_path / "ws"), transport="streamable-http")
    checkpoint = make_checkpoint(tmp_path / "family")
    questions = [
        (
            f"q{n}",
            f"Question {n}: what was the median rent in city {n}?",
            Gold(answerable="NO", artifact="chart_1"),
        )
        for n in range(QUESTIONS)
    ]
    tasks = list(plan_probes({"S2": checkpoint}, questions, ["C0", "Cm"], 1))
    backbone = reading_backbone(asyncio.Barrier(CONCURRENCY))
    with HttpServerThread(server) as http:
        agent = BuiltinAgent(backbone, memory_url=http.tagged_url)
        with ResultsLog(tmp_path / "results.jsonl", ProbeRecord) as results:
            try:
                await run_probes(
                    agent,
                    tasks,
                    results,
                    KnownIdResolver([]),
                    get_profile(),
                    concurrency=CONCURRENCY,
                )
            finally:
                await agent.aclose()

    calls = read_calls(server.service.call_log.path)
    records = {
        record.key: record for record in read_records(tmp_path / "results.jsonl", ProbeRecord)
    }
    assert len(calls) == len(records) == len(tasks)
    by_tag = {call.tag: call for call in calls}
    for task in tasks:
        logged = by_tag[task.tag]
        assert f"Question {logged.arguments['start_line'] - 1}:" in task.question
        assert [c.arguments for c in records[task.key].tool_calls] == [logged.arguments]


async def test_a_pool_opens_one_connection_per_overlapping_lease(tmp_path: Path) -> None:
    server = build_server(write_workspace(tmp_path / "ws"), transport="streamable-http")
    with HttpServerThread(server) as http:
        pool = MCPConnectionPool(MCPServerConfig(url=http.url))
        in_flight = asyncio.Barrier(3)

        async def lease(tag: str) -> bool:
            async with pool.lease({TAG_HEADER: tag}) as tools:
                await in_flight.wait()
                outcome = await tools.call("artifact_get", {"ref": "MEMORY.md"})
            return not outcome.is_error

        try:
            for round_ in range(3):
                ok = await asyncio.gather(*(lease(f"r{round_}.l{n}") for n in range(3)))
                assert all(ok)
        finally:
            await pool.aclose()
    assert pool.opened == 3
    tags = [call.tag for call in read_calls(server.service.call_log.path)]
    assert sorted(tags) == sorted(f"r{r}.l{n}" for r in range(3) for n in range(3))


async def test_a_connection_whose_transport_failed_is_not_lent_again(tmp_path: Path) -> None:
    workspace = write_workspace(tmp_path / "ws")
    first = HttpServerThread(build_server(workspace, transport="streamable-http")).start()
    port = first.port
    pool = MCPConnectionPool(MCPServerConfig(url=first.url, timeout_s=5))
    try:
        async with pool.lease() as tools:
            assert not (await tools.call("artifact_get", {"ref": "MEMORY.md"})).is_error
        first.stop()
        async with pool.lease() as tools:
            failed = await tools.call("artifact_get", {"ref": "MEMORY.md"})
        assert failed.is_error and "failed" in failed.text
        second = tmp_path / "second-calls.jsonl"
        server = build_server(workspace, call_log=second, transport="streamable-http")
        with HttpServerThread(server, port=port):
            async with pool.lease({TAG_HEADER: "after"}) as tools:
                assert not (await tools.call("artifact_get", {"ref": "MEMORY.md"})).is_error
            await pool.aclose()
    finally:
        first.stop()
    assert pool.opened == 2
    assert [call.tag for call in read_calls(second)] == ["after"]


def test_untagged_splits_a_probe_url_into_endpoint_and_tag() -> None:
    assert untagged("http://127.0.0.1:9/t/S2.q1.C0.r0/mcp") == (
        "http://127.0.0.1:9/mcp",
        "S2.q1.C0.r0",
    )
    assert untagged("http://127.0.0.1:9/mcp") == ("http://127.0.0.1:9/mcp", None)
    assert untagged("http://h/t/bad tag/mcp") == ("http://h/t/bad tag/mcp", None)
