"""One running OpenClaw for a ``mirage run``: model endpoint, config, gateway, RPC and chat.

Above: the trunk driver and the probe adapter. Below: ``endpoint`` (mirage's model endpoint,
started first so the config can name its port), ``config`` (generated, merged with the user's,
validated by the pinned OpenClaw), ``gateway`` (the process) and ``rpc`` (session forks). Its
state lives in the checkpoint family's folder, so a re-run after any failure restarts the
gateway on the same sessions and memory files.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from harness.kit.agents.openclaw.config import (
    GatewaySettings,
    generate_config,
    merge_config,
    validate_config,
    write_config,
)
from harness.kit.agents.openclaw.endpoint import ModelEndpoint
from harness.kit.agents.openclaw.gateway import (
    GatewayChat,
    GatewayPaths,
    GatewayProcess,
    free_port,
    gateway_env,
    session_key,
)
from harness.kit.agents.openclaw.install import OpenClawInstall
from harness.kit.agents.openclaw.rpc import GatewayRpc, RpcError
from harness.kit.agents.openclaw.state import SessionNode, session_node
from harness.kit.agents.openclaw.timeouts import ModelTimeouts, client_timeout_s, model_timeouts
from runtime.backbones.base import Backbone

log = structlog.get_logger(__name__)

HOUSEKEEPING_MAX_TOKENS = 512
"""The reply budget of compaction summaries and the memory flush (the built-in summarizer's)."""


class OpenClawHarness:
    """``async with OpenClawHarness(...) as claw``: everything running, stopped on exit.
    ``budget_window``: the window at which OpenClaw's default compaction budgets stay as they
    are (``config.scaled_budget``)."""

    def __init__(
        self,
        install: OpenClawInstall,
        root: Path,
        answer: Backbone,
        *,
        window: int,
        budget_window: int,
        answer_max_tokens: int,
        memory_url: str,
        user_config: dict[str, Any] | None = None,
        user_config_path: Path | None = None,
    ) -> None:
        self.install = install
        self.paths = GatewayPaths(root=root)
        self.answer = answer
        self.window = window
        self.budget_window = budget_window
        self.answer_max_tokens = answer_max_tokens
        self.memory_url = memory_url
        self.user_config = user_config
        self.user_config_path = user_config_path
        self.token = secrets.token_hex(16)
        self.timeouts: ModelTimeouts = model_timeouts(
            answer, window, max(answer_max_tokens, HOUSEKEEPING_MAX_TOKENS)
        )
        self.endpoint = ModelEndpoint(
            answer, HOUSEKEEPING_MAX_TOKENS, root / "model-requests.jsonl"
        )
        self.gateway = GatewayProcess(install, self.paths, port=free_port(), token=self.token)
        self.rpc = GatewayRpc(self.gateway.ws_url, self.token)
        self.chat = GatewayChat(self.gateway)

    def settings(self, model_base_url: str) -> GatewaySettings:
        return GatewaySettings(
            gateway_port=self.gateway.port,
            token=self.token,
            model_base_url=model_base_url,
            memory_url=self.memory_url,
            workspace=self.paths.workspace,
            log_file=self.paths.file_log,
            window=self.window,
            budget_window=self.budget_window,
            answer_max_tokens=self.answer_max_tokens,
            housekeeping_max_tokens=HOUSEKEEPING_MAX_TOKENS,
            timeouts=self.timeouts,
        )

    async def __aenter__(self) -> OpenClawHarness:
        self.paths.make()
        base_url = self.endpoint.start()
        try:
            config = merge_config(generate_config(self.settings(base_url)), self.user_config or {})
            write_config(self.paths.config, config)
            env = gateway_env(self.install, self.paths)
            await asyncio.to_thread(validate_config, self.install, env, self.user_config_path)
            self.chat.timeout_s = client_timeout_s(config)  # a user's turn timeout included
            log.info(
                "openclaw.timeouts",
                call_s=self.timeouts.call_s,
                turn_s=self.timeouts.turn_s,
                client_s=self.chat.timeout_s,
            )
            await self.gateway.start()
        except BaseException:
            await self.chat.aclose()
            self.gateway.stop()
            self.endpoint.stop()
            raise
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.chat.aclose()
        await self.rpc.aclose()
        self.gateway.stop()
        self.endpoint.stop()

    async def fork(self, parent: str, child: str) -> None:
        """Session ``child``: a copy of ``parent``'s whole transcript (the parent unchanged)."""
        params = {"key": session_key(child), "parentSessionKey": session_key(parent), "fork": True}
        try:
            await self.rpc.call("sessions.create", params)
        except RpcError:
            self.gateway.check_alive(f"while forking session {parent}")
            raise

    def node(self, session: str) -> SessionNode | None:
        return session_node(self.paths.agent_store, session_key(session))

    async def settle(self, session: str, quiet_s: float = 2.0, poll_s: float = 0.5) -> None:
        """Wait until OpenClaw's maintenance after a turn (memory flush, compaction summary) is
        over: no real-model call in flight and the session not running, for ``quiet_s``."""
        quiet = 0.0
        while quiet < quiet_s:
            await asyncio.sleep(poll_s)
            self.gateway.check_alive(f"after a turn of session {session}")
            node = self.node(session)
            busy = not self.endpoint.in_flight.idle or (
                node is not None and node.status == "running"
            )
            quiet = 0.0 if busy else quiet + poll_s
