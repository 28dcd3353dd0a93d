"""OpenClaw's timeouts from the answering model, and a slow or failed turn (issue 28).

The real gateway with a slow model is ``test_openclaw_slow_model.py`` (markers ``openclaw``,
``slow``); here: the numbers, where they go in the config, mirage's own client waiting longer
than OpenClaw, a silent gateway as a turn error (not a dead gateway), and a failed trunk turn
as one clear line.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from harness.kit.agents.openclaw.config import generate_config, merge_config
from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.agents.openclaw.gateway import (
    GatewayChat,
    GatewayError,
    GatewayPaths,
    GatewayProcess,
    TurnError,
    TurnTimeout,
)
from harness.kit.agents.openclaw.timeouts import (
    CALLS_PER_TURN,
    CLIENT_MARGIN_S,
    MIN_CALL_S,
    ModelTimeouts,
    client_timeout_s,
    model_timeouts,
)
from runtime.backbones import FunctionBackbone, LiteLLMBackbone
from runtime.backbones.litellm_backbone import RetryPolicy
from tests.agents.test_openclaw_config import settings
from tests.agents.test_openclaw_trunk import FakeOpenClaw, driver_for

OPENCLAW_COMPACTION_DEFAULT_S = 180


def test_a_local_model_gets_a_whole_window_at_slow_rates() -> None:
    local = FunctionBackbone(lambda messages: "ok", model="local", context_window=16_384)
    timeouts = model_timeouts(local, 16_384, 512)
    assert timeouts == ModelTimeouts(call_s=4352, turn_s=CALLS_PER_TURN * 4352)  # 4096 + 256 s
    assert timeouts.call_s > OPENCLAW_COMPACTION_DEFAULT_S
    assert model_timeouts(local, 32_768, 512).call_s > timeouts.call_s  # grows with the window
    assert model_timeouts(local, 512, 8).call_s == MIN_CALL_S


def test_a_hosted_model_gets_its_own_attempts_and_backoffs() -> None:
    hosted = LiteLLMBackbone("openai/gpt-4o-mini", api_key="k", timeout_s=120.0)
    assert model_timeouts(hosted, 128_000, 1024).call_s == 4 * 120 + 3 * 8
    quick = LiteLLMBackbone(
        "openai/gpt-4o-mini", api_key="k", timeout_s=10.0, retry=RetryPolicy(max_retries=0)
    )
    assert model_timeouts(quick, 128_000, 1024).call_s == MIN_CALL_S


def test_the_config_sets_openclaws_three_timeouts() -> None:
    config = generate_config(settings())
    defaults = config["agents"]["defaults"]
    assert defaults["timeoutSeconds"] == 7600
    assert defaults["compaction"]["timeoutSeconds"] == 1900
    assert config["models"]["providers"]["mirage"]["timeoutSeconds"] == 1900


def test_mirages_client_waits_longer_than_openclaws_turn_a_users_included() -> None:
    config = generate_config(settings())
    assert client_timeout_s(config) == 7600 + CLIENT_MARGIN_S
    mine = merge_config(config, {"agents": {"defaults": {"timeoutSeconds": 60}}})
    assert client_timeout_s(mine) == 60 + CLIENT_MARGIN_S
    unlimited = merge_config(config, {"agents": {"defaults": {"timeoutSeconds": 0}}})
    assert client_timeout_s(unlimited) is None
    with pytest.raises(OpenClawError, match=r"agents\.defaults\.timeoutSeconds"):
        client_timeout_s(merge_config(config, {"agents": {"defaults": {"timeoutSeconds": "1h"}}}))


async def silent_server() -> tuple[asyncio.Server, int]:
    """Accepts connections, reads the request and never answers (until the client leaves)."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            pass
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def unstarted_gateway(tmp_path: Path, port: int) -> GatewayProcess:
    """A gateway whose process mirage did not start: ``check_alive`` has nothing to report."""
    return GatewayProcess(None, GatewayPaths(root=tmp_path), port=port, token="t" * 32)  # type: ignore[arg-type]


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    server, port = await silent_server()
    yield port
    server.close()
    await server.wait_closed()


async def test_a_gateway_silent_past_the_timeout_is_a_turn_error(
    tmp_path: Path, silent_port: int
) -> None:
    chat = GatewayChat(unstarted_gateway(tmp_path, silent_port), timeout_s=1.0)
    try:
        with pytest.raises(TurnTimeout) as caught:
            await chat.turn("p-1", "hello", model="answer")
    finally:
        await chat.aclose()
    assert isinstance(caught.value, TurnError)  # the probe adapter records an agent error
    assert str(caught.value) == "no reply from OpenClaw within 1 s"


async def test_a_gateway_that_is_gone_is_still_a_gateway_error(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chat = GatewayChat(unstarted_gateway(tmp_path, port), timeout_s=5)
    try:
        with pytest.raises(GatewayError):
            await chat.turn("p-1", "hello")
    finally:
        await chat.aclose()


class FailingOpenClaw(FakeOpenClaw):
    """OpenClaw answers the third trunk turn with its timeout error."""

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace, base=100, compact_at=10**9)
        self.paths.file_log = workspace.parent / "gateway.log"
        self.turns = 0

    async def turn(self, session: str, text: str, *, model: str | None = None) -> None:
        self.turns += 1
        if self.turns == 3:
            detail = '{"error":{"message":"upstream provider timeout","type":"api_error"}}'
            raise TurnError(504, detail)
        await super().turn(session, text, model=model)


async def test_a_failed_trunk_turn_stops_the_run_with_one_line(tmp_path: Path) -> None:
    claw = FailingOpenClaw(tmp_path / "ws")
    with pytest.raises(OpenClawError) as caught:
        await driver_for(claw, 16_384, tmp_path / "family").run()
    message = str(caught.value)
    assert "trunk turn 3" in message and "upstream provider timeout" in message
    assert "re-run the same command" in message and "\n" not in message
