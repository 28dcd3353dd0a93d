"""Helpers for compaction tests: sessions with a known token mass, scripted usage."""

from __future__ import annotations

from runtime.backbones.scripted import ScriptedReply
from runtime.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from runtime.session import AgentConfig, Session


def words(count: int, tag: str = "w") -> str:
    """About ``count`` tokens of distinct filler text."""
    return " ".join(f"{tag}{index % 10}" for index in range(count))


def conversation(turns: int, tokens_per_message: int = 200) -> list[Message]:
    """``turns`` exchanges; every third one is a tool round trip with an artifact id."""
    messages: list[Message] = []
    for turn in range(turns):
        messages.append(UserMessage.text(f"turn {turn}: " + words(tokens_per_message, "u")))
        if turn % 3 == 1:
            call = ToolCall(
                id=f"call-{turn}",
                name="artifact_get",
                arguments={"path": f"derived/chart_{turn:04d}.csv"},
            )
            messages.append(AssistantMessage(content="Let me look.", tool_calls=(call,)))
            messages.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    name=call.name,
                    content=f"value_{turn}=4812.5 " + words(50, "t"),
                )
            )
        messages.append(AssistantMessage(content=f"answer {turn}: " + words(tokens_per_message)))
    return messages


def session_with(messages: list[Message], window: int = 32_768, **config: object) -> Session:
    session = Session.new(AgentConfig(**config), context_window=window)  # type: ignore[arg-type]
    for message in messages:
        session.append(message)
    return session


def reply(text: str, eit: int) -> ScriptedReply:
    """A scripted reply whose provider-reported EIT is ``eit``."""
    return ScriptedReply(text=text, usage=Usage(input_tokens=eit, output_tokens=5))
