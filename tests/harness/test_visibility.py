"""The visibility map on sessions the runtime really built and restored from snapshots: the
bundled pack planted by a scripted agent, then a threshold compaction whose memory flush writes
a dated note through a real MCP server into the pack's real workspace."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compaction.config import CompactionConfig
from compaction.flush import flush_records
from compaction.policy import CompactionPolicy
from harness.mirage.packs import load_pack
from harness.mirage.probing.retrieval_paths import (
    ContextMessage,
    classify_path,
    context_from_messages,
)
from harness.mirage.probing.visibility import (
    Note,
    VisibilityMap,
    artifact_visibility,
    state_visibility,
    workspace_notes,
)
from memory_server.workspace import Workspace
from runtime.agent import Agent
from runtime.backbones.scripted import ScriptedBackbone
from runtime.mcp_client import MCPServerConfig, MCPToolset
from runtime.messages import UserMessage
from runtime.session import AgentConfig, Session
from runtime.snapshot import load_snapshot, save_snapshot
from tests.compaction.helpers import reply, words

PACK = load_pack("mirage-core")
KEYWORDS = {artifact.id: artifact.keywords for artifact in PACK.spec.artifacts}
HARVEST, GARDEN, COMPOST, FERRY, FITNESS, PHONE = KEYWORDS
WINDOW = 32_768  # flush above 9,576 tokens, compaction above 12,768, tail of 6,384 kept
APPEND = '<tool_call>{"name": "memory_append", "arguments": {"text": "%s"}}</tool_call>'
SERVER = Path(__file__).resolve().parents[1] / "compaction" / "memory_append_server.py"


def _restored(session: Session, tmp_path: Path) -> Session:
    return load_snapshot(save_snapshot(session, tmp_path / "snapshots"))


def _planting_replies(turns: int) -> list[object]:
    return [reply(turn.assistant or "ok", 1_000 + 100 * index) for index, turn in
            enumerate(PACK.planting_turns()[:turns])]  # fmt: skip


async def _plant(agent: Agent, turns: list[UserMessage]) -> None:
    for message in turns:
        await agent.turn(message)


def _filler(count: int, start: int) -> list[UserMessage]:
    return [
        UserMessage.text(turn.text)
        for turn in PACK.filler_turns(seed=7, n_turns=start + count)[start:]
    ]


async def test_every_planted_artifact_is_verbatim_before_compaction(tmp_path: Path) -> None:
    planting = PACK.planting_turns()
    replies = [*_planting_replies(len(planting)), *(reply("Noted.", 3_000) for _ in range(5))]
    agent = Agent(
        Session.new(AgentConfig(), context_window=WINDOW),
        ScriptedBackbone(replies, context_window=WINDOW),  # type: ignore[arg-type]
    )
    await _plant(agent, [turn.to_user_message() for turn in planting] + _filler(5, 0))
    restored = _restored(agent.session, tmp_path)

    state = state_visibility("S1-d0", restored, [], KEYWORDS)
    assert {a: v.visibility for a, v in state.artifacts.items()} == dict.fromkeys(
        KEYWORDS, "verbatim"
    )
    for artifact_id, seen in state.artifacts.items():
        # the image of each attachment, and its text stand-in holds every keyword
        assert seen.context.images and seen.context.verbatim == KEYWORDS[artifact_id]
        assert seen.context.summary == [] and seen.threshold == 2
    assert (state.compaction_count, state.messages) == (0, len(agent.session.messages))


async def test_after_a_compaction_with_memory_flush(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    PACK.materialize_workspace(workspace)
    planting = PACK.planting_turns()
    early, last = planting[:-1], planting[-1]  # the phone screenshot comes after the filler
    note = (
        f"Garden chart visitors: {KEYWORDS[GARDEN][1]} in January, busiest in {KEYWORDS[GARDEN][2]}"
    )
    summary = (
        f"## Critical context\nThe user filed {HARVEST} (apple harvest): "
        f"{KEYWORDS[HARVEST][1]} leads, {KEYWORDS[HARVEST][3]} in one year. "
        f"Also filed {FITNESS} and {COMPOST}."
    )
    replies = [
        *_planting_replies(len(early)),
        *(reply("Done. " + words(600), 3_000 + 200 * i) for i in range(12)),
        reply(last.assistant or "ok", 8_000),
        reply("Sure. " + words(300), 10_000),  # above the flush threshold: the flush turn runs
        reply(APPEND % note, 10_100),
        reply("NO_REPLY", 10_200),
        reply("Right. " + words(300), 13_000),  # above the compaction threshold
    ]
    backbone = ScriptedBackbone(replies, context_window=WINDOW)  # type: ignore[arg-type]
    summarizer = ScriptedBackbone([summary], model="summarizer", context_window=128_000)
    policy = CompactionPolicy(CompactionConfig(), summarizer=summarizer)
    server = MCPServerConfig(
        name="memory", command=sys.executable, args=[str(SERVER), str(workspace)]
    )
    async with MCPToolset([server]) as tools:
        agent = Agent(Session.new(AgentConfig(), context_window=WINDOW), backbone, tools, policy)
        await _plant(agent, [turn.to_user_message() for turn in early] + _filler(12, 0))
        await _plant(agent, [last.to_user_message(), *_filler(2, 12)])
    backbone.assert_exhausted()
    summarizer.assert_exhausted()
    assert [f.status for f in flush_records(agent.session)] == ["written"]
    assert agent.session.compaction_count == 1

    restored = _restored(agent.session, tmp_path)
    store = Workspace.open(workspace)
    notes = workspace_notes(store, store.snapshot())
    assert [n.path for n in notes] and note in notes[-1].text
    state = state_visibility("S2", restored, notes, KEYWORDS)
    grid = {artifact: seen.visibility for artifact, seen in state.artifacts.items()}
    assert grid == {
        HARVEST: "summary_only",
        GARDEN: "notes_only",
        COMPOST: "nowhere",  # the summary names its id only: not its content
        FERRY: "nowhere",
        FITNESS: "nowhere",
        PHONE: "verbatim",
    }
    harvest = state.artifacts[HARVEST]
    assert harvest.context.summary == [KEYWORDS[HARVEST][1], KEYWORDS[HARVEST][3]]
    assert [hit.message for hit in harvest.context.hits] == [0, 0]
    assert [hit.keyword for hit in state.artifacts[GARDEN].notes] == KEYWORDS[GARDEN][1:3]

    context = context_from_messages(restored.messages)
    for artifact_id, seen in state.artifacts.items():
        path, _ = classify_path(artifact_id, KEYWORDS[artifact_id], active=context)
        in_context = seen.visibility in ("verbatim", "summary_only")
        assert (path == "R_context") == in_context, artifact_id

    family = VisibilityMap()
    family.add(state)
    again = VisibilityMap.model_validate_json(family.model_dump_json())
    assert again.grid() == {"S2": grid}


@pytest.mark.parametrize(
    ("messages", "notes", "expected"),
    [
        ([ContextMessage(role="user", text="a 41.2 b", summary=True),
          ContextMessage(role="assistant", text="Elmbrook")], [], "summary_only"),
        ([ContextMessage(role="assistant", text="41.2 and Elmbrook")], [], "verbatim"),
        ([], [Note(path="memory/2026-05-01.md", text="Elmbrook 41.2")], "notes_only"),
        ([], [Note(path="memory/a.md", text="Elmbrook"), Note(path="MEMORY.md", text="41.2")],
         "notes_only"),
        ([ContextMessage(role="assistant", text="Elmbrook")],
         [Note(path="MEMORY.md", text="41.2")], "nowhere"),
    ],
)  # fmt: skip
def test_classes_follow_the_min_2_rule_per_surface(
    messages: list[ContextMessage], notes: list[Note], expected: str
) -> None:
    """The summary completes verbatim keywords (one rule for the active context); the notes are
    a surface of their own."""
    seen = artifact_visibility(messages, notes, "chart_x", ["Elmbrook", "41.2", "Harlow"])
    assert seen.visibility == expected
