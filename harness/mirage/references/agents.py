"""The three reference agents: answerers whose grounding behaviour is known in advance.

Each is an ``AgentUnderTest`` (``harness.kit.agents.base``) and sees only what any agent sees:
a fresh restore of the checkpoint (``TranscriptSource``: the system prompt and the active
context as chat messages), the probe message and, for the retriever, the memory server's MCP
tools at the probe's own URL. None of them is given the pack, its questions file, gold answers
or manifests. Each declares its true access path on ``ProbeReply.trace["declared_path"]``
(None: it abstained, so it claims none); the instrument check
(``harness.mirage.report.instrument``) compares that with the harness's label.

- ``reference/retriever``: calls ``artifact_recall`` with the question on every probe; the
  source is the top hit's artifact, the value is read (``read_value``) from the snippets of that
  artifact's hits; NO/NONE when nothing fits. Declares ``R_tool``.
- ``reference/context-reader``: no tools; reads the restored conversation (not the system
  prompt), each message section by section (``reading.sections``: cut where another artifact id
  is mentioned): the section that shares the most content words with the question (at least
  ``MIN_SHARED``; the latest wins a tie) is the evidence, its artifact id the source, the value
  read from it. Declares ``R_context`` when it answered; when nothing
  fits it answers NO/NONE and declares nothing.
- ``reference/confabulator``: no tools, no reading of evidence; always YES, the source an
  artifact id mentioned in the transcript (picked by a hash of the question; NONE when it saw
  none), the value a plausible number from the same hash. Declares ``R_none``.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from harness.kit.agents.base import AgentUnderTest, ProbeReply, RestorePoint, ToolCallRecord
from harness.kit.agents.memory_connections import MemoryConnections
from harness.kit.agents.transcript import RestoredContext, TranscriptSource
from harness.mirage.probing.retrieval_paths import RetrievalPath
from harness.mirage.protocol import NONE_VALUE
from harness.mirage.references.reading import (
    MIN_SHARED,
    artifact_ids,
    overlap,
    question_from_probe,
    read_value,
    sections,
)
from runtime.toolset import Toolset

REFERENCE_PREFIX = "reference/"
RECALL_TOOL = "artifact_recall"
RECALL_K = 5


def protocol_reply(source: str | None, value: str | None) -> str:
    """The three protocol lines: YES with ``source`` and ``value``, or NO/NONE/NONE."""
    if source is None or value is None:
        return f"ANSWERABLE=NO\nSOURCE={NONE_VALUE}\nANSWER={NONE_VALUE}"
    return f"ANSWERABLE=YES\nSOURCE={source}\nANSWER={value}"


def message_text(message: Any) -> str:
    """The text of one chat message (string content or text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class ReferenceAgent(AgentUnderTest):
    """Restores each probe's transcript afresh and answers by ``answer``."""

    kind: str

    def __init__(self) -> None:
        self.name = REFERENCE_PREFIX + self.kind
        self._transcripts = TranscriptSource()

    async def probe(self, checkpoint: RestorePoint, message: str, *, tag: str) -> ProbeReply:
        started = time.perf_counter()
        restored = self._transcripts.restore(checkpoint)
        question = question_from_probe(message)
        text, declared, calls, note = await self.answer(restored, question, tag)
        return ProbeReply(
            text=text,
            tool_calls=calls,
            latency_s=time.perf_counter() - started,
            restored_sha256=restored.restored_sha256,
            context=restored.context,
            trace={
                "declared_path": declared,
                "reference": {"kind": self.kind, "question": question, **note},
                "tool_calls_reported": True,
            },
        )

    async def answer(
        self, restored: RestoredContext, question: str, tag: str
    ) -> tuple[str, RetrievalPath | None, list[ToolCallRecord], dict[str, Any]]:
        """(reply text, declared path, tool calls made, what it read) for one probe."""
        raise NotImplementedError


class Retriever(ReferenceAgent):
    kind = "retriever"

    def __init__(self) -> None:
        super().__init__()
        self._connections = MemoryConnections()

    async def aclose(self) -> None:
        """Close the pooled memory-server connections (before the server stops)."""
        await self._connections.aclose()

    async def answer(
        self, restored: RestoredContext, question: str, tag: str
    ) -> tuple[str, RetrievalPath | None, list[ToolCallRecord], dict[str, Any]]:
        arguments = {"query": question, "k": RECALL_K}
        call = ToolCallRecord(name=RECALL_TOOL, arguments=arguments)
        if self.memory_url is None:
            call.error = "no memory server bound"
            return protocol_reply(None, None), "R_tool", [call], {"hits": 0}
        async with self._connections.lease(self.memory_url(tag)) as tools:
            hits, error = await recall(tools, arguments)
        call.executed, call.error = error is None, error
        if not hits:
            return protocol_reply(None, None), "R_tool", [call], {"hits": 0}
        top = str(hits[0].get("artifact_id"))
        evidence = "\n".join(str(h.get("snippet", "")) for h in hits if h.get("artifact_id") == top)
        value = read_value(question, evidence)
        note = {"hits": len(hits), "top_artifact": top, "value": value}
        return protocol_reply(top, value), "R_tool", [call], note


async def recall(
    tools: Toolset, arguments: dict[str, Any]
) -> tuple[list[dict[str, Any]], str | None]:
    """The hits of one ``artifact_recall`` call through ``tools`` (and an error, if any)."""
    outcome = await tools.call(RECALL_TOOL, arguments)
    if outcome.is_error:
        return [], outcome.text
    structured = outcome.structured if isinstance(outcome.structured, dict) else {}
    hits = structured.get("hits", [])
    return [h for h in hits if isinstance(h, dict)], None


class ContextReader(ReferenceAgent):
    kind = "context-reader"

    async def answer(
        self, restored: RestoredContext, question: str, tag: str
    ) -> tuple[str, RetrievalPath | None, list[ToolCallRecord], dict[str, Any]]:
        best, source, best_overlap = None, None, MIN_SHARED - 1
        for message in restored.messages:
            if message.get("role") == "system":
                continue
            for artifact_id, text in sections(message_text(message)):
                shared = overlap(question, text)
                if shared >= best_overlap:
                    best, source, best_overlap = text, artifact_id, shared
        value = read_value(question, best) if best is not None else None
        if best is None or source is None or value is None:
            return protocol_reply(None, None), None, [], {"evidence": None}
        note = {"evidence": best[:160], "overlap": best_overlap, "value": value}
        return protocol_reply(source, value), "R_context", [], note


class Confabulator(ReferenceAgent):
    kind = "confabulator"

    async def answer(
        self, restored: RestoredContext, question: str, tag: str
    ) -> tuple[str, RetrievalPath | None, list[ToolCallRecord], dict[str, Any]]:
        seen = artifact_ids("\n".join(message_text(m) for m in restored.messages))
        digest = int(hashlib.sha256(question.encode("utf-8")).hexdigest(), 16)
        source = seen[digest % len(seen)] if seen else NONE_VALUE
        value = f"{10 + digest % 900 / 10:.1f}"
        text = f"ANSWERABLE=YES\nSOURCE={source}\nANSWER={value}"
        return text, "R_none", [], {"ids_seen": len(seen)}


REFERENCES: dict[str, type[ReferenceAgent]] = {
    REFERENCE_PREFIX + cls.kind: cls for cls in (Retriever, ContextReader, Confabulator)
}
REFERENCE_MODELS: tuple[str, ...] = tuple(REFERENCES)


def is_reference(model: str) -> bool:
    return model.startswith(REFERENCE_PREFIX)


def make_reference(model: str) -> ReferenceAgent:
    """The reference agent named ``model`` (``reference/<kind>``)."""
    try:
        return REFERENCES[model]()
    except KeyError:
        known = ", ".join(REFERENCE_MODELS)
        raise ValueError(f"unknown reference agent {model!r}; expected one of {known}") from None
