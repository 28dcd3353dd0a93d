"""The OpenClaw gateway as a child process, and its chat endpoint as a client.

Above: the OpenClaw run (trunk replay and probes). Below: ``openclaw gateway run`` on the
installed Node, headless on loopback, with its state, home and config in one folder under the
run's ``--out`` (so sessions survive a restart and a resumed run), and OpenClaw's
OpenAI-compatible ``/v1/chat/completions`` (``x-openclaw-session-key`` names the session,
``x-openclaw-model`` the model id of one turn).

The gateway starts in its own process group (it spawns workers) and is stopped with the whole
group. Readiness is ``GET /v1/models`` listing ``openclaw/default``. A gateway that exits while
starting, does not answer in time, or dies mid-run raises ``GatewayError`` naming its log and
what to do; finished probes are already in ``results.jsonl``, so re-running resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import structlog
from pydantic import BaseModel, ConfigDict

from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.agents.openclaw.install import OpenClawInstall

log = structlog.get_logger(__name__)

OFFLINE_ENV = {
    "OPENCLAW_DISABLE_BONJOUR": "1",
    "OPENCLAW_SKIP_CHANNELS": "1",
    "OPENCLAW_NO_RESPAWN": "1",
    "OPENCLAW_NO_AUTO_UPDATE": "1",
}
START_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 60.0
TURN_TIMEOUT_S = 3600.0
SESSION_PREFIX = "agent:main:"


class GatewayError(OpenClawError):
    """The gateway did not start, or stopped answering; the message says what to do."""


class TurnError(RuntimeError):
    """The gateway answered a turn with an error (it is still running)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status


class TurnTimeout(TurnError):
    """The gateway is running but did not answer a turn within the client's timeout."""

    def __init__(self, timeout_s: float) -> None:
        RuntimeError.__init__(self, f"no reply from OpenClaw within {timeout_s:.0f} s")
        self.status = 0


class GatewayPaths(BaseModel):
    """Everything OpenClaw keeps for one checkpoint family, under ``root``."""

    model_config = ConfigDict(frozen=True)

    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def config(self) -> Path:
        return self.state / "openclaw.json"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def workspace(self) -> Path:
        """OpenClaw's agent workspace: ``MEMORY.md`` and ``memory/`` (its own memory)."""
        return self.root / "agent-workspace"

    @property
    def file_log(self) -> Path:
        return self.root / "gateway.log"

    @property
    def output(self) -> Path:
        return self.root / "gateway.out"

    @property
    def agent_store(self) -> Path:
        return self.state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"

    def make(self) -> None:
        for folder in (self.state, self.home, self.workspace / "memory"):
            folder.mkdir(parents=True, exist_ok=True)


def gateway_env(install: OpenClawInstall, paths: GatewayPaths) -> dict[str, str]:
    env = install.env()
    env.update(
        OFFLINE_ENV,
        HOME=str(paths.home),
        OPENCLAW_STATE_DIR=str(paths.state),
        OPENCLAW_CONFIG_PATH=str(paths.config),
    )
    return env


def session_key(name: str) -> str:
    return f"{SESSION_PREFIX}{name}"


class GatewayProcess:
    """``openclaw gateway run`` for one state folder; ``start`` waits until it serves."""

    def __init__(
        self, install: OpenClawInstall, paths: GatewayPaths, *, port: int, token: str
    ) -> None:
        self.install = install
        self.paths = paths
        self.port = port
        self.token = token
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def start(self, timeout_s: float = START_TIMEOUT_S) -> float:
        """Start and wait until ``/v1/models`` answers; returns the seconds it took."""
        started = time.perf_counter()
        self.paths.output.parent.mkdir(parents=True, exist_ok=True)
        with self.paths.output.open("ab") as output:
            self._process = subprocess.Popen(
                self.install.command("gateway", "run"),
                env=gateway_env(self.install, self.paths),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        log.info("openclaw.gateway_starting", pid=self._process.pid, port=self.port)
        async with httpx.AsyncClient(timeout=5.0) as client:
            while not await self._serving(client):
                self.check_alive("while starting")
                if time.perf_counter() - started > timeout_s:
                    self.stop()
                    raise GatewayError(
                        f"the OpenClaw gateway did not answer within {timeout_s:.0f} s (see "
                        f"{self.paths.output}); on a loaded machine re-run the same command, "
                        "it resumes"
                    )
                await asyncio.sleep(0.5)
        seconds = time.perf_counter() - started
        log.info("openclaw.gateway_ready", seconds=round(seconds, 1))
        return seconds

    async def _serving(self, client: httpx.AsyncClient) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            response = await client.get(f"{self.base_url}/v1/models", headers=self.headers)
            return response.status_code == 200 and "openclaw" in response.text
        return False

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def check_alive(self, when: str) -> None:
        process = self._process
        if process is None or process.poll() is None:
            return
        raise GatewayError(
            f"the OpenClaw gateway exited with code {process.returncode} {when}; last output: "
            f"{output_tail(self.paths.output)!r} (full log {self.paths.output}); finished "
            "probes are kept: re-run the same command to resume"
        )

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.info("openclaw.gateway_stopped", code=process.returncode)


def output_tail(path: Path, lines: int = 1, width: int = 300) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[-width:]


class ChatTurn(BaseModel):
    text: str
    usage: dict[str, Any] | None = None
    latency_s: float


class GatewayChat:
    """One user turn at a time on OpenClaw's chat endpoint. ``timeout_s``: how long a turn
    may take (None: no limit); the harness sets it from OpenClaw's own turn timeout."""

    def __init__(
        self, gateway: GatewayProcess, *, timeout_s: float | None = TURN_TIMEOUT_S
    ) -> None:
        self.gateway = gateway
        self.timeout_s = timeout_s
        self._client = httpx.AsyncClient()

    async def turn(self, session: str, text: str, *, model: str | None = None) -> ChatTurn:
        """Send ``text`` to session ``agent:main:<session>`` (``model``: the turn's model id).
        Raises ``TurnError`` when the gateway refuses the turn (``TurnTimeout`` when it is
        running but silent past ``timeout_s``), ``GatewayError`` when it is gone."""
        headers = {**self.gateway.headers, "x-openclaw-session-key": session}
        if model is not None:
            headers["x-openclaw-model"] = model
        body = {"model": "openclaw/default", "messages": [{"role": "user", "content": text}]}
        started = time.perf_counter()
        timeout = httpx.Timeout(self.timeout_s, connect=10.0)
        try:
            response = await self._client.post(
                f"{self.gateway.base_url}/v1/chat/completions",
                json=body,
                headers=headers,
                timeout=timeout,
            )
        except httpx.ReadTimeout as exc:
            self.gateway.check_alive(f"during a turn of session {session}")
            raise TurnTimeout(self.timeout_s or 0.0) from exc
        except httpx.TransportError as exc:
            self.gateway.check_alive(f"during a turn of session {session}")
            raise GatewayError(
                f"the OpenClaw gateway stopped answering ({type(exc).__name__}: {exc}); see "
                f"{self.gateway.paths.output}; re-run the same command to resume"
            ) from exc
        if response.status_code != 200:
            raise TurnError(response.status_code, response.text[:300])
        return _chat_turn(response, time.perf_counter() - started)

    async def aclose(self) -> None:
        await self._client.aclose()


def _chat_turn(response: httpx.Response, latency_s: float) -> ChatTurn:
    try:
        data = response.json()
        message = data["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise TurnError(response.status_code, f"unreadable reply {response.text[:200]!r}") from exc
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
    return ChatTurn(text=text, usage=usage, latency_s=latency_s)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
