"""Shards of one study against a real HTTP summarizer (issue 37): ``mirage run --shard 1/2`` and
``--shard 2/2`` as docs/running.md says, each a real process whose trunk compacts through an
OpenAI-compatible endpoint on loopback (litellm over HTTP) that answers identically but not
equally fast, so the S2 snapshots differ in the ledger's ``latency_s`` of the summary call —
which stays in the snapshot as data and is left out of the checkpoint's name — and merge into the
unsharded run's summary. The same endpoint answers the probes."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from runtime.snapshot import load_snapshot
from tests.fakes.openai_server import JsonHandler

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = "## Goal\nHelp the user.\n## Critical context\nArtifacts were shared earlier."
ANSWER = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"


class _Handler(JsonHandler):
    """``POST /v1/chat/completions``: the summary for a compaction request, a fixed protocol
    answer for a probe; after a random pause, as a real server takes varying time."""

    server: _Endpoint

    def do_POST(self) -> None:
        body = self.read_json()
        text = json.dumps(body["messages"])
        reply = ANSWER if "ANSWERABLE=" in text else SUMMARY
        self.server.calls.append("probe" if reply == ANSWER else "summary")
        time.sleep(random.uniform(0.02, 0.12))
        self.send_json(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "x"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": len(text) // 4,
                    "completion_tokens": len(reply) // 4,
                    "total_tokens": (len(text) + len(reply)) // 4,
                },
            }
        )


class _Endpoint(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.calls: list[str] = []


@pytest.fixture(scope="module")
def endpoint() -> Iterator[_Endpoint]:
    server = _Endpoint()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _mirage(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "mirage", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def _run(endpoint: _Endpoint, out: Path, *shard: str) -> None:
    api_base = f"http://127.0.0.1:{endpoint.server_address[1]}/v1"
    done = _mirage(
        "run", "--trunk-model", "scripted", "--summarizer", "openai/x", "--model", "openai/x",
        "--api-base", api_base, "--limit", "4", "--out", str(out), *shard,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _numbers(folder: Path) -> dict[str, object]:
    summary = json.loads((folder / "summary.json").read_text())
    summary["provenance"].pop("recorded_at")  # when each run started; all else must agree
    return summary


def _s2(out: Path) -> Path:
    (snapshot,) = out.glob("checkpoints/*/S2@*/*.session")
    return snapshot


def test_shards_with_an_http_summarizer_merge_into_the_unsharded_summary(
    endpoint: _Endpoint, tmp_path: Path
) -> None:
    whole, first, second = tmp_path / "whole", tmp_path / "shard-1", tmp_path / "shard-2"
    _run(endpoint, whole)
    _run(endpoint, first, "--shard", "1/2")
    _run(endpoint, second, "--shard", "2/2")
    assert endpoint.calls.count("summary") == 3  # one compaction per trunk, over HTTP

    # the trunks are one conversation, their summary calls took different times: same names
    snapshots = [_s2(out) for out in (whole, first, second)]
    assert len({s.name for s in snapshots}) == 1
    latencies = [load_snapshot(s).ledger.calls for s in snapshots]
    summary_latency = [
        next(c.latency_s for c in calls if c.purpose == "summary") for calls in latencies
    ]
    assert len(set(summary_latency)) == 3 and min(summary_latency) > 0  # kept as data
    assert len({s.read_bytes() for s in snapshots}) == 3

    merged = tmp_path / "merged"
    done = _mirage("merge", str(first), str(second), "--out", str(merged))
    assert done.returncode == 0, done.stderr
    (folder,) = [p.parent for p in merged.glob("*/results.jsonl")]
    assert _numbers(folder) == _numbers(whole / folder.name)
