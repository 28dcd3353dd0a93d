"""``mirage serve-model`` as users start it: a real process, the embedded SmolLM2 (slow), the
argument errors, the loopback rule and a client that hangs up (fast: a litellm backbone that
is never called starts in seconds)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
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
from tests.fakes.openai_server import FakeOpenAIServer, hang, unused_port
from tests.serve.support import RECALL_TOOL


def test_unknown_local_model_is_a_clear_error() -> None:
    result = CliRunner().invoke(app, ["serve-model", "--model", "local/nope"])
    assert result.exit_code == 2
    assert "unknown local model 'local/nope'" in result.output


UNCALLED = ["--model", "openai/never-called", "--api-base", "http://127.0.0.1:9/v1"]
SERVE_MODEL = [sys.executable, "-m", "mirage", "serve-model"]


@contextlib.contextmanager
def serve_model_process(log_path: Path, *args: str) -> Iterator[str]:
    with serve_model_with_stderr(log_path, *args) as (base_url, _):
        yield base_url


@contextlib.contextmanager
def serve_model_with_stderr(log_path: Path, *args: str) -> Iterator[tuple[str, list[str]]]:
    """A real ``mirage serve-model`` process; yields its base URL and, once it has stopped,
    the lines it wrote on stderr."""
    port = unused_port()
    process = subprocess.Popen(
        [*SERVE_MODEL, "--port", str(port), "--log", str(log_path), *args],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    stderr: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"serve-model exited: {process.stderr.read()}")  # type: ignore[union-attr]
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/health").status_code == 200:
                    break
            time.sleep(0.5)
        yield f"{base}/v1", stderr
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=30)
        stderr += err.splitlines()


def test_a_non_loopback_bind_without_an_api_key_is_refused() -> None:
    argv = [*SERVE_MODEL, "--host", "0.0.0.0", "--port", str(unused_port()), *UNCALLED]
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 2
    lines = finished.stderr.strip().splitlines()
    assert len(lines) == 1, finished.stderr
    assert "refusing to serve on 0.0.0.0 without a bearer token: pass --api-key" in lines[0]


def test_a_non_loopback_bind_with_an_api_key_serves(tmp_path: Path) -> None:
    args = ("--host", "0.0.0.0", "--api-key", "s3cret", *UNCALLED)
    with serve_model_process(tmp_path / "requests.jsonl", *args) as base_url:
        refused = httpx.get(f"{base_url}/models", timeout=10)
        allowed = httpx.get(
            f"{base_url}/models", headers={"authorization": "Bearer s3cret"}, timeout=10
        )
    assert (refused.status_code, allowed.status_code) == (401, 200)


def test_a_page_of_another_origin_is_refused_by_a_keyless_server(tmp_path: Path) -> None:
    """The issue's request: a web page (foreign Origin, text/plain so the browser sends it without
    asking) reaching a keyless serve-model on loopback, directly or through DNS rebinding."""
    body = json.dumps(
        {"model": "openai/never-called", "messages": [{"role": "user", "content": "x"}]}
    )
    page = {"origin": "http://evil.example", "content-type": "text/plain"}
    with serve_model_process(tmp_path / "requests.jsonl", *UNCALLED) as base_url:
        url = f"{base_url}/chat/completions"
        rebound = httpx.post(url, content=body, headers={**page, "host": "evil.example"})
        direct = httpx.post(url, content=body, headers=page)
        as_json = httpx.post(
            url, content=body, headers={**page, "content-type": "application/json"}
        )
        plain = httpx.post(url, content=body, headers={"content-type": "text/plain"})
    assert [r.status_code for r in (rebound, direct, as_json, plain)] == [421, 403, 403, 415]
    assert read_request_log(tmp_path / "requests.jsonl") == []  # refused before the endpoint


def test_request_timeout_bounds_each_provider_call(tmp_path: Path) -> None:
    """A provider that never answers: with --request-timeout 0.5 the client hears a 504 after
    four attempts of half a second (and the backoff between them), not after four of 120 s."""
    body = {"model": "openai/slow", "messages": [{"role": "user", "content": "x"}]}
    with FakeOpenAIServer() as provider:
        provider.push(*(hang(30) for _ in range(4)))
        args = ("--model", "openai/slow", "--api-base", provider.api_base)
        with serve_model_process(
            tmp_path / "requests.jsonl", *args, "--request-timeout", "0.5"
        ) as url:
            started = time.monotonic()
            answer = httpx.post(f"{url}/chat/completions", json=body, timeout=120)
            elapsed = time.monotonic() - started
        attempts = len(provider.requests)
    assert (answer.status_code, answer.json()["error"]["code"]) == (504, "upstream_timeout")
    assert attempts == 4
    assert elapsed < 60


@pytest.mark.parametrize("key", [" ", "s3cret "])
def test_a_blank_or_padded_api_key_is_refused_at_startup(key: str) -> None:
    argv = [*SERVE_MODEL, "--host", "0.0.0.0", "--port", "0", "--api-key", key, *UNCALLED]
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 2
    assert finished.stderr.strip().splitlines() == [
        "error: --api-key is blank or starts or ends with whitespace: give the key clients "
        "send as 'Authorization: Bearer <key>'"
    ]


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_a_client_hanging_up_mid_request_is_one_log_line(tmp_path: Path, reset: bool) -> None:
    """Closed, or reset (RST: a killed client, issue 37): one line, no traceback."""
    log_path = tmp_path / "requests.jsonl"
    with serve_model_with_stderr(log_path, *UNCALLED) as (base_url, stderr):
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            head = (
                "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            )
            client.sendall(head.encode() + b'{"model": "x", ')
            time.sleep(0.5)
            if reset:
                linger = struct.pack("ii", 1, 0)
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not read_request_log(log_path):
            time.sleep(0.2)
    [record] = read_request_log(log_path)
    assert (record.status, record.error) == (499, "client_disconnected")
    mentions = [line for line in stderr if "disconnect" in line.lower()]
    assert len(mentions) == 1 and "serve.client_disconnected" in mentions[0], stderr
    assert not any("Traceback" in line for line in stderr), stderr


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
