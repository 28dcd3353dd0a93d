"""The real OpenClaw (marker ``openclaw``; needs the npm registry once, then the cache).

Run with ``python -m pytest -m openclaw tests/agents``; set ``MIRAGE_CACHE_DIR`` to a folder
CI keeps between runs so the ~650 MB install happens once. The gateway test runs OpenClaw
headless on loopback against mirage's model endpoint (scripted backbones, served in this
process) and mirage's memory server (a real subprocess): a turn whose MCP tool call reaches the
memory server, a session fork (the per-probe restore the harness will use) and a per-request
model override routed by model name.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.kit.agents.openclaw.install import (
    DEFAULT_OPENCLAW_VERSION,
    OpenClawInstall,
    install_openclaw,
    list_installs,
)
from runtime.backbones import FunctionBackbone
from runtime.messages import Message, ToolResultMessage, UserMessage
from runtime.serve import BackgroundServer, ModelTable, RequestLog, create_app, read_request_log
from tests.fakes.openai_server import unused_port

pytestmark = pytest.mark.openclaw

TOKEN = "mirage-test-token"
CALL = re.compile(r"CALL (\S+) (\{.*\})", re.S)
OFFLINE_ENV = {
    "OPENCLAW_DISABLE_BONJOUR": "1",
    "OPENCLAW_SKIP_CHANNELS": "1",
    "OPENCLAW_NO_RESPAWN": "1",
    "OPENCLAW_NO_AUTO_UPDATE": "1",
}


@pytest.fixture(scope="module")
def install() -> OpenClawInstall:
    return install_openclaw().install


def test_the_pinned_install_runs_on_its_own_node(install: OpenClawInstall) -> None:
    assert install.version == DEFAULT_OPENCLAW_VERSION
    assert install in list_installs()
    run = subprocess.run(
        install.command("--version"), env=install.env(), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"OpenClaw {DEFAULT_OPENCLAW_VERSION}")


def scripted(messages: list[Message]) -> str:
    """``CALL <tool> <json>`` in a user turn makes the model call that tool; a tool result is
    echoed; anything else is acknowledged."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return "Tool said: " + " ".join(last.content.split())[:300]
    text = last.plain_text if isinstance(last, UserMessage) else ""
    found = CALL.search(text)
    if found:
        body = json.dumps({"name": found.group(1), "arguments": json.loads(found.group(2))})
        return f"<tool_call>\n{body}\n</tool_call>"
    return "Noted."


def gateway_config(root: Path, model_port: int, memory_port: int, gateway_port: int) -> str:
    model = {
        "input": ["text"],
        "contextWindow": 32768,
        "maxTokens": 256,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    }
    config: dict[str, Any] = {
        "gateway": {
            "mode": "local",
            "bind": "loopback",
            "port": gateway_port,
            "auth": {"mode": "token", "token": TOKEN},
            "http": {"endpoints": {"chatCompletions": {"enabled": True}}},
        },
        "update": {"checkOnStart": False},
        "discovery": {"mdns": {"mode": "off"}},
        "logging": {"file": str(root / "gateway.log")},
        "plugins": {
            "allow": ["memory-core"],
            "entries": {"memory-core": {"config": {"dreaming": {"enabled": False}}}},
        },
        "tools": {
            "toolSearch": False,
            "profile": "minimal",
            "alsoAllow": ["bundle-mcp", "memory_search", "memory_get", "read", "write", "edit"],
        },
        "memory": {
            "search": {
                "provider": "none",
                "sources": ["memory"],
                "rememberAcrossConversations": False,
            }
        },
        "agents": {
            "defaults": {
                "workspace": str(root / "agent-workspace"),
                "skipBootstrap": True,
                "skills": [],
                "heartbeat": {"every": "0m"},
                "model": {"primary": "mirage/trunk"},
                "compaction": {
                    "mode": "default",
                    "model": "mirage/answer",
                    "memoryFlush": {"enabled": True, "model": "mirage/answer"},
                },
            }
        },
        "models": {
            "mode": "replace",
            "catalogRefresh": {"enabled": False},
            "providers": {
                "mirage": {
                    "baseUrl": f"http://127.0.0.1:{model_port}/v1",
                    "apiKey": "unused",
                    "api": "openai-completions",
                    "timeoutSeconds": 1800,
                    "models": [
                        {"id": "trunk", "name": "trunk", **model},
                        {"id": "answer", "name": "answer", **model},
                    ],
                }
            },
        },
        "mcp": {
            "servers": {
                "mirage": {
                    "url": f"http://127.0.0.1:{memory_port}/mcp",
                    "transport": "streamable-http",
                }
            }
        },
    }
    return json.dumps(config, indent=2)


