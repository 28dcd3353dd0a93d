"""The four-way retrieval path against the authors' released classifier
(prisma-research/MIRAGE ``scorers/axis1_rpath.py``, ``constants/exp_constants.py``).

Each case gives the probe's inputs, the label mirage assigns and the label the released code
gives for the same inputs; they differ exactly where ``docs/metrics.md`` lists a departure
(R1-R7), named in the case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from compaction.transcript import summary_message
from harness.mirage.probing.retrieval_paths import (
    BootItem,
    ContextMessage,
    ProbeCall,
    RetrievalPath,
    boot_from_chat,
    classify_path,
    context_from_chat,
    context_from_messages,
)
from runtime.messages import AssistantMessage, ImagePart, ToolCall, ToolResultMessage, UserMessage

ID = "chart_3f9a1c20"
KEYWORDS = ["Revenue", "Q3", "2025"]
PLANTED = f"Saved. I've filed it in your workspace as {ID}."


def user(text: str) -> ContextMessage:
    return ContextMessage(role="user", text=text)


def assistant(text: str) -> ContextMessage:
    return ContextMessage(role="assistant", text=text)


def ran(name: str, result: str | None = None, **arguments: Any) -> ProbeCall:
    return ProbeCall(name=name, arguments=arguments, executed=True, result_text=result)


SYSTEM = BootItem(source="system_prompt", text="You are a helpful assistant. Be concise.")


@dataclass(frozen=True)
class Case:
    name: str
    ours: RetrievalPath
    released: RetrievalPath
    active: list[ContextMessage] | None = None
    boot: list[BootItem] = field(default_factory=lambda: [SYSTEM])
    calls: list[ProbeCall] = field(default_factory=list)
    keywords: list[str] = field(default_factory=lambda: list(KEYWORDS))
    departure: str | None = None


# fmt: off
CASES = [
    # -- R_context: content keywords, min(2, n), no retrieval call --------------------------
    Case("two of three keywords in one turn", "R_context", "R_context",
         [user(PLANTED), assistant("Revenue rose in Q3.")]),
    Case("keywords spread over two turns count together", "R_context", "R_context",
         [user("the Revenue line"), assistant("and Q3 was the peak")]),
    Case("the id alone is not content", "R_none", "R_none",
         [user(PLANTED), assistant(f"I filed {ID} for you.")]),
    Case("the id plus one keyword is below min(2, 3)", "R_none", "R_none",
         [user(PLANTED), assistant("Revenue was discussed.")]),
    Case("one keyword repeated is one distinct keyword", "R_none", "R_none",
         [assistant("Revenue, Revenue and more Revenue.")]),
    Case("n = 1: one keyword is the threshold", "R_context", "R_context",
         [assistant("The Revenue chart.")], keywords=["Revenue"]),
    Case("n = 2: both keywords are needed", "R_none", "R_none",
         [assistant("The Revenue chart.")], keywords=["Revenue", "Q3"]),
    Case("n = 0: no keywords never gives R_context", "R_none", "R_none",
         [user(PLANTED), assistant("Revenue rose in Q3.")], keywords=[]),
    Case("the compaction summary is part of the active context", "R_context", "R_context",
         [ContextMessage(role="user", text="Summary: Q3 Revenue up 12%", summary=True)]),
    Case("an empty active context", "R_none", "R_none", []),
    Case("unreported active context is never R_context", "R_none", "R_none", None),
    Case("a non-retrieval tool does not take R_context away", "R_context", "R_context",
         [assistant("Revenue rose in Q3.")], calls=[ran("web_search", query="weather")]),
    # -- R_context is ruled out by a retrieval call -----------------------------------------
    Case("artifact_recall with the content in context is R_tool", "R_tool", "R_tool",
         [assistant("Revenue rose in Q3.")], calls=[ran("artifact_recall", query="revenue")]),
    Case("memory_search with the content in context is R_tool", "R_tool", "R_tool",
         [assistant(f"Chart saved: {ID}. Revenue in Q3.")], calls=[ran("memory_search")]),
    # -- R_boot: id or any keyword in start-of-session material, case-insensitive ------------
    Case("a keyword in a memory file injected at start", "R_boot", "R_boot",
         boot=[SYSTEM, BootItem(source="MEMORY.md", text="Previous session: revenue figures.")]),
    Case("the id in the system prompt", "R_boot", "R_boot",
         boot=[BootItem(source="system_prompt", text=f"Memory: [{ID}] a chart.")]),
    Case("the id in a bootstrap file", "R_boot", "R_boot",
         boot=[SYSTEM, BootItem(source="MEMORY.md", text=f"# MEMORY\n- [{ID}]: a chart")]),
    Case("a keyword in a startup tool result", "R_boot", "R_boot",
         boot=[SYSTEM, BootItem(source="memory_search", text="Q3 figures from last session")]),
    Case("boot matching ignores case", "R_boot", "R_boot",
         boot=[BootItem(source="MEMORY.md", text="previous context: REVENUE data")]),
    Case("a generic system prompt is not boot access", "R_none", "R_none"),
    Case("no start-of-session material at all", "R_none", "R_none", boot=[]),
    Case("n = 0: the id still gives R_boot", "R_boot", "R_boot",
         boot=[BootItem(source="MEMORY.md", text=f"{ID}: saved chart")], keywords=[]),
    # -- priority order -----------------------------------------------------------------------
    Case("R_context beats R_boot", "R_context", "R_context",
         [assistant("The Revenue figures for Q3.")],
         boot=[BootItem(source="MEMORY.md", text=f"MEMORY.md: {ID}")]),
    Case("R_boot beats R_tool", "R_boot", "R_boot",
         boot=[BootItem(source="MEMORY.md", text=f"MEMORY.md content: {ID}")],
         calls=[ran("memory_search")]),
    Case("retrieval takes R_context away, then R_boot wins", "R_boot", "R_boot",
         [assistant("Revenue rose in Q3.")],
         boot=[BootItem(source="MEMORY.md", text=f"{ID}")], calls=[ran("artifact_recall")]),
    # -- R_tool: retrieval tools, memory-path reads, results naming the id --------------------
    Case("artifact_recall", "R_tool", "R_tool", calls=[ran("artifact_recall", query="chart")]),
    Case("memory_search", "R_tool", "R_tool", calls=[ran("memory_search", query="chart")]),
    Case("memory_get", "R_tool", "R_tool", calls=[ran("memory_get", path="notes.md")]),
    Case("memory_recall", "R_tool", "R_tool", calls=[ran("memory_recall")]),
    Case("artifact_get (the memory server's read)", "R_tool", "R_none",
         calls=[ran("artifact_get", path=f"derived/{ID}.table.csv")],
         departure="R8"),
    Case("read of MEMORY.md", "R_tool", "R_tool", calls=[ran("read", path="MEMORY.md")]),
    Case("read of a dated note", "R_tool", "R_tool",
         calls=[ran("read", path="memory/2026-03-27.md")]),
    Case("read of BOOTSTRAP.md", "R_tool", "R_tool", calls=[ran("read", path="BOOTSTRAP.md")]),
    Case("read of USER.md", "R_tool", "R_tool", calls=[ran("read", path="/ws/USER.md")]),
    Case("read of a file outside memory", "R_none", "R_none",
         calls=[ran("read", path="src/app.py")]),
    Case("a tool result naming the id", "R_tool", "R_tool",
         calls=[ran("exec", result=f"found {ID} in the workspace", command="ls")]),
    Case("a tool result not naming the id", "R_none", "R_none",
         calls=[ran("exec", result="total 0", command="ls")]),
    Case("irrelevant tool calls", "R_none", "R_none",
         calls=[ran("web_search", query="weather"), ran("exec", command="ls")]),
    # -- departures -----------------------------------------------------------------------------
    Case("a keyword in the agent's own instructions is no access path", "R_none", "R_boot",
         boot=[BootItem(source="system_prompt", text="Previous session: revenue figures.")],
         departure="R9"),
    Case("a keyword in OpenClaw's IDENTITY.md template is no access path", "R_none", "R_boot",
         boot=[SYSTEM, BootItem(source="IDENTITY.md", text="Services: revenue dashboards.")],
         departure="R9"),
    Case("a generic keyword in the instructions, the content in context", "R_context", "R_boot",
         [user(PLANTED), assistant("Revenue rose in Q3.")],
         boot=[BootItem(source="system_prompt", text="Help with Revenue questions.")],
         departure="R9"),
    Case("R1: a retrieval call that never ran gives no access", "R_context", "R_tool",
         [assistant("Revenue rose in Q3.")],
         calls=[ProbeCall(name="artifact_recall", executed=False, label="malformed")],
         departure="R1"),
    Case("R1: only a call that never ran", "R_none", "R_tool",
         calls=[ProbeCall(name="memory_search", executed=False, label="not_executable")],
         departure="R1"),
    Case("R1: a call that ran and failed still counts", "R_tool", "R_tool",
         calls=[ProbeCall(name="artifact_recall", executed=True, error="unknown reference")]),
    Case("R2: a memory read takes R_context away", "R_tool", "R_context",
         [assistant("Revenue rose in Q3.")], calls=[ran("read", path="MEMORY.md")],
         departure="R2"),
    Case("R3: context keywords ignore case", "R_context", "R_none",
         [assistant("REVENUE rose in q3.")], departure="R3"),
    Case("R3: a number keyword is a whole token", "R_none", "R_context",
         [assistant("Sales were 141.25 against 20190 units.")], keywords=["41.2", "2019"],
         departure="R3"),
    Case("R3: an id inside a longer id is not the id", "R_none", "R_tool",
         calls=[ran("exec", result=f"{ID}0 and {ID}-old")], departure="R3"),
    Case("R3: an id in a result ignores case", "R_tool", "R_none",
         calls=[ran("exec", result=f"see {ID.upper()}")], departure="R3"),
    Case("R4: the artifact's image in the context", "R_context", "R_none",
         [ContextMessage(role="user", text="Here is the chart.", images=(ID,))], departure="R4"),
    Case("R4: another artifact's image is not this one", "R_none", "R_none",
         [ContextMessage(role="user", text="Here is a chart.", images=("chart_other",))]),
    Case("R5: keywords in a tool result of the context", "R_context", "R_none",
         [ContextMessage(role="tool", text="Revenue Q3: 4.2M")], departure="R5"),
    Case("R7: the id listed as a keyword is not content", "R_none", "R_context",
         [assistant(f"Filed {ID}; Revenue noted.")], keywords=[ID, "Revenue", "Q3"],
         departure="R7"),
]
# fmt: on


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_label(case: Case) -> None:
    path, evidence = classify_path(
        ID, case.keywords, active=case.active, boot=case.boot, calls=case.calls
    )
    assert path == case.ours, evidence.reason
    assert evidence.reason.startswith(path)


def test_labels_differ_from_the_released_ones_only_at_listed_departures() -> None:
    assert len(CASES) >= 30
    undeclared = [c.name for c in CASES if (c.ours != c.released) != (c.departure is not None)]
    assert undeclared == []
    labels = {case.ours for case in CASES}
    assert labels == {"R_context", "R_boot", "R_tool", "R_none"}


def test_evidence_says_where_each_keyword_and_call_was_found() -> None:
    active = [
        user(PLANTED),
        ContextMessage(role="user", text="Summary: Revenue grew", summary=True),
        assistant("in Q3, Revenue was 4.2M"),
    ]
    calls = [
        ProbeCall(name="artifact_recall", executed=False, label="malformed"),
        ran("exec", command="ls", result="nothing"),
    ]
    path, evidence = classify_path(ID, KEYWORDS, active=active, boot=[SYSTEM], calls=calls)
    assert path == "R_context"
    context = evidence.context
    assert context is not None
    assert (context.verbatim, context.summary) == (["Revenue", "Q3"], ["Revenue"])
    assert [(h.keyword, h.message, h.summary) for h in context.hits] == [
        ("Revenue", 1, True),
        ("Revenue", 2, False),
        ("Q3", 2, False),
    ]
    assert evidence.threshold == 2 and evidence.keywords == KEYWORDS
    assert [(c.retrieval, c.reason) for c in evidence.calls] == [
        (False, "not executed (malformed): no access"),
        (False, "exec is not a retrieval tool"),
    ]
    assert evidence.reason == (
        "R_context: 2 of 3 content keywords in the active context (need 2); no retrieval call"
    )


def test_evidence_of_r_tool_and_r_none_names_the_deciding_facts() -> None:
    _, tool = classify_path(
        ID, KEYWORDS, active=[assistant("Revenue")], calls=[ran("read", path="memory/a.md")]
    )
    assert tool.reason == (
        "R_tool: call 0: read of memory path memory/a.md; "
        "1 of 3 content keywords in the active context (need 2)"
    )
    _, none = classify_path(ID, KEYWORDS, active=None)
    assert none.context is None
    assert none.reason == (
        "R_none: active context not reported; not in the start-of-session material; "
        "no retrieval call"
    )
    _, boot = classify_path(ID, KEYWORDS, active=[], boot=[BootItem(source="MEMORY.md", text=ID)])
    assert boot.boot[0].model_dump() == {"source": "MEMORY.md", "term": ID, "kind": "id"}


def test_calls_build_from_the_records_agents_return() -> None:
    from harness.kit.agents.base import ToolCallRecord

    record = ToolCallRecord(name="artifact_recall", arguments={"query": "q"}, executed=True)
    call = ProbeCall.model_validate(record, from_attributes=True)
    assert classify_path(ID, KEYWORDS, active=[], calls=[call])[0] == "R_tool"


def test_chat_messages_as_an_openai_endpoint_sends_them() -> None:
    """OpenClaw-style list content, tool calls and a system prompt, through the converters."""
    chat: list[dict[str, Any]] = [
        {"role": "system", "content": f"Bootstrap: {ID}"},
        {"role": "user", "content": [{"type": "text", "text": PLANTED}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"function": {"name": "artifact_recall", "arguments": '{"query": "Q3 Revenue"}'}}
            ],
        },
        {"role": "tool", "content": "nothing found"},
    ]
    active = context_from_chat(chat)
    assert [m.role for m in active] == ["user", "assistant", "tool"]
    assert classify_path(ID, KEYWORDS, active=active)[0] == "R_context"
    boot = boot_from_chat(chat)
    assert classify_path(ID, KEYWORDS, active=active[:1], boot=boot)[0] == "R_boot"
    summary = context_from_chat(
        [{"role": "user", "content": summary_message("Q3 Revenue").plain_text}]
    )
    assert summary[0].summary


def test_runtime_messages_give_images_summaries_calls_and_results() -> None:
    call = ToolCall(id="c1", name="artifact_get", arguments={"path": "x"})
    messages = [
        summary_message("Earlier: Revenue grew"),
        UserMessage(content=(ImagePart(path="a.png", artifact_id=ID, text_representation="Q3"),)),
        AssistantMessage(content="Looking.", tool_calls=(call,)),
        ToolResultMessage(tool_call_id="c1", name="artifact_get", content="2025 totals"),
    ]
    context = context_from_messages(messages)
    assert [(m.role, m.summary, m.images) for m in context] == [
        ("user", True, ()),
        ("user", False, (ID,)),
        ("assistant", False, ()),
        ("tool", False, ()),
    ]
    assert "artifact_get" in context[2].text and context[1].text == "Q3"
    path, evidence = classify_path(ID, KEYWORDS, active=context)
    assert path == "R_context" and evidence.context is not None
    assert evidence.context.images == [1]
    assert evidence.context.verbatim == ["Q3", "2025"] and evidence.context.summary == ["Revenue"]
