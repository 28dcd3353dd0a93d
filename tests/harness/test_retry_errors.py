"""Failed probes end to end: a real OpenAI-compatible agent endpoint (HTTP, in a thread) that
answers 500 for some probes, then recovers. The failed probes are counted and named in
``summary.json``, ``report.md``, ``report.html`` and on the console, ``mirage run`` exits 1
while they remain, a plain resume sends nothing, and ``mirage run --retry-errors`` sends
requests for exactly the failed probes and swaps their records in."""

from __future__ import annotations

import asyncio
import json
import zlib
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from typer.testing import CliRunner

from harness.kit.results import RESULTS_FILE, read_records
from harness.mirage.config import RunConfig
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.probing.retry import RETRY_FILE
from harness.mirage.run import MirageRun
from mirage.cli import app
from runtime.backbones.scripted import FunctionBackbone
from tests.harness.agents_support import PROTOCOL_REPLY, AgentServer, chat_app, completion
from tests.harness.test_run_e2e import summary

pytestmark = pytest.mark.slow

PROBES = 2 * 4 * 2  # questions x states x conditions


def fails(tag: str) -> bool:
    return zlib.crc32(tag.encode()) % 3 == 0


class FlakyAgent:
    """Answers every probe, except that while ``down`` the probes ``fails`` picks get 500."""

    def __init__(self) -> None:
        self.down = True
        self.requests: list[str] = []

    async def handle(self, request: Request) -> Response:
        await request.body()
        tag = request.headers["x-mirage-tag"]
        self.requests.append(tag)
        if self.down and fails(tag):
            return PlainTextResponse("internal error", status_code=500)
        return completion(PROTOCOL_REPLY)


def _flags(url: str, out: Path) -> list[str]:
    return [
        "run",
        "--trunk-model",
        "scripted",
        "--summarizer",
        "summarizer",
        "--limit",
        "2",
        "--agent",
        f"openai:{url}",
        "--agent-model",
        "flaky",
        "--concurrency",
        "2",
        "--out",
        str(out),
    ]


async def _first_run(url: str, out: Path) -> Path:
    """The first run through the API (its summarizer is a scripted backbone), which builds
    the trunk the command line then reuses."""
    config = RunConfig(
        trunk_model="scripted",
        summarizer_model="summarizer",
        limit=2,
        out=out,
        agent=f"openai:{url}",
        agent_model="flaky",
        concurrency=2,
    )
    backbones = {"summarizer": FunctionBackbone(summary, model="summarizer")}
    [folder] = await MirageRun(config, backbones=backbones).execute()
    return folder


def test_failed_probes_are_named_and_retried_exactly(tmp_path: Path) -> None:
    agent = FlakyAgent()
    out = tmp_path / "run"
    with AgentServer(chat_app(agent.handle)) as server:
        folder = asyncio.run(_first_run(server.base_url, out))
        records = read_records(folder, ProbeRecord)
        failed = {r.tag for r in records if r.provider_error}  # type: ignore[attr-defined]
        assert len(records) == PROBES and failed == {t for t in set(agent.requests) if fails(t)}
        assert 0 < len(failed) < PROBES

        summary_json = json.loads((folder / "summary.json").read_text())
        named = summary_json["failed_probes"]
        assert named["total"] == len(failed)
        assert sum(n for cell in named["cells"].values() for n in cell.values()) == len(failed)
        tags = {
            f"{p['state']}.{p['condition']}.{p['question_id']}.r{p['repeat']}"
            for p in named["probes"]
        }
        assert tags == failed and all("http" in p["error"] for p in named["probes"])
        report = (folder / "report.md").read_text()
        assert "## Failed probes (provider and agent errors)" in report
        html = (folder / "report.html").read_text()
        assert "Failed probes (provider and agent errors)" in html

        before, sent = (folder / RESULTS_FILE).read_bytes(), len(agent.requests)
        runner = CliRunner()
        resumed = runner.invoke(app, _flags(server.base_url, out))
        assert resumed.exit_code == 1, resumed.output
        assert f"{len(failed)} failed probe(s) in {folder}" in resumed.stderr
        assert "--retry-errors" in resumed.stderr
        assert len(agent.requests) == sent  # a plain resume sends nothing
        assert (folder / RESULTS_FILE).read_bytes() == before

        agent.down = False  # the provider recovered
        retried = runner.invoke(app, [*_flags(server.base_url, out), "--retry-errors"])
        assert retried.exit_code == 0, retried.output
        assert sorted(agent.requests[sent:]) == sorted(failed)  # exactly the failed ones, once
        assert "failed probes (provider/agent errors): 0" in retried.stdout

    after = read_records(folder, ProbeRecord)
    assert [r.key for r in after] == [r.key for r in records]
    assert not any(r.provider_error for r in after) and not (folder / RETRY_FILE).exists()
    untouched = [line for line in before.splitlines() if b'"provider_error":null' in line]
    assert set(untouched) <= set((folder / RESULTS_FILE).read_bytes().splitlines())
    assert json.loads((folder / "summary.json").read_text())["failed_probes"]["total"] == 0

    nothing = CliRunner().invoke(
        app, [*_flags("http://127.0.0.1:9/v1", tmp_path / "new"), "--retry-errors"]
    )
    assert nothing.exit_code == 2 and "no results to retry" in nothing.stderr
