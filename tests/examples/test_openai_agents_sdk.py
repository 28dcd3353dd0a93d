"""The OpenAI Agents SDK worked example end to end (examples/own_agent/openai_agents_sdk/): its
``run.py`` starts the real ``mirage serve-model`` (embedded SmolLM2) and runs the real ``mirage
run --agent cmd:agent.py …`` with a scripted trunk, once with the SDK's
``tool_choice="required"`` and once without; what MIRAGE recorded from the memory server's log
must agree with the agent's own reports (issue 28). A second model, served by the same endpoint
code over a reply function that does what the probe asks, makes the agent really call the
memory server on some probes, so the agreement is checked on both paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord
from runtime.backbones import FunctionBackbone
from runtime.messages import Message, TextPart, ToolResultMessage, ToolSpec, UserMessage
from runtime.serve import BackgroundServer, create_app

pytest.importorskip(
    "agents", reason="pip install -r examples/own_agent/openai_agents_sdk/requirements.txt"
)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "own_agent" / "openai_agents_sdk" / "run.py"
PROBES = 2 * 4 * 2  # --limit 2 questions x 4 states x C0/Cm


def run_example(out: Path, *options: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(EXAMPLE), "--limit", "2", "--out", str(out), *options]
    subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=3600)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example as documented: SmolLM2 on serve-model, both variants, one trunk."""
    folder = tmp_path_factory.mktemp("sdk-example")
    run_example(folder)
    return folder


def does_what_the_probe_asks(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    """Calls artifact_recall when the probe demands it (Cm) and no result came back yet;
    otherwise answers in the protocol."""
    last = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    probe = messages[last]
    assert isinstance(probe, UserMessage)
    asked = " ".join(p.text for p in probe.content if isinstance(p, TextPart))
    recalled = any(isinstance(m, ToolResultMessage) for m in messages[last + 1 :])
    if tools and "MUST call" in asked and not recalled:
        call = {"name": "artifact_recall", "arguments": {"query": asked.split("\n", 1)[0][:200]}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"
    return "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"


@pytest.fixture(scope="module")
def scripted(out: Path) -> Path:
    """The agent (tool_choice auto) on a served reply function, in the same folder (same trunk)."""
    backbone = FunctionBackbone(does_what_the_probe_asks, model="scripted-hermes")
    with BackgroundServer(create_app(backbone, name="served")) as server:
        run_example(out, "--model-url", server.base_url, "--variant", "auto", "--name", "scripted")
    return out


def attribution(out: Path, folder: str) -> dict[str, Any]:
    return dict(json.loads((out / folder / "attribution.json").read_text()))


def assert_reports_agree(out: Path, folder: str) -> list[Any]:
    counts = attribution(out, folder)
    assert (counts["probes"], counts["agent_errors"]) == (PROBES, 0)
    assert counts["agent_reported"] == PROBES  # every reply carried the SDK run's tool calls
    assert (counts["disagreements"], counts["disagreeing_tags"]) == (0, [])
    records = read_records(out / folder / "results.jsonl", ProbeRecord)
    for record in records:
        reported = [c.get("name") for c in record.trace["agent_tool_calls"]]  # type: ignore[attr-defined]
        assert (record.path == "R_tool") == ("artifact_recall" in reported), record.tag  # type: ignore[attr-defined]
    return records


@pytest.mark.parametrize("variant", ["required", "auto"])
def test_smollm2_agent_reports_agree_with_the_memory_server_log(out: Path, variant: str) -> None:
    assert_reports_agree(out, f"sdk-{variant}")
    assert f"| {variant} | {PROBES} |" in (out / "comparison-sdk.md").read_text()


def test_forcing_the_tool_call_makes_every_probe_r_tool(out: Path) -> None:
    counts = attribution(out, "sdk-required")
    assert counts["r_tool"] == counts["probes"] == PROBES
    assert counts["window_calls"] == 0  # every call came in on its probe's own URL


def test_calls_the_agent_makes_are_the_ones_the_server_saw(scripted: Path) -> None:
    records = assert_reports_agree(scripted, "scripted-auto")
    assert {(r.condition, r.path == "R_tool") for r in records} == {("C0", False), ("Cm", True)}
    counts = attribution(scripted, "scripted-auto")
    assert (counts["r_tool"], counts["window_calls"]) == (PROBES // 2, 0)
