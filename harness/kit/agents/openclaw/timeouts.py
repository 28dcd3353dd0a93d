"""How long OpenClaw waits for the answering model: set from what that model needs.

Above: ``config.generate_config`` (OpenClaw's three timeouts) and ``OpenClawHarness`` (how long
mirage's own client waits for a turn). Below: the answering backbone.

OpenClaw aborts a model request on its own clocks, and a timed-out trunk turn used to stop the
whole run (issue 28: a memory flush or compaction summary on the embedded model at load ~6).
Its keys (2026.9.6; docs/concepts/agent-loop.md "Timeouts", gateway/config-agents/
heartbeat-compaction-and-streaming.md):

- ``models.providers.<id>.timeoutSeconds``: one model HTTP request (connect, headers, body)
  and, for a loopback provider, also the stream's idle and first-event watchdogs;
- ``agents.defaults.compaction.timeoutSeconds``: each model request of a compaction summary
  (default 180 s, not extended by the provider's timeout, and not reset by stream chunks);
- ``agents.defaults.timeoutSeconds``: a whole agent turn (it also caps the watchdogs above).

One model call may have to read a whole window and write a whole reply. A hosted model
(litellm) takes at most its own budget: every attempt's timeout plus the backoffs between
them. A local or in-process model is bounded by throughput: the window at ``LOCAL_PREFILL_TPS``
plus the reply at ``LOCAL_DECODE_TPS`` — about a quarter of the slowest rates measured for
SmolLM2-135M on a busy 2-core machine (prefill 18–30 tokens/s, decode 8–11; docs/openclaw.md),
since at load ~20 (five embedded models on 2 cores) a memory flush read its 11.8k-token prompt
for over 18 minutes. A generous ceiling costs nothing while the model works; it only decides how
long a call that never answers holds a probe before it becomes an agent error. A turn may
make ``CALLS_PER_TURN`` such calls (the memory flush and its tool follow-up, a compaction
summary, the reply). mirage's client waits ``CLIENT_MARGIN_S`` longer than OpenClaw's turn, so
OpenClaw's own timeout (an error reply: an agent error of that probe) comes first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.kit.agents.openclaw.errors import OpenClawError
from runtime.backbones.base import Backbone

LOCAL_PREFILL_TPS = 4.0
LOCAL_DECODE_TPS = 2.0
MIN_CALL_S = 300
"""Never below OpenClaw's own idle watchdog for self-hosted providers (300 s)."""
CALLS_PER_TURN = 4
CLIENT_MARGIN_S = 120


class ModelTimeouts(BaseModel):
    """OpenClaw's timeouts for one answering model (seconds)."""

    model_config = ConfigDict(frozen=True)

    call_s: int = Field(ge=1, description="one model request, also each compaction request")
    turn_s: int = Field(ge=1, description="one agent turn")


def hosted_call_s(backbone: Backbone) -> float | None:
    """A litellm backbone's longest call: every attempt's timeout and the backoffs between them;
    None for a backbone without its own request timeout (local or in-process)."""
    from runtime.backbones.litellm_backbone import LiteLLMBackbone

    if not isinstance(backbone, LiteLLMBackbone):
        return None
    retries = backbone.retry.max_retries
    return (retries + 1) * backbone.timeout_s + retries * backbone.retry.max_delay_s


def local_call_s(window: int, max_output_tokens: int) -> float:
    """A whole window read and a whole reply written at the slow local rates."""
    return window / LOCAL_PREFILL_TPS + max_output_tokens / LOCAL_DECODE_TPS


def model_timeouts(backbone: Backbone, window: int, max_output_tokens: int) -> ModelTimeouts:
    """The timeouts OpenClaw needs for ``backbone`` serving prompts up to ``window`` tokens
    and replies up to ``max_output_tokens``."""
    needed = hosted_call_s(backbone)
    if needed is None:
        needed = local_call_s(window, max_output_tokens)
    call_s = max(MIN_CALL_S, math.ceil(needed))
    return ModelTimeouts(call_s=call_s, turn_s=CALLS_PER_TURN * call_s)


def client_timeout_s(config: Mapping[str, Any]) -> float | None:
    """How long mirage's client waits for a turn of the gateway running ``config`` (the merged
    one, a user's ``agents.defaults.timeoutSeconds`` included): OpenClaw's turn timeout plus
    ``CLIENT_MARGIN_S``; None (no limit) when OpenClaw's is 0, unlimited."""
    value = config.get("agents", {}).get("defaults", {}).get("timeoutSeconds")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OpenClawError(f"agents.defaults.timeoutSeconds: a number of seconds, got {value!r}")
    if value == 0:
        return None
    return float(value) + CLIENT_MARGIN_S
