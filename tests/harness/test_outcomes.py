"""Outcomes told apart (issue 44, item 3): a provider's refusal is a failed probe with its reason,
retried by ``--retry-errors``, never a PF; every record keeps the provider's ``finish_reason``;
a call answered with a tool error is no retrieval. Probes through the built-in agent and litellm
at a real OpenAI-compatible server on loopback (tests/fakes/openai_server.py); the whole
``mirage run`` with its exit codes is in test_outcomes_e2e.py (slow)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.kit.agents import BuiltinAgent
from harness.kit.agents.base import ToolCallRecord
from harness.kit.agents.context import ContextMessage, ProbeContext
from harness.kit.results import RESULTS_FILE, read_records
from harness.mirage.probing.loop import ProbeTask, plan_probes, run_probes
from harness.mirage.probing.records import ProbeRecord, path_fields
from harness.mirage.probing.retry import failure_summary, probe_target
from harness.mirage.scoring import Gold, KnownIdResolver, get_profile
from harness.mirage.trunk.checkpoints import Checkpoint
from runtime.backbones import LiteLLMBackbone
from tests.fakes.openai_server import FakeOpenAIServer, content_filtered, refused, reply
from tests.harness.agents_support import make_checkpoint

ANSWER = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
GOLD = Gold(answerable="NO", artifact="chart_x", keywords=("Ferncliff", "composting"))


def probes(checkpoint: Checkpoint) -> list[ProbeTask]:
    questions = [(f"q{n}", f"Which town composted most in {2020 + n}?", GOLD) for n in range(2)]
    return list(plan_probes({checkpoint.manifest.state: checkpoint}, questions, ["C0", "Cm"], 1))


async def probe_folder(
    server: FakeOpenAIServer, folder: Path, tasks: list[ProbeTask], retry_errors: bool
) -> None:
    """One pass over ``tasks`` as ``mirage run`` makes it (``--retry-errors``: the failed ones)."""
    backbone = LiteLLMBackbone("openai/fake-model", api_base=server.api_base, api_key="k")
    agent = BuiltinAgent(backbone, memory_url=None, max_output_tokens=64)
    with probe_target(folder, retry_errors, {task.key for task in tasks}) as target:
        wanted = [task for task in tasks if target.wanted(task.key)]
        await run_probes(agent, wanted, target.log, KnownIdResolver([]), get_profile())


async def test_a_refusal_is_a_failed_probe_that_retry_errors_replaces(tmp_path: Path) -> None:
    tasks = probes(make_checkpoint(tmp_path / "family"))
    folder = tmp_path / "answerer"
    folder.mkdir()
    with FakeOpenAIServer() as server:
        server.push(content_filtered(), reply(ANSWER), refused("I can't help."), reply(ANSWER))
        await probe_folder(server, folder, tasks, retry_errors=False)
        first = read_records(folder / RESULTS_FILE, ProbeRecord)
        failed = failure_summary(first)
        server.push(reply(ANSWER), content_filtered())  # the second is refused again
        await probe_folder(server, folder, tasks, retry_errors=True)
        retried = [r.body["messages"][-1]["content"] for r in server.requests[4:]]
    assert server.pending == 0 and len(retried) == 2  # exactly the failed probes, once each
    profile = get_profile()
    assert retried == [profile.prompt(t.question, t.condition) for t in (tasks[0], tasks[2])]

    filtered, answered, refusal, _ = first
    assert filtered.provider_error is not None and refusal.provider_error is not None
    assert filtered.provider_error.startswith("provider_error: provider_refusal: finish_reason")
    assert 'refusal with no content: "I can\'t help."' in refusal.provider_error
    assert (filtered.finish_reason, refusal.finish_reason) == ("content_filter", "stop")
    assert not filtered.pf and filtered.pf_reason is None and filtered.AC is None
    assert (answered.provider_error, answered.finish_reason, answered.pf) == (None, "stop", False)
    assert failed.total == 2 and all("provider_refusal" in p.error for p in failed.probes)
    assert failed.cells == {"S2": {"C0": 1, "Cm": 1}}

    after = read_records(folder / RESULTS_FILE, ProbeRecord)
    assert [r.key for r in after] == [r.key for r in first]
    assert (after[1], after[3]) == (first[1], first[3])  # the answered probes kept as they were
    assert (after[0].provider_error, after[0].finish_reason, after[0].pf) == (None, "stop", False)
    assert after[0].AC == 1  # scored now that the provider answered
    assert after[2].finish_reason == "content_filter" and after[2].provider_error is not None
    assert failure_summary(after).total == 1  # refused again: still a failed probe


def test_a_call_answered_with_an_error_is_no_retrieval() -> None:
    """R_tool needs a retrieval call that ran: an ``artifact_recall`` the runtime answered with a
    tool error (even one naming the artifact) gives no access path."""
    context = ProbeContext(
        source="restored_session", messages=(ContextMessage(role="user", text="hello"),)
    )
    answered = ToolCallRecord(
        name="artifact_recall",
        arguments={"artifact_id": "chart_x"},
        label="type_error",
        error="k: 'many' is not of type 'integer'",
        result_text="An error occurred while running the tool. ... chart_x ...",
        error_returned=True,
    )
    fields = path_fields(GOLD, [answered], context)
    assert fields["path"] == "R_none"
    [verdict] = fields["path_evidence"].calls
    assert (verdict.retrieval, verdict.result_names_id) == (False, False)
    assert verdict.reason == "not executed (type_error; answered with a tool error): no access"
    ran = answered.model_copy(update={"executed": True, "error_returned": False, "label": "ok"})
    assert path_fields(GOLD, [ran], context)["path"] == "R_tool"


def test_records_written_before_finish_reason_still_read(tmp_path: Path) -> None:
    record = ProbeRecord(
        state="S2",
        condition="C0",
        question_id="q0",
        repeat=0,
        gold_answerable="NO",
        finish_reason="length",
        tool_calls=[ToolCallRecord(name="artifact_recall", error_returned=True)],
    )
    line = json.loads(record.model_dump_json())
    assert ProbeRecord.from_line(json.dumps(line)) == record
    del line["finish_reason"], line["tool_calls"][0]["error_returned"]
    old = ProbeRecord.from_line(json.dumps(line))
    assert old.finish_reason is None and old.tool_calls[0].error_returned is False
