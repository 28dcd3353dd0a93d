"""``mirage run --agent openclaw`` end to end on the real OpenClaw (markers ``openclaw``, ``slow``).

The installed OpenClaw (``mirage agents install openclaw``) runs the bundled pack's trunk
through its gateway against mirage's model endpoint; the answering model is a scripted function
(the embedded model would take far longer): compaction summaries, memory flushes and probes go
to it, and every probe first searches OpenClaw's memory. Checked: every state captured (S2 after
OpenClaw's own compaction), every probe scored, one restored-history hash per state (a fresh
fork per probe), OpenClaw's memory_search counted as R_tool, and a re-run resumes without
repeating a probe.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.kit.agents.openclaw.install import DEFAULT_OPENCLAW_VERSION, find_install
from harness.kit.results import read_records
from harness.mirage.config import RunConfig
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.run import MirageRun
from runtime.backbones import FunctionBackbone
from runtime.messages import Message, SystemMessage, ToolResultMessage, UserMessage

pytestmark = [pytest.mark.openclaw, pytest.mark.slow]

ANSWER_MODEL = "function/answer"
WINDOW = 16_384


def answer(messages: Sequence[Message]) -> str:
    """Summaries and flushes get a fixed text; a probe searches OpenClaw's memory first."""
    first, last = messages[0], messages[-1]
    if isinstance(first, SystemMessage) and "summarization assistant" in first.content:
        return "The user planted several documents and then worked on filler tasks."
    if isinstance(last, ToolResultMessage):
        return "I could not find it in the documents. Source: NONE"
    text = last.plain_text if isinstance(last, UserMessage) else ""
    if "Pre-compaction memory flush" in text:
        return "Nothing to store."
    call = {"name": "memory_search", "arguments": {"query": "planted document"}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


def run_once(out: Path) -> tuple[list[Path], FunctionBackbone]:
    config = RunConfig(
        agent="openclaw",
        models=[ANSWER_MODEL],
        window=WINDOW,
        limit=2,
        conditions=["C0"],
        out=out,
    )
    backbone = FunctionBackbone(answer, model=ANSWER_MODEL, context_window=WINDOW)
    folders = asyncio.run(MirageRun(config, backbones={ANSWER_MODEL: backbone}).execute())
    return folders, backbone


def housekeeping_calls(backbone: FunctionBackbone) -> set[str]:
    """Which of OpenClaw's maintenance calls reached the answering model."""
    kinds = set()
    for call in backbone.calls:
        first, last = call.messages[0], call.messages[-1]
        if isinstance(first, SystemMessage) and "summarization assistant" in first.content:
            kinds.add("summary")
        if isinstance(last, UserMessage) and "Pre-compaction memory flush" in last.plain_text:
            kinds.add("flush")
    return kinds


def test_openclaw_run_end_to_end_and_resume(tmp_path: Path) -> None:
    if find_install(DEFAULT_OPENCLAW_VERSION) is None:
        pytest.fail("OpenClaw is not installed: run `mirage agents install openclaw` first")
    out = tmp_path / "run"
    (folder,), model = run_once(out)
    records = read_records(folder, ProbeRecord)
    assert len(records) == 2 * 4  # one answerable/unanswerable pair, C0, four states
    assert {r.state for r in records} == {"S1-d0", "S1-d50k", "S1-d80k", "S2"}
    assert all(r.provider_error is None for r in records), [r.provider_error for r in records]
    for state in {r.state for r in records}:
        hashes = {getattr(r, "restored_sha256", None) for r in records if r.state == state}
        assert len(hashes) == 1 and None not in hashes, (state, hashes)
    assert all(r.path == "R_tool" for r in records), [
        (r.state, r.path, r.path_evidence and r.path_evidence.reason) for r in records
    ]
    (family,) = (out / "checkpoints").glob("*/family.json")
    s2 = json.loads((family.parent / "S2" / "manifest.json").read_text())
    assert s2["compaction_count"] >= 1
    assert (folder / "report.md").is_file()
    assert housekeeping_calls(model) == {"summary", "flush"}  # never the scripted trunk

    (again,), _ = run_once(out)
    assert again == folder
    assert len(read_records(folder, ProbeRecord)) == len(records)
