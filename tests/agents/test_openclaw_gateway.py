"""The gateway lifecycle and config validation against a fake ``openclaw`` process."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.kit.agents.openclaw.config import (
    GatewaySettings,
    OpenClawConfigError,
    generate_config,
    merge_config,
    validate_config,
    write_config,
)
from harness.kit.agents.openclaw.gateway import (
    GatewayError,
    GatewayPaths,
    GatewayProcess,
    free_port,
    gateway_env,
)
from harness.kit.agents.openclaw.install import OpenClawInstall
from harness.kit.agents.openclaw.timeouts import ModelTimeouts
from harness.mirage.trunk.states import PAPER_WINDOW

FAKE = Path(__file__).parents[1] / "fakes" / "openclaw_gateway.py"
TOKEN = "t" * 32


@pytest.fixture
def install(tmp_path: Path) -> OpenClawInstall:
    fake = OpenClawInstall(
        version="2026.9.6",
        node_version="24.0.0",
        registry="https://registry.npmjs.org/",
        installed_at=datetime.now(UTC),
        install_seconds=0.0,
        size_bytes=0,
        path=tmp_path / "install",
    )
    fake.node_bin_dir.mkdir(parents=True)
    fake.node.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    fake.node.chmod(0o755)
    return fake


def configured(install: OpenClawInstall, root: Path, extra: dict[str, object] | None = None):
    paths = GatewayPaths(root=root)
    paths.make()
    port = free_port()
    settings = GatewaySettings(
        gateway_port=port,
        token=TOKEN,
        model_base_url="http://127.0.0.1:9/v1",
        memory_url="http://127.0.0.1:9/mcp",
        workspace=paths.workspace,
        log_file=paths.file_log,
        window=16_384,
        budget_window=PAPER_WINDOW,
        answer_max_tokens=64,
        housekeeping_max_tokens=512,
        timeouts=ModelTimeouts(call_s=1900, turn_s=7600),
    )
    write_config(paths.config, merge_config(generate_config(settings), extra or {}))
    return paths, port


def test_validate_accepts_the_generated_config(install: OpenClawInstall, tmp_path: Path) -> None:
    paths, _ = configured(install, tmp_path / "gw")
    validate_config(install, gateway_env(install, paths), None)


def test_a_rejected_key_is_one_line_naming_the_file_and_key(
    install: OpenClawInstall, tmp_path: Path
) -> None:
    paths, _ = configured(install, tmp_path / "gw", {"bogus": 1})
    with pytest.raises(OpenClawConfigError) as caught:
        validate_config(install, gateway_env(install, paths), Path("mine.json5"))
    message = str(caught.value)
    assert "\n" not in message
    assert "--openclaw-config mine.json5" in message and "bogus" in message


async def test_gateway_starts_answers_and_stops(install: OpenClawInstall, tmp_path: Path) -> None:
    paths, port = configured(install, tmp_path / "gw")
    gateway = GatewayProcess(install, paths, port=port, token=TOKEN)
    await gateway.start(timeout_s=60)
    assert gateway.running
    gateway.stop()
    assert not gateway.running


async def test_a_gateway_that_exits_while_starting_names_its_log(
    install: OpenClawInstall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GATEWAY", "exit")
    paths, port = configured(install, tmp_path / "gw")
    gateway = GatewayProcess(install, paths, port=port, token=TOKEN)
    with pytest.raises(GatewayError, match="exited with code 3 while starting") as caught:
        await gateway.start(timeout_s=60)
    assert "gateway refused to start" in str(caught.value)
    assert "re-run the same command to resume" in str(caught.value)


async def test_a_gateway_that_dies_mid_run_is_reported(
    install: OpenClawInstall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    monkeypatch.setenv("FAKE_GATEWAY", "die")
    paths, port = configured(install, tmp_path / "gw")
    gateway = GatewayProcess(install, paths, port=port, token=TOKEN)
    await gateway.start(timeout_s=60)
    for _ in range(100):
        if not gateway.running:
            break
        await asyncio.sleep(0.1)
    with pytest.raises(GatewayError, match="exited with code 5 during a turn") as caught:
        gateway.check_alive("during a turn")
    assert "worker crashed" in str(caught.value)
