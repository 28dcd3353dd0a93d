"""The one adapter factory: an ``--agent`` value (``openai:URL``, ``cmd:COMMAND`` or
``openclaw``) checked and split into kind and target, and the adapter of an ``openai:`` or
``cmd:`` agent built from it.

Above: MIRAGE's run (``--agent``; OpenClaw is driven by its own run, ``harness.mirage.openclaw``)
and CUE's ``agent`` memory system. Below: the adapters ``OpenAIEndpointAgent`` and
``CommandAgent``.
"""

from __future__ import annotations

from typing import Literal

from harness.kit.agents.base import AgentUnderTest, MemoryURL

OPENCLAW_AGENT = "openclaw"
AgentKind = Literal["openai", "cmd", "openclaw"]


def agent_spec(value: str, *, openclaw: bool = True) -> tuple[AgentKind, str]:
    """``openai:URL``, ``cmd:COMMAND`` or (unless ``openclaw`` is false) ``openclaw`` split
    into kind and target, validated: a command's executable must exist now, not after the
    trunk is built."""
    if value == OPENCLAW_AGENT and openclaw:
        return "openclaw", ""
    kind, _, target = value.partition(":")
    if kind == "openai" and target.startswith(("http://", "https://")):
        return "openai", target
    if kind == "cmd" and target.strip():
        from harness.kit.agents.command import parse_command

        parse_command(target)
        return "cmd", target
    choices = "openai:http://HOST:PORT/v1, cmd:PATH or openclaw"
    if not openclaw:
        choices = "openai:http://HOST:PORT/v1 or cmd:PATH"
    raise ValueError(f"--agent must be {choices}, got {value!r}")


def external_adapter(
    value: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    timeout_s: float,
    memory_url: MemoryURL | None = None,
) -> AgentUnderTest:
    """The adapter of an ``openai:`` or ``cmd:`` agent; ``model`` and ``api_key`` go to an
    ``openai:`` endpoint, ``memory_url`` maps each probe's tag to its memory URL."""
    from harness.kit.agents.command import CommandAgent, parse_command
    from harness.kit.agents.openai_endpoint import OpenAIEndpointAgent

    kind, target = agent_spec(value, openclaw=False)
    if kind == "openai":
        return OpenAIEndpointAgent(
            target, model=model, api_key=api_key, memory_url=memory_url, timeout_s=timeout_s
        )
    return CommandAgent(parse_command(target), memory_url=memory_url, timeout_s=timeout_s)
