"""A conversation session: the state an agent runs on, and what a checkpoint freezes.

A session holds the configuration, the message history (the system prompt is assembled per
call from the config, not stored), the per-message token estimates that keep EIT tracking
incremental, the EIT ledger, the compaction state, free-form tool state and the workspace
reference. ``runtime.snapshot`` writes and reads it.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.backbones import DEFAULT_MODEL
from runtime.ledger import Ledger
from runtime.messages import Message
from runtime.tokens import count_message_tokens

DEFAULT_SYSTEM_PROMPT = (
    "You are a personal assistant with a persistent workspace of the user's files, "
    "extracted records and dated notes. Earlier evidence may no longer be visible in this "
    "conversation; when you need it, retrieve it with your tools instead of guessing."
)


class AgentConfig(BaseModel):
    """What an agent runs with. Persisted inside every session snapshot."""

    model_config = ConfigDict(extra="forbid")

    model: str = DEFAULT_MODEL
    context_window: int | None = Field(
        default=None, description="Effective window; None means the backbone's own window."
    )
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    workspace_hint: str | None = None
    tool_mode: Literal["native", "text"] | None = None
    parser: str | None = Field(default=None, description="Override the profile's parser family.")
    adapters: bool = False
    max_tool_rounds: int = Field(default=4, ge=0, le=32)
    max_output_tokens: int = Field(default=256, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)
    options: dict[str, Any] = Field(default_factory=dict)


class WorkspaceRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    version: str | None = None


class CompactionRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary: str
    first_kept_index: int
    first_kept_message: Message | None = None
    tokens_before: int
    tokens_after: int
    format: str
    summarizer_model: str
    focus: str | None = None
    reason: Literal["threshold", "overflow", "manual"] = "threshold"


class CompactionState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = 0
    records: list[CompactionRecord] = Field(default_factory=list)
    flushed_in_cycle: bool = False


SERVING_FIELDS: dict[str, Any] = {
    "ledger": {
        "calls": {"__all__": {"latency_s", "cached_tokens", "cache_write_tokens"}},
        "total_cached_tokens": True,
        "total_cache_write_tokens": True,
    },
    "tool_state": {"__all__": {"__all__": {"tool_calls": {"__all__": {"latency_s"}}}}},
}
"""What differs between two honest builds of one session — how its calls were served, not what
they said: how long each took (the ledger's calls, and the tool calls of records kept in
``tool_state``, such as the memory flush's ``memory_append`` calls) and how many of their prompt
tokens a cache served or stored (a provider's prompt cache, the embedded model's kept KV
copies, whose size is a setting): kept in a snapshot as data, left out of what names it
(``Session.identity_json``)."""


class Session(BaseModel):
    """Read back strictly (``runtime.snapshot``): no unknown field, no coerced value."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    session_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    config: AgentConfig = Field(default_factory=AgentConfig)
    messages: list[Message] = Field(default_factory=list)
    message_tokens: list[int] = Field(default_factory=list)
    ledger: Ledger
    compaction: CompactionState = Field(default_factory=CompactionState)
    tool_state: dict[str, Any] = Field(default_factory=dict)
    workspace: WorkspaceRef | None = None

    @classmethod
    def new(cls, config: AgentConfig, context_window: int, **fields: Any) -> Session:
        return cls(config=config, ledger=Ledger(context_window=context_window), **fields)

    def append(self, message: Message) -> None:
        self.messages.append(message)
        self.message_tokens.append(count_message_tokens(message))

    def truncate(self, length: int) -> None:
        """Drop messages after ``length`` (used to roll back a failed turn)."""
        del self.messages[length:]
        del self.message_tokens[length:]

    def replace_messages(self, messages: list[Message]) -> None:
        self.messages = list(messages)
        self.message_tokens = [count_message_tokens(message) for message in messages]

    def fork(self) -> Session:
        """An independent copy to run on (one probe on a restored checkpoint), made without
        parsing or validating anything again: the messages are immutable and shared, every
        container a turn changes (the message lists, the ledger, the compaction and tool state,
        the configuration) is the copy's own. The copy equals this session."""
        return self.model_copy(
            update={
                "config": self.config.model_copy(deep=True),
                "messages": list(self.messages),
                "message_tokens": list(self.message_tokens),
                "ledger": self.ledger.model_copy(update={"calls": list(self.ledger.calls)}),
                "compaction": self.compaction.model_copy(deep=True),
                "tool_state": copy.deepcopy(self.tool_state),
                "workspace": None if self.workspace is None else self.workspace.model_copy(),
            }
        )

    def identity_json(self) -> bytes:
        """The session as JSON without its ``SERVING_FIELDS``: what a checkpoint's hash
        covers, so two builds of one conversation have one name whatever their latencies."""
        return self.model_dump_json(exclude=SERVING_FIELDS).encode("utf-8")

    @property
    def history_tokens(self) -> int:
        return sum(self.message_tokens)

    @property
    def compaction_count(self) -> int:
        return self.compaction.count
