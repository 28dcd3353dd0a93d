"""``mirage run --agent …`` end to end: a scripted trunk on the bundled pack, real checkpoints,
our real memory server over HTTP, and agents we did not write — a real OpenAI-compatible agent
that calls the memory server over MCP for some probes, failing agents, and a command agent."""

from __future__ import annotations

import socket
import sys
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response

from harness.kit.attribution import AttributionError
from harness.kit.results import read_records
from harness.mirage.config import RunConfig
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report.attribution import ATTRIBUTION_FILE, AttributionSummary
from harness.mirage.run import MirageRun
from memory_server.calllog import read_calls
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message
from tests.harness.agents_support import (
    AgentServer,
    ToolUsingAgent,
    chat_app,
    failing_handler,
    wants_recall,
)

pytestmark = pytest.mark.slow

PROBES = 4 * 4 * 2  # questions x states x conditions


def summary(messages: Sequence[Message]) -> str:
    return "## Goal\nHelp the user.\n## Critical context\nArtifacts were shared earlier."


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One output folder for the module: the trunk is built once, then reused by every agent."""
    return tmp_path_factory.mktemp("own-agent")


async def _run(out: Path, agent: str, **options: Any) -> Path:
    config = RunConfig(
        trunk_model="scripted",
        summarizer_model="summarizer",
        limit=4,
        out=out,
        agent=agent,
        **options,
    )
    backbones = {"summarizer": FunctionBackbone(summary, model="summarizer")}
    [folder] = await MirageRun(config, backbones=backbones).execute()
    return folder


def misreports(tag: str) -> bool:
    return zlib.crc32(tag.encode()) % 3 == 0


async def test_concurrent_probes_are_labelled_by_what_the_agent_really_did(run_dir: Path) -> None:
    agent = ToolUsingAgent(rendezvous=4, misreport=misreports)
    with AgentServer(chat_app(agent.handle)) as server:
        folder = await _run(
            run_dir, f"openai:{server.base_url}", agent_model="tool-user", concurrency=4
        )

    records = read_records(folder, ProbeRecord)
    assert len(records) == PROBES and agent.max_in_flight >= 4
    assert {r.path for r in records} == {"R_tool", "R_context", "R_none"}
    for record in records:
        tag = record.tag  # type: ignore[attr-defined]
        assert (tag in agent.called) == wants_recall(tag)  # the agent followed its own policy
        assert record.path == expected_path(record, agent.called), tag
        attribution = record.trace["attribution"]  # type: ignore[attr-defined]
        assert attribution["tagged_calls"] == agent.called.get(tag, 0)
        lied = misreports(tag) and tag not in agent.called  # claimed a call it never made
        assert (attribution["disagreement"] is not None) == lied, tag
        assert record.restored_sha256 == record.checkpoint_sha256  # type: ignore[attr-defined]
    calls = read_calls(folder / "calls.jsonl")
    assert Counter(c.tag for c in calls) == Counter(agent.called)
    assert all(c.tool == "artifact_recall" and c.error is None for c in calls)

    summary_file = AttributionSummary.model_validate_json((folder / ATTRIBUTION_FILE).read_text())
    assert summary_file.r_tool == len(agent.called)
    assert summary_file.disagreements == summary_file.path_disagreements > 0
    assert (folder / "report.md").is_file() and (folder / "summary.json").is_file()


async def test_failing_agents_give_recorded_failures_and_a_complete_run(run_dir: Path) -> None:
    kinds = ["ok", "http500", "garbage", "timeout", "no_choices"]
    handlers = {kind: failing_handler(kind) for kind in kinds}

    async def handle(request: Request) -> Response:
        kind = kinds[zlib.crc32(request.headers["x-mirage-tag"].encode()) % len(kinds)]
        return await handlers[kind](request)

    with AgentServer(chat_app(handle)) as server:
        folder = await _run(
            run_dir,
            f"openai:{server.base_url}",
            agent_model="flaky",
            concurrency=4,
            agent_timeout_s=1.0,
        )
    records = read_records(folder, ProbeRecord)
    assert len(records) == PROBES
    errors = Counter(
        (r.provider_error or "ok").split(":")[1].strip() for r in records if r.provider_error
    )
    assert set(errors) == {"http", "garbage", "timeout", "malformed"}
    assert any(r.provider_error is None and r.raw_output for r in records)
    assert (folder / "summary.json").is_file()


COMMAND_AGENT = """
import json, os, sys, zlib
request = json.load(sys.stdin)
if zlib.crc32(request["tag"].encode()) % 4 == 0:
    sys.exit(7)
print(json.dumps({"reply": "ANSWERABLE=NO\\nSOURCE=NONE\\nANSWER=NONE", "tool_calls": []}))
"""


async def test_command_agent_run(run_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(f"#!{sys.executable}\n{COMMAND_AGENT}")
    script.chmod(0o755)
    folder = await _run(run_dir, f"cmd:{script}", concurrency=2)
    records = read_records(folder, ProbeRecord)
    assert len(records) == PROBES
    failed = {r.tag for r in records if r.provider_error}  # type: ignore[attr-defined]
    assert failed == {
        t
        for t in (r.tag for r in records)  # type: ignore[attr-defined]
        if zlib.crc32(t.encode()) % 4 == 0
    }
    assert all("exit status 7" in (r.provider_error or "exit status 7") for r in records)
    assert all(r.path == no_call_path(r.state) for r in records)


def no_call_path(state: str) -> str:
    """A probe without a retrieval call: the scripted trunk's S1 states still hold the planted
    evidence in the active context, its compacted S2 does not."""
    return "R_none" if state == "S2" else "R_context"


def expected_path(record: ProbeRecord, called: Mapping[str, int]) -> str:
    return "R_tool" if record.tag in called else no_call_path(record.state)  # type: ignore[attr-defined]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_fixed_url_agents_are_attributed_by_window_only_one_probe_at_a_time(
    run_dir: Path,
) -> None:
    memory_url = f"http://127.0.0.1:{free_port()}/mcp"
    agent = ToolUsingAgent(fixed_url=memory_url)
    with AgentServer(chat_app(agent.handle)) as server:
        folder = await _run(
            run_dir, f"openai:{server.base_url}", agent_model="fixed", memory_url=memory_url
        )
    records = read_records(folder, ProbeRecord)
    assert len(records) == PROBES and {r.path for r in records} == {"R_tool", "R_context", "R_none"}
    for record in records:
        tag = record.tag  # type: ignore[attr-defined]
        assert record.path == expected_path(record, agent.called), tag
        assert record.trace["attribution"]["window_calls"] == agent.called.get(tag, 0)  # type: ignore[attr-defined]
    assert {c.tag for c in read_calls(folder / "calls.jsonl")} == {None}

    overlapping = ToolUsingAgent(fixed_url=memory_url, rendezvous=4)
    with AgentServer(chat_app(overlapping.handle)) as server, pytest.raises(AttributionError):
        await _run(
            run_dir,
            f"openai:{server.base_url}",
            agent_model="fixed-concurrent",
            memory_url=memory_url,
            concurrency=4,
        )
    written = read_records(run_dir / "fixed-concurrent" / "results.jsonl", ProbeRecord)
    assert all(r.path == no_call_path(r.state) for r in written)  # no guessed R_tool label
    assert not any(wants_recall(r.tag) for r in written)  # type: ignore[attr-defined]
