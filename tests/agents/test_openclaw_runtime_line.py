"""The model endpoint gives probe requests the trunk session's ``Runtime:`` line, so every probe
of a state sends the same prompt up to its question (the answering model's prefix cache)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

from harness.kit.agents.openclaw.agent import OpenClawAgent
from harness.kit.agents.openclaw.endpoint import ModelEndpoint, SessionIdentity, TrunkRuntimeLine
from harness.kit.agents.openclaw.state import SessionNode, session_node
from runtime.backbones import FunctionBackbone
from runtime.messages import Message, UserMessage
from runtime.serve.requestlog import read_request_log
from runtime.serve.wire import ChatRequest, parse_request
from tests.agents.test_openclaw_state import store_with

TRUNK = SessionIdentity("agent:main:trunk", "trunk-uuid")
OTHER_FIELDS = "host=vm | os=Linux (x64) | model=mirage/answer | default_model=mirage/trunk"


def runtime_line(session: str, session_id: str) -> str:
    return f"Runtime: agent=main | session={session} | sessionId={session_id} | {OTHER_FIELDS}"


def probe_request(first_user: Any, model: str = "answer") -> ChatRequest:
    return parse_request(
        {
            "model": model,
            "messages": [
                {"role": "system", "content": "You are a personal assistant. Runtime: none"},
                {"role": "user", "content": first_user},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "[Tue 2026-12-01 06:58 UTC] Where do I live?"},
            ],
        }
    )


def fork_message(session: str = "agent:main:p-q1-1a2b3c4d", session_id: str = "fork-uuid") -> str:
    return f"[Tue 2026-12-01 06:58 UTC] I moved to Berlin.\n\n{runtime_line(session, session_id)}"


def rewriter() -> TrunkRuntimeLine:
    rewrite = TrunkRuntimeLine()
    rewrite.trunk = TRUNK
    return rewrite


def test_a_forks_runtime_line_comes_out_as_the_trunks() -> None:
    request = probe_request(fork_message())
    rewritten = rewriter()(request)
    assert rewritten is not None
    new, note = rewritten
    expected = (
        f"[Tue 2026-12-01 06:58 UTC] I moved to Berlin.\n\n{runtime_line(*TRUNK.fields().values())}"
    )
    assert new.messages[1].content == expected
    assert new.messages[0] == request.messages[0]  # only the first user message changes
    assert new.messages[2:] == request.messages[2:]
    assert "session=agent:main:p-q1-1a2b3c4d | sessionId=fork-uuid" in note
    assert "session=agent:main:trunk | sessionId=trunk-uuid" in note


def test_every_fork_of_a_state_gives_the_same_prompt() -> None:
    one = rewriter()(probe_request(fork_message("agent:main:p-a", "a-uuid")))
    two = rewriter()(probe_request(fork_message("agent:main:p-b", "b-uuid")))
    assert one is not None and two is not None
    assert one[0] == two[0]


def test_text_parts_are_rewritten_too() -> None:
    parts = [{"type": "text", "text": "intro"}, {"type": "text", "text": fork_message()}]
    rewritten = rewriter()(probe_request(parts))
    assert rewritten is not None
    content = rewritten[0].messages[1].content
    assert isinstance(content, list) and content[0].text == "intro"
    assert content[1].text.endswith(runtime_line(*TRUNK.fields().values()))


def test_requests_without_a_forks_line_are_left_alone() -> None:
    rewrite = rewriter()
    assert rewrite(probe_request("[Tue 2026-12-01 06:58 UTC] no runtime line here")) is None
    assert rewrite(probe_request(fork_message(*TRUNK.fields().values()))) is None  # the trunk's
    assert rewrite(probe_request(fork_message(), model="trunk")) is None  # not a probe
    assert rewrite(probe_request(fork_message(), model="housekeeping")) is None
    assert TrunkRuntimeLine()(probe_request(fork_message())) is None  # no trunk known yet


def test_the_trunk_session_id_is_read_from_openclaws_store(tmp_path: Path) -> None:
    store = store_with(tmp_path, [("agent:main:trunk", {"sessionId": "trunk-uuid"}, "done")])
    node = session_node(store, "agent:main:trunk")
    assert node is not None and node.session_id == "trunk-uuid"


class FakeClaw:
    """What ``OpenClawAgent.use_trunk_runtime_line`` touches: the endpoint and the store."""

    def __init__(self, trunk: SessionNode | None) -> None:
        self.endpoint = SimpleNamespace(runtime_line=TrunkRuntimeLine())
        self.trunk = trunk
        self.asked: list[str] = []

    def node(self, session: str) -> SessionNode | None:
        self.asked.append(session)
        return self.trunk


def test_probes_get_the_trunk_sessions_key_and_id() -> None:
    claw = FakeClaw(SessionNode(session_id="trunk-uuid"))
    agent = OpenClawAgent(claw, "openclaw/test")  # type: ignore[arg-type]
    agent.use_trunk_runtime_line()
    agent.use_trunk_runtime_line()
    assert claw.endpoint.runtime_line.trunk == TRUNK
    assert claw.asked == ["trunk"]  # read once


def test_without_a_trunk_session_id_nothing_is_rewritten() -> None:
    for node in (None, SessionNode()):
        claw = FakeClaw(node)
        OpenClawAgent(claw, "openclaw/test").use_trunk_runtime_line()  # type: ignore[arg-type]
        assert claw.endpoint.runtime_line.trunk is None


async def test_the_endpoint_serves_the_rewritten_prompt_and_logs_each_rewrite(
    tmp_path: Path,
) -> None:
    seen: list[str] = []

    def answer(messages: Sequence[Message]) -> str:
        first = next(m for m in messages if isinstance(m, UserMessage))
        seen.append(first.plain_text)
        return "Berlin."

    backbone = FunctionBackbone(answer, model="real", context_window=4096)
    endpoint = ModelEndpoint(backbone, 512, tmp_path / "requests.jsonl")
    endpoint.runtime_line.trunk = TRUNK
    base = endpoint.start()
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            for first in (fork_message(), "[Tue 2026-12-01 06:58 UTC] no line"):
                body = probe_request(first).model_dump(mode="json", exclude_none=True)
                response = await client.post(f"{base}/chat/completions", json=body)
                assert response.status_code == 200
    finally:
        endpoint.stop()
    assert "session=agent:main:trunk | sessionId=trunk-uuid" in seen[0]
    assert "fork-uuid" not in seen[0]
    logged = read_request_log(tmp_path / "requests.jsonl")
    assert logged[0].rewrite is not None and "fork-uuid" in logged[0].rewrite
    assert logged[1].rewrite is None
    kept = endpoint.requests.records[0].request_messages
    assert kept is not None and "sessionId=trunk-uuid" in kept[1]["content"]
