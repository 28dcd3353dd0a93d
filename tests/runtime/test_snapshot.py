from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    path.write_bytes(head.replace(b'"version":3', b'"version":99') + b"\n" + payload)
    with pytest.raises(SnapshotError, match="version 99"):
        load_snapshot(path)
    junk = tmp_path / "junk.session"
    junk.write_bytes(b"not a snapshot")
    with pytest.raises(SnapshotError, match="not a mirage session snapshot"):
        load_snapshot(junk)
    with pytest.raises(SnapshotError, match="cannot read"):
        load_snapshot(tmp_path / "missing.session")


def test_how_calls_were_served_is_data_not_part_of_the_name(tmp_path: Path) -> None:
    """Two honest builds of one conversation differ in how long each call took and in how much
    of its prompt a cache served: one name."""
    fast, slow = _session(), _session()
    slow.session_id = fast.session_id
    fast.ledger.calls[0].latency_s, slow.ledger.calls[0].latency_s = 0.1347, 0.1476
    slow.ledger.calls[0].cached_tokens = 7
    slow.ledger.total_cached_tokens += 7
    first, second = save_snapshot(fast, tmp_path / "a"), save_snapshot(slow, tmp_path / "b")
    assert first.name == second.name and first.read_bytes() != second.read_bytes()
    restored = load_snapshot(second).ledger
    assert (restored.calls[0].latency_s, restored.calls[0].cached_tokens) == (0.1476, 7)  # data
    slow.ledger.calls[0].output_tokens += 1  # anything else is part of the name
    assert session_hash(slow) != session_hash(fast)


def test_a_format_2_snapshot_is_read_by_its_own_name(tmp_path: Path) -> None:
    """Format 2 left only latencies out of the name: its snapshots (earlier runs' checkpoints)
    are still read, checked by that rule, and refused when edited."""
    session = _session()
    session.ledger.calls[0].cached_tokens = 5
    old_name = session_hash(session, version=2)
    assert old_name != session_hash(session)
    payload = session.model_dump_json().encode()
    header = json.dumps(
        {"format": "mirage-session", "version": 2, "sha256": old_name,
         "payload_sha256": hashlib.sha256(payload).hexdigest(), "length": len(payload)}
    ).encode()  # fmt: skip
    path = tmp_path / f"{old_name}.session"
    path.write_bytes(header + b"\n" + payload)
    assert load_snapshot(path).ledger.calls[0].cached_tokens == 5
    edited = payload.replace(b'"cached_tokens":5', b'"cached_tokens":6')
    header = header.replace(
        hashlib.sha256(payload).hexdigest().encode(), hashlib.sha256(edited).hexdigest().encode()
    )
    path.write_bytes(header + b"\n" + edited)
    with pytest.raises(SnapshotError, match="it was edited"):
        load_snapshot(path)


def test_flush_tool_call_latencies_are_data_not_part_of_the_name(tmp_path: Path) -> None:
    """The memory flush's ``memory_append`` calls, kept in ``tool_state``: their latencies too."""
    fast, slow = _session(), _session()
    slow.session_id = fast.session_id
    for session, seconds in ((fast, 0.0021), (slow, 0.0034)):
        call = {"name": "memory_append", "arguments": {"text": "n"}, "latency_s": seconds}
        session.tool_state["compaction_flushes"] = [{"appended": 1, "tool_calls": [call]}]
    first, second = save_snapshot(fast, tmp_path / "a"), save_snapshot(slow, tmp_path / "b")
    assert first.name == second.name and first.read_bytes() != second.read_bytes()
    slow.tool_state["compaction_flushes"][0]["appended"] = 2  # anything else is part of the name
    assert session_hash(slow) != session_hash(fast)


def _rewrite(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit the payload and recompute the header's byte hash and length (not its name)."""
    head, _, payload = path.read_bytes().partition(b"\n")
    session = json.loads(payload)
    edit(session)
    body = json.dumps(session).encode()
    header = {**json.loads(head), "length": len(body)}
    header["payload_sha256"] = hashlib.sha256(body).hexdigest()
    path.write_bytes(json.dumps(header).encode() + b"\n" + body)


def _as_text(session: dict[str, Any]) -> None:
    session["config"]["context_window"] = "8192"


def _unknown_field(session: dict[str, Any]) -> None:
    session["ledger"]["calls"][0]["host"] = "box-2"


def _other_window(session: dict[str, Any]) -> None:
    session["config"]["context_window"] = 4096


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (_as_text, "config.context_window: Input should be a valid integer"),
        (_unknown_field, "ledger.calls.0.host: Extra inputs are not permitted"),
        (_other_window, "holds a session other than the one its header names"),
    ],
)
def test_an_edited_payload_with_its_byte_hash_recomputed_is_refused(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], says: str
) -> None:
    path = save_snapshot(_session(), tmp_path)
    _rewrite(path, edit)
    for restore in (load_snapshot, SnapshotCache().restore):
        with pytest.raises(SnapshotError, match=says) as caught:
            restore(path)
        assert "\n" not in str(caught.value)