def wait_until(check: Any, what: str, timeout: float, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if check():
                return
        time.sleep(0.5)
    raise AssertionError(f"{what} was not ready within {timeout:.0f} s")


@contextlib.contextmanager
def running(argv: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as output:
        process = subprocess.Popen(
            argv, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield process
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def chat(port: int, session: str, text: str, model: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}", "x-openclaw-session-key": session}
    if model is not None:
        headers["x-openclaw-model"] = model
    body = {"model": "openclaw/default", "messages": [{"role": "user", "content": text}]}
    response = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions", headers=headers, json=body, timeout=900
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_gateway_with_mirage_model_endpoint_and_memory_server(
    install: OpenClawInstall, tmp_path: Path
) -> None:
    workspace = tmp_path / "memory-workspace"
    workspace.mkdir()
    (workspace / "rent_note.txt").write_text("The median rent in Berlin in 2023 was 2110 EUR.\n")
    memory_port, gateway_port = unused_port(), unused_port()
    log_path = tmp_path / "model-requests.jsonl"
    table = ModelTable(
        {
            "trunk": FunctionBackbone(scripted, model="trunk"),
            "answer": FunctionBackbone(scripted, model="answer"),
        }
    )
    app = create_app(table, request_log=RequestLog(log_path, with_content=True))
    state = tmp_path / "openclaw-state"
    state.mkdir()
    config_path = state / "openclaw.json"
    env = install.env()
    env.update(OFFLINE_ENV, HOME=str(tmp_path / "home"), OPENCLAW_STATE_DIR=str(state))
    env["OPENCLAW_CONFIG_PATH"] = str(config_path)
    memory_argv = [sys.executable, "-m", "mirage", "memory", "serve", "-w", str(workspace)]
    memory_argv += ["--http", f"127.0.0.1:{memory_port}"]

    with (
        BackgroundServer(app) as model_server,
        running(memory_argv, dict(os.environ), tmp_path / "memory.log") as memory,
    ):
        config_path.write_text(
            gateway_config(tmp_path, model_server.port, memory_port, gateway_port)
        )
        validated = subprocess.run(
            install.command("config", "validate", "--json"),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert json.loads(validated.stdout)["valid"] is True, validated.stdout
        wait_until(
            lambda: httpx.get(f"http://127.0.0.1:{memory_port}/mcp").status_code < 500,
            "memory server",
            120,
            memory,
        )
        with running(install.command("gateway", "run"), env, tmp_path / "gw.log") as gateway:
            wait_until(
                lambda: (
                    "openclaw/default"
                    in httpx.get(
                        f"http://127.0.0.1:{gateway_port}/v1/models",
                        headers={"Authorization": f"Bearer {TOKEN}"},
                    ).text
                ),
                "gateway",
                600,
                gateway,
            )
            recall = 'CALL mirage__artifact_recall {"query": "median rent Berlin"}'
            reply = chat(gateway_port, "trunk", recall)
            assert "rent_note" in reply["choices"][0]["message"]["content"]

            fork = subprocess.run(
                install.command(
                    "gateway",
                    "call",
                    "sessions.create",
                    "--params",
                    json.dumps(
                        {
                            "key": "agent:main:probe-1",
                            "parentSessionKey": "agent:main:trunk",
                            "fork": True,
                        }
                    ),
                    "--json",
                    "--token",
                    TOKEN,
                    "--port",
                    str(gateway_port),
                ),
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert json.loads(fork.stdout)["ok"] is True, fork.stdout + fork.stderr
            probe = chat(gateway_port, "probe-1", "What did the chart say?", model="answer")
            assert probe["choices"][0]["message"]["content"] == "Noted."

    calls = [json.loads(line) for line in (workspace / ".mirage" / "calls.jsonl").open()]
    assert [call["tool"] for call in calls] == ["artifact_recall"]
    first, after_tool, answer = read_request_log(log_path)
    assert (first.model, first.stream) == ("trunk", True)
    assert [call.name for call in first.tool_calls] == ["mirage__artifact_recall"]
    assert after_tool.request_messages is not None
    assert after_tool.request_messages[-1]["role"] == "tool"
    assert answer.model == "answer"
    assert answer.request_messages is not None
    user_turns = [m["content"] for m in answer.request_messages if m["role"] == "user"]
    assert recall in user_turns[0]  # the fork carries the trunk's history
    assert "What did the chart say?" in user_turns[-1]
