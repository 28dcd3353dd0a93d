"""The one adapter factory: an ``--agent`` value (``openai:URL``, ``cmd:COMMAND`` or the name
of an agent the caller drives itself) checked and split into kind and target, and the adapter of
an ``openai:`` or ``cmd:`` agent built from it.

Above: MIRAGE's run (``--agent``; its named agents are its run strategies',
``harness.mirage.strategies``) and CUE's ``agent`` memory system. Below: the adapters
``OpenAIEndpointAgent`` and ``CommandAgent``.
"""

from __future__ import annotations

from collections.abc import Collection

from harness.kit.agents.base import AgentUnderTest, MemoryURL


def agent_spec(value: str, *, named: Collection[str] = ()) -> tuple[str, str]:
    """``openai:URL``, ``cmd:COMMAND`` or one of ``named`` split into kind and target
    (a named agent is its own kind, with no target), validated: a command's executable must
    exist now, not after the trunk is built."""
    if value in named:
        return value, ""
    kind, _, target = value.partition(":")
    if kind == "openai" and target.startswith(("http://", "https://")):
        return "openai", target
    if kind == "cmd" and target.strip():
        from harness.kit.agents.command import parse_command

        parse_command(target)
        return "cmd", target
    kinds = ["openai:http://HOST:PORT/v1", "cmd:PATH", *named]
    choices = f"{', '.join(kinds[:-1])} or {kinds[-1]}"
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

    kind, target = agent_spec(value)
    if kind == "openai":
        return OpenAIEndpointAgent(
            target, model=model, api_key=api_key, memory_url=memory_url, timeout_s=timeout_s
        )
    return CommandAgent(parse_command(target), memory_url=memory_url, timeout_s=timeout_s)
