from __future__ import annotations

from pathlib import Path

import pytest

from runtime.messages import AssistantMessage, ToolCall, ToolResultMessage, Usage, UserMessage
from runtime.session import AgentConfig, Session
from runtime.snapshot import (
    SnapshotCache,
    SnapshotError,
    load_snapshot,
    save_snapshot,
    session_hash,
)


def _session() -> Session:
    session = Session.new(AgentConfig(), context_window=8192)
    session.append(UserMessage.text("What was the rent in 2019?"))
    call = ToolCall(id="c1", name="artifact_recall", arguments={"query": "rent 2019", "k": 3})
    session.append(AssistantMessage(content="", tool_calls=(call,), raw="<tool_call>…</tool_call>"))
    session.append(ToolResultMessage(tool_call_id="c1", name="artifact_recall", content="1,240"))
    session.append(AssistantMessage(content="It was 1,240."))
    session.ledger.record(Usage(input_tokens=120, output_tokens=9, cached_tokens=100), model="m")
    session.tool_state["cursor"] = {"a": 1}
    return session


def test_round_trip_is_exact(tmp_path: Path) -> None:
    session = _session()
    path = save_snapshot(session, tmp_path)
    restored = load_snapshot(path)
    assert restored == session
    assert session_hash(restored) == session_hash(session) == path.name.split(".")[0]
    assert save_snapshot(restored, tmp_path) == path


def test_restores_are_independent_and_never_mutate_the_snapshot(tmp_path: Path) -> None:
    path = save_snapshot(_session(), tmp_path)
    before = path.read_bytes()
    cache = SnapshotCache()
    first, second = cache.restore(path), cache.restore(path)
    first.append(UserMessage.text("a probe question"))
    first.tool_state["cursor"]["a"] = 2
    assert len(second.messages) == 4
    assert second.tool_state["cursor"]["a"] == 1
    assert path.read_bytes() == before
    assert session_hash(cache.restore(path)) == path.name.split(".")[0]


def test_corrupted_snapshot_is_refused(tmp_path: Path) -> None:
    path = save_snapshot(_session(), tmp_path)
    data = bytearray(path.read_bytes())
    data[-20] = ord("X") if data[-20] != ord("X") else ord("Y")
    path.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="corrupted"):
        load_snapshot(path)


def test_foreign_version_and_garbage_are_refused(tmp_path: Path) -> None:
    path = save_snapshot(_session(), tmp_path)
    head, _, payload = path.read_bytes().partition(b"\n")
    path.write_bytes(head.replace(b'"version":1', b'"version":99') + b"\n" + payload)
    with pytest.raises(SnapshotError, match="version 99"):
        load_snapshot(path)
    junk = tmp_path / "junk.session"
    junk.write_bytes(b"not a snapshot")
    with pytest.raises(SnapshotError, match="not a mirage session snapshot"):
        load_snapshot(junk)
    with pytest.raises(SnapshotError, match="cannot read"):
        load_snapshot(tmp_path / "missing.session")
