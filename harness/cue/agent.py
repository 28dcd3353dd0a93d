"""An agent we did not write as a CUE memory system, through the kit's agent adapters.

Above: ``CueSystem`` (systems.py) for a condition whose system has ``kind: agent``. Below: the
kit's adapter factory (``harness.kit.agents.factory``: ``openai:URL`` — an OpenAI-compatible
endpoint; ``cmd:PATH`` — one JSON request on stdin, one reply on stdout; docs/own_agent.md) and
the memory server.

The adapters restore a ``RestorePoint`` for each probe. A CUE question has no conversation to
restore, so each profile gets the restore point of an empty session (the kit's
``save_session_point``) whose system prompt says where the memory is; the history is reachable
only through the memory server at the question's own tagged URL (``X-Mirage-Memory-Url`` /
``MIRAGE_MEMORY_URL``). What the agent retrieved is read back from the server's call log: the
``artifact_recall`` hits logged under the question's tag, from the byte offset the log had when
the question started (so a resumed run never counts old calls).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.cue.answer import question_block
from harness.cue.config import AgentSpec
from harness.cue.records import CueUsage
from harness.cue.responder import ProfileRun, Response, ranked_rounds
from harness.cue.schema import Question
from harness.kit.agents.base import ProbeReply
from harness.kit.agents.factory import external_adapter
from harness.kit.agents.restore import SessionPoint, save_session_point
from harness.kit.attribution import log_size, read_calls_from
from runtime.session import AgentConfig, Session
from runtime.tokens import count_tokens

AGENT_WINDOW = 32_768
API_KEY_ENV = "MIRAGE_AGENT_API_KEY"


def agent_system_prompt(name: str) -> str:
    return (
        f"You are {name}'s personal assistant. Your memory of earlier conversations with {name} "
        "is in the memory server: the artifact_recall tool searches it, and each hit is one "
        f"conversation round. Answer multiple-choice questions about {name} from that memory."
    )


def profile_checkpoint(directory: Path, profile: ProfileRun) -> SessionPoint:
    """The restore point of an empty session carrying the agent's system prompt (one per
    profile), saved in ``directory``."""
    config = AgentConfig(model="agent-under-test", system_prompt=agent_system_prompt(profile.name))
    session = Session.new(config, AGENT_WINDOW, session_id=f"cue-{profile.profile_id}")
    return save_session_point(directory, session)


class AgentMemory:
    def __init__(
        self,
        spec: AgentSpec,
        served: tuple[Any, dict[str, str], Path],
        profile: ProfileRun,
        checkpoint_dir: Path,
    ) -> None:
        endpoint, self.rounds, self.call_log = served
        self.units = {u.round_id: u for u in profile.units}
        self.adapter = external_adapter(
            spec.agent,
            model=spec.agent_model,
            api_key=os.environ.get(API_KEY_ENV),
            timeout_s=spec.timeout_s,
            memory_url=endpoint.tagged_url,
        )
        self.checkpoint = profile_checkpoint(checkpoint_dir, profile)

    async def respond(self, question: Question, tag: str) -> Response:
        offset = log_size(self.call_log)
        reply: ProbeReply = await self.adapter.probe(
            self.checkpoint, question_block(question), tag=tag
        )
        calls, _ = read_calls_from(self.call_log, offset)
        hits = [h for c in calls if c.tag == tag and c.tool == "artifact_recall" for h in c.hits]
        ranked = ranked_rounds(hits, self.rounds)
        usage = CueUsage(
            input_tokens=reply.usage.eit,
            output_tokens=reply.usage.output_tokens,
            cached_tokens=reply.usage.cached_tokens,
        )
        return Response(
            text=reply.text,
            error=reply.error,
            ranked=ranked,
            in_context=ranked,
            memory_tokens=sum(count_tokens(self.units[r].text) for r in ranked),
            usage=usage,
            latency_s=reply.latency_s,
        )

    async def aclose(self) -> None:
        await self.adapter.aclose()
