"""``mirage run`` end to end on the bundled pack with a scripted trunk, a scripted summarizer
and an oracle answerer that answers from the gold (and calls artifact_recall under Cm):
real workspace, real index, real memory server over HTTP, real checkpoints and restores."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.kit.results import read_records
from harness.kit.rundir import find_workspace
from harness.mirage.config import RunConfig
from harness.mirage.packs import load_pack
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.protocol import ProfileName, probe_template
from harness.mirage.run import MirageRun, ResumeError
from mirage.cli import app
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message, ToolResultMessage, ToolSpec, UserMessage

pytestmark = pytest.mark.slow

PACK = load_pack("mirage-core")
GOLD = {q.question.strip(): q for q in PACK.questions}


def oracle(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    last_user = next(m for m in reversed(messages) if isinstance(m, UserMessage))
    text = last_user.plain_text
    question = next(q for wording, q in GOLD.items() if wording in text)
    retrieved = isinstance(messages[-1], ToolResultMessage)
    if "MUST call the" in text and not retrieved:
        query = json.dumps({"name": "artifact_recall", "arguments": {"query": question.question}})
        return f"<tool_call>{query}</tool_call>"
    return (
        f"ANSWERABLE={question.gold_answerable}\nSOURCE={question.gold_source}\n"
        f"ANSWER={question.gold_answer}"
    )


def summary(messages: Sequence[Message]) -> str:
    return "## Goal\nHelp the user.\n## Critical context\nArtifacts were shared earlier."


def _run(tmp_path: Path, answerer: FunctionBackbone, scoring: ProfileName = "paper") -> MirageRun:
    config = RunConfig(
        models=["oracle"],
        trunk_model="scripted",
        summarizer_model="summarizer",
        limit=4,
        out=tmp_path / "run",
        scoring=scoring,
    )
    backbones = {
        "oracle": answerer,
        "summarizer": FunctionBackbone(summary, model="summarizer"),
    }
    return MirageRun(config, backbones=backbones)


async def test_oracle_scores_grounded_everywhere_and_resumes(tmp_path: Path) -> None:
    answerer = FunctionBackbone(oracle, model="oracle", context_window=8192)
    run = _run(tmp_path, answerer)
    [folder] = await run.execute()
    [report] = run.reports
    assert report.report == folder / "report.md" and report.aggregate.states

    records = read_records(folder / "results.jsonl", ProbeRecord)
    assert len(records) == 4 * 4 * 2  # questions x states x conditions
    answerable = [r for r in records if r.gold_answerable == "YES"]
    assert answerable and all(r.GC == 1 for r in answerable)
    assert all(r.HR == 0 for r in records if r.gold_answerable == "NO")
    assert {r.path for r in records if r.condition == "Cm"} == {"R_tool"}
    # C0 made no call: before compaction the planted content is in the context; at S2 the
    # scripted summary kept none of it, so the oracle's right answers had no access path
    assert {r.path for r in records if r.condition == "C0" and r.state != "S2"} == {"R_context"}
    at_s2 = [r for r in records if r.condition == "C0" and r.state == "S2"]
    assert {r.path for r in at_s2} == {"R_none"} and all(
        r.GC != 0 for r in at_s2 if r.GC is not None
    )
    for record in records:
        evidence = record.path_evidence
        assert record.path_source == "probe" and evidence is not None and record.gold is not None
        assert evidence.artifact_id == record.gold.artifact and evidence.keywords
        assert list(record.gold.keywords) == PACK.keywords(evidence.artifact_id)
        if record.path == "R_context":
            assert len(evidence.context.matched) >= evidence.threshold  # type: ignore[union-attr]
        if record.condition == "Cm":  # the runtime's tool result is on the record
            assert evidence.calls[0].retrieval and evidence.calls[0].result_names_id
            assert evidence.artifact_id in (record.tool_calls[0].result_text or "")
    for record in records:  # every probe started from an untouched copy of its checkpoint
        assert record.restored_sha256 == record.checkpoint_sha256  # type: ignore[attr-defined]
    summary_json = json.loads((folder / "summary.json").read_text())
    assert summary_json["states"]["S2"]["C0"]["GC"] == 100.0
    assert summary_json["scoring"] == "paper"
    assert {r.scoring for r in records} == {"paper"}
    for condition in ("C0", "Cm"):
        templates = {r.prompt_template for r in records if r.condition == condition}
        assert templates == {probe_template(condition, "paper")}
    assert find_workspace(folder) == folder / ".." / "workspace"  # through the link
    with pytest.raises(ResumeError, match="--scoring paper"):
        await _run(tmp_path, answerer, scoring="lenient").execute()

    manifests = {
        p.parent.name: json.loads(p.read_text())
        for p in (tmp_path / "run" / "checkpoints").glob("*/*/manifest.json")
    }
    assert set(manifests) == {"S1-d0", "S1-d50k", "S1-d80k", "pre-compaction", "S2@verbatim"}
    assert manifests["S2@verbatim"]["compaction_count"] == 1
    assert manifests["S2@verbatim"]["summary_format"] == "verbatim"
    assert all(m["compaction_count"] == 0 for s, m in manifests.items() if s != "S2@verbatim")
    assert manifests["S1-d0"]["eit"] < manifests["S1-d50k"]["eit"] < manifests["S1-d80k"]["eit"]

    calls = answerer.calls
    rerun = FunctionBackbone(oracle, model="oracle", context_window=8192)
    await _run(tmp_path, rerun).execute()
    assert rerun.calls == []  # nothing re-probed, checkpoints reused
    assert len(read_records(folder / "results.jsonl", ProbeRecord)) == len(records)
    assert calls
    _rescore_upgrades_schema_2(folder, records)


def _rescore_upgrades_schema_2(folder: Path, records: list[ProbeRecord]) -> None:
    """The same results as schema 2 wrote them (two-way path, gold without keywords):
    ``mirage rescore`` recomputes every path from the run's checkpoints."""
    results = folder / "results.jsonl"
    old = []
    for record in records:
        line = record.model_dump(mode="json", exclude={"path_evidence", "path_source"})
        tool = any(c.executed and c.name == "artifact_recall" for c in record.tool_calls)
        line.update(schema_version=2, path="R_tool" if tool else "R_context")
        line["gold"] = {k: v for k, v in line["gold"].items() if k not in {"artifact", "keywords"}}
        old.append(json.dumps(line) + "\n")
    results.write_text("".join(old))
    assert {r.path_source for r in read_records(results, ProbeRecord)} == {"binary"}
    result = CliRunner().invoke(app, ["rescore", str(folder)])
    assert result.exit_code == 0, result.output
    assert f"{len(records)} path(s) checkpoint" in result.output
    upgraded = read_records(results, ProbeRecord)
    assert {r.path_source for r in upgraded} == {"checkpoint"}
    assert [(r.key, r.path) for r in upgraded] == [(r.key, r.path) for r in records]


class ProcessDied(BaseException):
    """Stands for the process being killed mid-run (not an error the run could handle)."""


async def test_killed_run_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    budget = {"left": 7}

    def dying(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        if budget["left"] == 0:
            raise ProcessDied
        budget["left"] -= 1
        return oracle(messages, tools)

    with pytest.raises(ProcessDied):
        await _run(tmp_path, FunctionBackbone(dying, model="oracle", context_window=8192)).execute()
    folder = tmp_path / "run" / "oracle"
    partial = read_records(folder / "results.jsonl", ProbeRecord)
    assert 0 < len(partial) < 32
    with (folder / "results.jsonl").open("ab") as handle:
        handle.write(b'{"state": "S1-d0", "condit')  # a torn line, as after kill -9
    await _run(tmp_path, FunctionBackbone(oracle, model="oracle", context_window=8192)).execute()
    records = read_records(folder / "results.jsonl", ProbeRecord)
    assert len(records) == 32
    assert len({r.key for r in records}) == 32
    assert records[: len(partial)] == partial
