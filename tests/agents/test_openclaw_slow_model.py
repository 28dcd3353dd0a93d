"""``mirage run --agent openclaw`` on a slow answering model (markers ``openclaw``, ``slow``).

Issue 28: on a loaded machine a model call through mirage's endpoint took longer than OpenClaw
was willing to wait, and the whole run stopped. Here the answering model is a scripted function
that really sleeps: OpenClaw's compaction summary takes longer than OpenClaw's own default
compaction timeout (180 s), and the first probe's model call outlasts the turn timeout a user
set (``--openclaw-config``). Checked: the trunk still compacts (S2 exists), the slow probe is a
``provider_error`` (agent error) record, and every other probe ran and was scored. (A negative
control with ``compaction.timeoutSeconds: 180`` also compacted: OpenClaw 2026.9.6 sends the
summary of a compaction after a trunk turn to the session's model under the provider's and the
turn's timeouts, not the compaction one; this test guards the behaviour, the numbers are
``test_openclaw_timeouts.py``'s.)
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

ANSWER_MODEL = "function/slow-answer"
WINDOW = 16_384
OPENCLAW_COMPACTION_DEFAULT_S = 180
SUMMARY_S = OPENCLAW_COMPACTION_DEFAULT_S + 15
TURN_TIMEOUT_S = SUMMARY_S + 45
"""The user's ``agents.defaults.timeoutSeconds``: room for the slow summary, not the probe."""
SLOW_PROBE_S = TURN_TIMEOUT_S + 120


class SlowAnswers:
    """Summaries sleep ``SUMMARY_S``; the first probe call sleeps ``SLOW_PROBE_S``; a probe
    searches OpenClaw's memory, then answers."""

    def __init__(self) -> None:
        self.summary_seconds: list[float] = []
        self.probes = 0

    async def __call__(self, messages: Sequence[Message]) -> str:
        first, last = messages[0], messages[-1]
        if isinstance(first, SystemMessage) and "summarization assistant" in first.content:
            started = asyncio.get_running_loop().time()
            await asyncio.sleep(SUMMARY_S)
            self.summary_seconds.append(asyncio.get_running_loop().time() - started)
            return "The user planted several documents and then worked on filler tasks."
        if isinstance(last, ToolResultMessage):
            return "I could not find it in the documents. Source: NONE"
        text = last.plain_text if isinstance(last, UserMessage) else ""
        if "Pre-compaction memory flush" in text:
            return "Nothing to store."
        self.probes += 1
        if self.probes == 1:
            await asyncio.sleep(SLOW_PROBE_S)
        call = {"name": "memory_search", "arguments": {"query": "planted document"}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


def test_slow_summary_completes_and_a_timed_out_probe_is_an_agent_error(tmp_path: Path) -> None:
    if find_install(DEFAULT_OPENCLAW_VERSION) is None:
        pytest.fail("OpenClaw is not installed: run `mirage agents install openclaw` first")
    user_config = tmp_path / "mine.json5"
    user_config.write_text(f"{{agents: {{defaults: {{timeoutSeconds: {TURN_TIMEOUT_S}}}}}}}\n")
    config = RunConfig(
        agent="openclaw",
        models=[ANSWER_MODEL],
        window=WINDOW,
        limit=2,
        conditions=["C0"],
        openclaw_config=user_config,
        out=tmp_path / "run",
    )
    answers = SlowAnswers()
    backbone = FunctionBackbone(answers, model=ANSWER_MODEL, context_window=WINDOW)
    (folder,) = asyncio.run(MirageRun(config, backbones={ANSWER_MODEL: backbone}).execute())

    assert answers.summary_seconds and min(answers.summary_seconds) > 180
    (family,) = (tmp_path / "run" / "checkpoints").glob("*/family.json")
    s2 = json.loads((family.parent / "S2" / "manifest.json").read_text())
    assert s2["compaction_count"] >= 1

    records = read_records(folder, ProbeRecord)
    assert len(records) == 2 * 4  # one answerable/unanswerable pair, C0, four states
    failed = [r for r in records if r.provider_error is not None]
    assert len(failed) == 1, [r.provider_error for r in records]
    assert failed[0].provider_error and failed[0].provider_error.startswith("agent_error")
    assert failed[0].latency_s is not None and failed[0].latency_s < SLOW_PROBE_S
    assert all(r.path == "R_tool" for r in records if r.provider_error is None)
    assert (folder / "report.md").is_file()
