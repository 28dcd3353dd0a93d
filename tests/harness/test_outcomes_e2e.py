"""Outcomes told apart, end to end (issue 44, item 3): ``mirage run`` as a real process against a
real OpenAI-compatible endpoint on loopback (stdlib ``http.server``), the answerer a hermes
text-mode model (``openai/fake``) behind the memory server's tools.

First run: every C0 probe gets an HTTP 200 with ``finish_reason: content_filter`` and no
content — recorded as a provider refusal (not a PF), named in ``failed_probes``, exit 1. Every
Cm probe first gets a ``<tool_call>`` whose body does not decode; the runtime answers it with a
tool error, and the endpoint, seeing that error, answers the protocol — a scored probe whose
record says the error was returned. Then ``--retry-errors`` against the endpoint, now answering,
re-runs exactly the refused probes, replaces their records and exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.kit.results import RESULTS_FILE, read_records
from harness.mirage.probing.records import ProbeRecord
from tests.fakes.openai_server import JsonHandler

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
BAD_CALL = '<tool_call>{"name": "artifact_recall", "arguments": {"query": }}</tool_call>'
PARSE_ERROR = "An error occurred while parsing tool arguments. Please try again with valid JSON."
PROBES = 2 * 4  # questions x states, per condition


class _Handler(JsonHandler):
    """``POST /v1/chat/completions``: refuse C0 probes while ``refusing``; answer a Cm probe's
    first round with a call that does not decode, and its next round with the protocol."""

    server: _Endpoint

    def do_POST(self) -> None:
        body = self.read_json()
        self.server.bodies.append(body)
        last = body["messages"][-1]
        question = next(m for m in reversed(body["messages"]) if m["role"] == "user")
        cm = "CitationForce" in question["content"]
        content: str | None = ANSWER
        finish = "stop"
        if not cm and self.server.refusing:
            content, finish = None, "content_filter"
        elif cm and last["role"] == "user":
            content = BAD_CALL
        self._reply(body, content, finish)

    def _reply(self, body: dict[str, Any], content: str | None, finish: str) -> None:
        message = {"role": "assistant", "content": content}
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        choice = {"index": 0, "message": message, "finish_reason": finish}
        self.send_json(
            {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
             "choices": [choice], "usage": usage}
        )  # fmt: skip


class _Endpoint(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []
        self.refusing = True


@pytest.fixture
def endpoint() -> Iterator[_Endpoint]:
    server = _Endpoint()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _mirage_run(endpoint: _Endpoint, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    api_base = f"http://127.0.0.1:{endpoint.server_address[1]}/v1"
    return subprocess.run(
        [sys.executable, "-m", "mirage", "run", "--trunk-model", "scripted", "--summarizer",
         "reference/keep-charts", "--no-references", "--limit", "2", "--model", "openai/fake",
         "--api-base", api_base, "--out", str(out), *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def test_refusals_are_failed_probes_and_bad_calls_get_a_tool_error(
    endpoint: _Endpoint, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    first = _mirage_run(endpoint, out)
    assert first.returncode == 1, first.stderr
    folder = out / "openai_fake"
    assert f"{PROBES} failed probe(s) in {folder}" in first.stderr
    assert f"failed probes (provider/agent errors): {PROBES}" in first.stdout
    records = read_records(folder / RESULTS_FILE, ProbeRecord)
    refused = [r for r in records if r.condition == "C0"]
    answered = [r for r in records if r.condition == "Cm"]
    assert len(refused) == len(answered) == PROBES
    for record in refused:  # a provider outcome, with its reason: not a PF
        assert (record.provider_error or "").startswith(
            "provider_error: provider_refusal: finish_reason content_filter (no content"
        )
        assert (record.finish_reason, record.pf, record.raw_output) == (
            "content_filter",
            False,
            None,
        )
    failed = json.loads((folder / "summary.json").read_text())["failed_probes"]
    assert failed["total"] == PROBES and all(
        "provider_refusal" in p["error"] for p in failed["probes"]
    )
    assert "## Failed probes (provider and agent errors)" in (folder / "report.md").read_text()
    for record in answered:  # the bad call was answered; the final reply is scored
        assert (record.provider_error, record.pf, record.finish_reason) == (None, False, "stop")
        [call] = record.tool_calls
        assert (call.name, call.label, call.executed, call.error_returned) == (
            None, "marker_bad_body", False, True,
        )  # fmt: skip
        assert (call.result_text or "").startswith(PARSE_ERROR)
        assert record.trace is not None and record.trace["parse_outcomes"] == [
            "marker_bad_body", "no_call",
        ]  # fmt: skip
        assert record.path != "R_tool"
    second_rounds = [b["messages"] for b in endpoint.bodies if b["messages"][-1]["role"] == "tool"]
    assert len(second_rounds) == PROBES
    for messages in second_rounds:  # the model saw its own call, then the error under its id
        assert messages[-2] == {"role": "assistant", "content": BAD_CALL}
        assert messages[-1]["content"].startswith(PARSE_ERROR) and messages[-1]["tool_call_id"]

    endpoint.refusing, sent = False, len(endpoint.bodies)
    before = (folder / RESULTS_FILE).read_bytes().splitlines()
    retried = _mirage_run(endpoint, out, "--retry-errors")
    assert retried.returncode == 0, retried.stderr
    assert "failed probes (provider/agent errors): 0" in retried.stdout
    again = endpoint.bodies[sent:]
    assert len(again) == PROBES  # exactly the refused probes, each once
    assert not any("CitationForce" in json.dumps(b["messages"][-1]) for b in again)
    after = read_records(folder / RESULTS_FILE, ProbeRecord)
    assert [r.key for r in after] == [r.key for r in records]
    assert all(r.provider_error is None and r.finish_reason == "stop" for r in after)
    kept = [line for line in before if b'"condition":"Cm"' in line]
    assert set(kept) <= set((folder / RESULTS_FILE).read_bytes().splitlines())
    assert json.loads((folder / "summary.json").read_text())["failed_probes"]["total"] == 0
