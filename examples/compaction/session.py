"""The example session: planted evidence (a chart, an invoice, a note) followed by
topic-disjoint filler, as in a MIRAGE trunk before its first compaction."""

from __future__ import annotations

from runtime.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from runtime.session import AgentConfig, Session

CHART_TABLE = (
    "city,year,median_rent_eur\nBerlin,2019,1830\nBerlin,2023,2110\nMunich,2019,2240\n"
    "Hamburg,2019,1675"
)
INVOICE = (
    '{"invoice_number": "INV-2023-0042", "vendor": "Nordlicht GmbH", "total_eur": 4812.5, '
    '"due_date": "2023-11-30"}'
)
FILLER = [
    (
        "How should I structure retries for a flaky HTTP client in Python?",
        "Use exponential backoff with jitter, cap the delay, retry only idempotent requests, and "
        "log each attempt with its status code so failures can be traced.",
    ),
    (
        "What is a good way to pick a learning rate for fine-tuning a small transformer?",
        "Run a short learning-rate range test, pick a value about ten times below the point where "
        "the loss diverges, and use warmup followed by cosine decay.",
    ),
    (
        "Can you explain what a race condition is in two sentences?",
        "A race condition happens when the result depends on the timing of concurrent operations. "
        "Locks, atomic operations or message passing remove it.",
    ),
    (
        "How do I keep a pandas merge from silently duplicating rows?",
        "Pass validate='one_to_one' or 'many_to_one' to merge, and check the row count before and "
        "after the merge.",
    ),
]


def planted() -> list[Message]:
    chart = ImagePart(
        artifact_id="chart_3f9a1c20",
        path="artifacts/chart_3f9a1c20.png",
        text_representation="[chart: Median rent by city, 2015–2023]",
    )
    read_chart = ToolCall(
        id="call-2", name="artifact_get", arguments={"path": "derived/chart_3f9a1c20.table.csv"}
    )
    read_invoice = ToolCall(
        id="call-6", name="artifact_get", arguments={"path": "artifacts/invoice_2023_0042.json"}
    )
    return [
        UserMessage(
            content=(
                TextPart(
                    text="Here is the rent chart I mentioned; keep it for "
                    "when we compare cities later."
                ),
                chart,
            )
        ),
        AssistantMessage(content="I will read the chart's table.", tool_calls=(read_chart,)),
        ToolResultMessage(tool_call_id="call-2", name="artifact_get", content=CHART_TABLE),
        AssistantMessage(
            content="Stored: chart_3f9a1c20 shows Berlin at 1830 EUR in 2019 and "
            "2110 EUR in 2023; Munich 2240 EUR in 2019."
        ),
        UserMessage.text(
            "Also, the solar invoice from Nordlicht arrived. I prefer to pay "
            "invoices one week before the due date."
        ),
        AssistantMessage(content="Let me open it.", tool_calls=(read_invoice,)),
        ToolResultMessage(tool_call_id="call-6", name="artifact_get", content=INVOICE),
        AssistantMessage(
            content="Invoice INV-2023-0042 from Nordlicht GmbH totals 4812.5 EUR, "
            "due 2023-11-30, so you planned to pay it by 2023-11-23."
        ),
    ]


def filler(rounds: int) -> list[Message]:
    messages: list[Message] = []
    for index in range(rounds):
        question, answer = FILLER[index % len(FILLER)]
        messages += [UserMessage.text(question), AssistantMessage(content=answer)]
    return messages


def example_session(filler_rounds: int = 6, window: int = 8_192) -> Session:
    session = Session.new(AgentConfig(model="local/smollm2-135m"), context_window=window)
    for message in [*planted(), *filler(filler_rounds)]:
        session.append(message)
    return session
