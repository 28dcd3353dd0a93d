"""``mirage serve-model`` as users start it: a real process, the embedded SmolLM2 (slow), and
the argument errors (fast)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI
from typer.testing import CliRunner

from mirage.cli import app
from runtime.serve import read_request_log
from tests.fakes.openai_server import unused_port
from tests.serve.support import RECALL_TOOL


def test_unknown_local_model_is_a_clear_error() -> None:
    result = CliRunner().invoke(app, ["serve-model", "--model", "local/nope"])
    assert result.exit_code == 2
    assert "unknown local model 'local/nope'" in result.output


@contextlib.contextmanager
def serve_model_process(log_path: Path) -> Iterator[str]:
    port = unused_port()
    argv = [sys.executable, "-m", "mirage", "serve-model", "--port", str(port)]
    process = subprocess.Popen(
        [*argv, "--log", str(log_path)],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"serve-model exited: {process.stderr.read()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/health").status_code == 200:
                    break
            time.sleep(0.5)
        yield f"{base}/v1"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


@pytest.mark.slow
def test_embedded_model_answers_with_a_tool_call_and_a_stream(tmp_path: Path) -> None:
    log_path = tmp_path / "requests.jsonl"
    with serve_model_process(log_path) as base_url:
        client = OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600)
        question = "What was the median rent in Berlin in the chart I sent?"
        response = client.chat.completions.create(
            model="local/smollm2-135m",
            messages=[{"role": "user", "content": question}],
            tools=[RECALL_TOOL],
            max_tokens=64,
        )
        stream = client.chat.completions.create(
            model="local/smollm2-135m",
            messages=[{"role": "user", "content": "Say hello."}],
            stream=True,
            stream_options={"include_usage": True},
            max_tokens=8,
        )
        chunks = list(stream)

    [call] = response.choices[0].message.tool_calls or []
    assert call.function.name == "artifact_recall"
    assert "query" in json.loads(call.function.arguments)
    assert response.usage is not None and response.usage.prompt_tokens > 100
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens <= 8

    first, second = read_request_log(log_path)
    assert (first.parse_outcome, first.backbone, first.status) == ("ok", "local/smollm2-135m", 200)
    assert first.eit == response.usage.prompt_tokens
    assert second.stream and second.parse_outcome == "no_call"
    assert question not in log_path.read_text()
