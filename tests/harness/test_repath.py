"""Older records (schema 2, a two-way ``path``) load marked ``binary``; ``mirage rescore``'s
path upgrade recomputes the four-way path from the checkpoint when it is still there (real
checkpoint folders, real runtime snapshots, the bundled pack's keywords) and keeps the binary
label, marked as such, when it is not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.kit.results import read_records
from harness.mirage.packs import load_pack
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.probing.repath import upgrade_paths
from harness.mirage.trunk.checkpoints import write_checkpoint
from runtime.messages import AssistantMessage, UserMessage
from runtime.session import AgentConfig, Session
from tests.harness.agents_support import TRUNK

PACK = load_pack("mirage-core")
QUESTION = next(q for q in PACK.questions if str(q.gold_answerable) == "YES")
ARTIFACT = QUESTION.artifact
TRUNK_CORE = TRUNK.model_copy(update={"pack": "mirage-core"})


def session(*texts: str, compacted: bool = False) -> Session:
    built = Session.new(AgentConfig(), context_window=8192)
    for text in texts:
        built.append(UserMessage.text(text))
        built.append(AssistantMessage(content="Noted."))
    built.compaction.count = int(compacted)
    return built


def schema_2_line(state: str, checkpoint_sha256: str, path: str = "R_context") -> dict[str, Any]:
    """A record as schema 2 wrote it: two-way path, gold without artifact or keywords."""
    return {
        "schema_version": 2,
        "scoring": "paper",
        "state": state,
        "condition": "C0",
        "question_id": QUESTION.id,
        "repeat": 0,
        "gold_answerable": "YES",
        "raw_output": "ANSWERABLE=YES\nSOURCE=x\nANSWER=y",
        "AC": 1,
        "SC": 0,
        "VC": 0,
        "GC": 0,
        "WS": 1,
        "path": path,
        "tool_calls": [],
        "gold": {
            "answerable": "YES",
            "source": QUESTION.gold_source,
            "answer": QUESTION.gold_answer,
            "answer_type": str(QUESTION.answer_type),
        },
        "checkpoint_sha256": checkpoint_sha256,
    }


def test_schema_2_paths_load_as_binary_and_upgrade_from_their_checkpoints(
    tmp_path: Path,
) -> None:
    family = tmp_path / "out" / "checkpoints" / TRUNK_CORE.family_id()
    planted = f"Here is {ARTIFACT}:\n{PACK.text_representation(ARTIFACT)}"
    common = {"trunk": TRUNK_CORE, "trunk_position": 1, "trunk_turns_total": 2}
    s1 = write_checkpoint(family, session(planted), state="S1-d0", workspace_version=None, **common)
    summary = f"[Compacted conversation summary]\nThe user shared {ARTIFACT} earlier."
    s2 = write_checkpoint(
        family,
        session(summary, "What about the weather?", compacted=True),
        state="S2",
        workspace_version=None,
        **common,
    )
    results = tmp_path / "out" / "oracle" / "results.jsonl"
    results.parent.mkdir(parents=True)
    lines = [
        schema_2_line("S1-d0", s1.snapshot_sha256),
        schema_2_line("S2", s2.snapshot_sha256),
        schema_2_line("S1-d50k", "f" * 64),  # its checkpoint is gone
    ]
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))

    old = read_records(results, ProbeRecord)
    assert [(r.path, r.path_source, r.path_evidence) for r in old] == [
        ("R_context", "binary", None)
    ] * 3

    upgraded, outcomes = upgrade_paths(results.parent, old)
    at_d0, at_s2, gone = upgraded
    assert (at_d0.path, at_d0.path_source) == ("R_context", "checkpoint")
    assert at_d0.path_evidence is not None and len(at_d0.path_evidence.context.verbatim) >= 2  # type: ignore[union-attr]
    # S2: the artifact is named in the summary but none of its content survived: no access
    # path, where the two-way label said "from context"
    assert (at_s2.path, at_s2.path_source) == ("R_none", "checkpoint")
    assert at_s2.path_evidence is not None and at_s2.path_evidence.context is not None
    assert at_s2.path_evidence.context.matched == []
    assert at_s2.gold is not None and at_s2.gold.artifact == ARTIFACT
    assert list(at_s2.gold.keywords) == PACK.keywords(ARTIFACT)
    assert (gone.path, gone.path_source) == ("R_context", "binary")
    assert outcomes == {"checkpoint": 2, "binary (checkpoint_gone)": 1}

    again, outcomes = upgrade_paths(results.parent, upgraded)
    assert again == upgraded and outcomes == {"binary (checkpoint_gone)": 1}
