"""Attribution of memory-server calls to probes from the server's call log."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.kit.agents.base import AgentUnderTest, ProbeReply, ToolCallRecord
from harness.kit.agents.command import CommandAgent
from harness.kit.agents.openai_endpoint import OpenAIEndpointAgent
from harness.kit.attribution import (
    AttributedAgent,
    AttributionError,
    CallAttributor,
    compare_reports,
)
from harness.mirage.probing.retrieval_paths import ProbeCall, RetrievalPath, classify_path
from harness.mirage.trunk.checkpoints import Checkpoint
from memory_server.calllog import CallLog, CallRecord, now_iso
from tests.harness.agents_support import PROTOCOL_REPLY, make_checkpoint


def call(tool: str, tag: str | None) -> CallRecord:
    return CallRecord(time=now_iso(), tool=tool, tag=tag, transport="http")


def test_tagged_calls_go_to_their_probe_even_when_probes_overlap(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.jsonl")
    attributor = CallAttributor(log.path)
    attributor.begin("a")
    attributor.begin("b")
    log.append(call("artifact_recall", "b"))
    log.append(call("artifact_get", "a"))
    log.append(call("artifact_recall", "trunk"))  # not a probe of this run: ignored
    tagged_b, untagged_b = attributor.end("b")
    log.append(call("artifact_recall", "a"))
    tagged_a, untagged_a = attributor.end("a")
    assert [c.tool for c in tagged_b] == ["artifact_recall"] and untagged_b == []
    assert [c.tool for c in tagged_a] == ["artifact_get", "artifact_recall"] and untagged_a == []


def test_calls_logged_before_the_probe_started_do_not_count(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.jsonl")
    log.append(call("artifact_recall", "a"))  # an earlier, killed run of the same probe
    attributor = CallAttributor(log.path)
    attributor.begin("a")
    assert attributor.end("a") == ([], [])


def test_untagged_calls_are_attributed_by_window_when_one_probe_is_in_flight(
    tmp_path: Path,
) -> None:
    log = CallLog(tmp_path / "calls.jsonl")
    attributor = CallAttributor(log.path)
    attributor.begin("a")
    log.append(call("artifact_recall", None))
    tagged, untagged = attributor.end("a")
    assert tagged == [] and [c.tool for c in untagged] == ["artifact_recall"]
    attributor.begin("b")
    assert attributor.end("b") == ([], [])


def test_untagged_calls_while_probes_overlap_stop_the_run(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.jsonl")
    attributor = CallAttributor(log.path)
    attributor.begin("a")
    attributor.begin("b")
    log.append(call("artifact_recall", None))
    with pytest.raises(AttributionError, match="--concurrency 1"):
        attributor.end("a")


def test_reports_are_compared_with_what_the_server_saw() -> None:
    recall = ToolCallRecord(name="artifact_recall")
    assert compare_reports(None, [call("artifact_recall", "a")]) is None
    assert compare_reports([recall], [call("artifact_recall", "a")]) is None
    claimed = compare_reports([recall], [])
    assert claimed is not None and claimed.path_differs
    assert claimed.reported_not_seen == {"artifact_recall": 1}
    partial = compare_reports([recall], [call("artifact_recall", "a"), call("artifact_get", "a")])
    assert partial is not None and not partial.path_differs
    assert partial.seen_not_reported == {"artifact_get": 1}
    other_tools = compare_reports([ToolCallRecord(name="web_search")], [])
    assert other_tools is None  # only the memory server's tools can be checked


class LoggingAgent(AgentUnderTest):
    """An external agent double that makes its memory calls by appending to the call log."""

    def __init__(self, log: CallLog, calls: list[CallRecord], reported: list[str] | None) -> None:
        self.name = "double"
        self.log = log
        self.calls = calls
        self.reported = reported

    async def probe(self, checkpoint: Checkpoint, message: str, *, tag: str) -> ProbeReply:
        for record in self.calls:
            self.log.append(record)
        reported = [ToolCallRecord(name=n) for n in self.reported or []]
        return ProbeReply(
            text=PROTOCOL_REPLY,
            tool_calls=reported,
            trace={"tool_calls_reported": self.reported is not None},
        )


def path_of(reply: ProbeReply) -> RetrievalPath:
    """The four-way path of a probe about ``chart_1`` whose context is unknown."""
    calls = [ProbeCall.model_validate(c, from_attributes=True) for c in reply.tool_calls]
    return classify_path("chart_1", ["41.2"], active=None, calls=calls)[0]


async def test_attributed_agent_labels_from_the_server_log(tmp_path: Path) -> None:
    checkpoint = make_checkpoint(tmp_path / "family")
    log = CallLog(tmp_path / "calls.jsonl")
    inner = LoggingAgent(log, [call("artifact_recall", "p1")], reported=[])
    agent = AttributedAgent(inner, log.path)

    reply = await agent.probe(checkpoint, "Q", tag="p1")
    assert path_of(reply) == "R_tool"
    attribution = reply.trace["attribution"]
    assert attribution["tagged_calls"] == 1 and attribution["agent_reported"] is True
    assert attribution["disagreement"]["seen_not_reported"] == {"artifact_recall": 1}
    assert attribution["disagreement"]["path_differs"] is True

    inner.calls, inner.reported = [call("artifact_recall", "someone-else")], None
    reply = await agent.probe(checkpoint, "Q", tag="p2")
    assert path_of(reply) == "R_none"  # no call, and the agent did not report its context
    assert reply.trace["attribution"]["disagreement"] is None


def test_attributed_agent_binds_the_memory_url_of_the_agent_it_wraps(tmp_path: Path) -> None:
    checkpoint = make_checkpoint(tmp_path / "family")
    inner = CommandAgent(["agent"])
    agent = AttributedAgent(inner, tmp_path / "calls.jsonl")
    agent.bind_memory(lambda tag: f"http://127.0.0.1:9/t/{tag}/mcp")
    request, _ = inner.build_request(checkpoint, "Q", "S2.C0.q1.r0")
    assert request.memory_url == "http://127.0.0.1:9/t/S2.C0.q1.r0/mcp"
    agent.bind_memory(None)
    assert inner.build_request(checkpoint, "Q", "S2.C0.q1.r0")[0].memory_url is None


async def test_attributed_agent_closes_the_agent_it_wraps(tmp_path: Path) -> None:
    inner = OpenAIEndpointAgent("http://127.0.0.1:9/v1")
    client = inner.client()
    await AttributedAgent(inner, tmp_path / "calls.jsonl").aclose()
    assert client.is_closed
    holding_nothing = LoggingAgent(CallLog(tmp_path / "calls.jsonl"), [], reported=None)
    await AttributedAgent(holding_nothing, tmp_path / "calls.jsonl").aclose()
