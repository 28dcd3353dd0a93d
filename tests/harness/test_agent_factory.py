"""The one adapter factory both protocols build their ``openai:``/``cmd:`` agents with."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.cue.config import AgentSpec
from harness.kit.agents.command import CommandAgent
from harness.kit.agents.factory import agent_spec, external_adapter
from harness.kit.agents.openai_endpoint import OpenAIEndpointAgent


def _script(tmp_path: Path) -> Path:
    agent = tmp_path / "agent.py"
    agent.write_text(f"#!{sys.executable}\n")
    agent.chmod(0o755)
    return agent


def test_a_spec_is_split_and_checked(tmp_path: Path) -> None:
    agent = _script(tmp_path)
    assert agent_spec("openai:http://127.0.0.1:8000/v1") == ("openai", "http://127.0.0.1:8000/v1")
    assert agent_spec(f"cmd:{agent} --fast") == ("cmd", f"{agent} --fast")
    assert agent_spec("openclaw", named=("openclaw",)) == ("openclaw", "")
    with pytest.raises(ValueError, match="openai:http://HOST:PORT/v1 or cmd:PATH, got 'openclaw'"):
        agent_spec("openclaw")
    with pytest.raises(ValueError, match="cmd:PATH or openclaw, got 'claw'"):
        agent_spec("claw", named=("openclaw",))
    with pytest.raises(ValueError, match="not found"):
        agent_spec(f"cmd:{tmp_path / 'missing'}")


def test_the_adapter_of_each_kind_carries_the_options(tmp_path: Path) -> None:
    urls = {"q1": "http://127.0.0.1:9/t/q1/mcp"}
    served = external_adapter(
        "openai:http://127.0.0.1:8000/v1",
        model="mine",
        api_key="k",
        timeout_s=5,
        memory_url=urls.__getitem__,
    )
    assert isinstance(served, OpenAIEndpointAgent)
    body, headers = served.request([], "q1")
    assert body["model"] == "mine" and headers["Authorization"] == "Bearer k"
    assert headers["X-Mirage-Memory-Url"] == urls["q1"]
    command = external_adapter(f"cmd:{_script(tmp_path)} --fast", timeout_s=5)
    assert isinstance(command, CommandAgent)
    assert command.argv[1:] == ["--fast"] and command.timeout_s == 5
    with pytest.raises(ValueError, match="got 'openclaw'"):
        external_adapter("openclaw", timeout_s=5)


def test_cue_takes_only_the_agents_it_can_drive() -> None:
    with pytest.raises(ValidationError, match="or cmd:PATH, got 'openclaw'"):
        AgentSpec(agent="openclaw")
