"""``mirage chat`` on the embedded model: one real turn, the status line, and /exit."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mirage.cli import app


@pytest.mark.slow
def test_chat_one_turn_on_the_embedded_model() -> None:
    result = CliRunner().invoke(
        app, ["chat", "--no-tools", "--max-output-tokens", "16"], input="Say hello.\n/exit\n"
    )
    assert result.exit_code == 0, result.output
    assert "mirage chat · local/smollm2-135m · window 8192 tokens" in result.output
    reply = result.output.split("agent> ", 1)[1].split("\n", 1)[0]
    assert reply.strip()
    assert "[EIT " in result.output and "compactions 0" in result.output
