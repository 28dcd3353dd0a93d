"""``mirage run --agent … --memory-url …`` option validation (before any trunk is built)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.kit.memory import memory_binding
from harness.mirage.config import RunConfig


def test_agent_specs(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(f"#!{sys.executable}\n")
    agent.chmod(0o755)
    assert RunConfig(agent="openai:http://127.0.0.1:8000/v1").agent is not None
    assert RunConfig(agent=f"cmd:{agent} --flag").agent is not None
    with pytest.raises(ValidationError, match="must be openai:"):
        RunConfig(agent="openai:127.0.0.1:8000")
    with pytest.raises(ValidationError, match="not found"):
        RunConfig(agent=f"cmd:{tmp_path / 'missing'}")
    with pytest.raises(ValidationError, match="only with --agent"):
        RunConfig(memory_url="http://127.0.0.1:8765/mcp")


def test_memory_url_binding() -> None:
    assert memory_binding("http://127.0.0.1:8765/mcp", None) == ("127.0.0.1", 8765)
    assert memory_binding("http://localhost:8765", None) == ("localhost", 8765)
    assert memory_binding("http://0.0.0.0:8765/mcp", "s3cret") == ("0.0.0.0", 8765)
    with pytest.raises(ValueError, match="without a bearer token: pass --memory-token "):
        memory_binding("http://0.0.0.0:8765/mcp", None)
    with pytest.raises(ValueError, match="path must be /mcp"):
        memory_binding("http://127.0.0.1:8765/other", None)
    with pytest.raises(ValueError, match="HOST:PORT"):
        memory_binding("http://127.0.0.1/mcp", None)


def test_secrets_are_not_written_to_run_json() -> None:
    config = RunConfig(agent="openai:http://127.0.0.1:8000/v1", agent_api_key="k", memory_token="t")
    dumped = config.model_dump_json()
    assert "agent_api_key" not in dumped and "memory_token" not in dumped
