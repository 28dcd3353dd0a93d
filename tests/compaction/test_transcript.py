"""Where the verbatim tail starts: within budget, never inside a tool block; how messages are
rendered for a summarizer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcript import (
    SUMMARY_MARKER,
    previous_summary,
    render_message,
    summary_message,
    tail_start,
)
from runtime.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def _block(kind: int, index: int, results: int) -> list[Message]:
    if kind == 0:
        return [UserMessage.text(f"user {index}")]
    if kind == 1:
        return [AssistantMessage(content=f"reply {index}")]
    calls = tuple(ToolCall(id=f"c{index}-{n}", name="lookup") for n in range(results))
    return [
        AssistantMessage(content="", tool_calls=calls),
        *(ToolResultMessage(tool_call_id=call.id, name="lookup", content="r") for call in calls),
    ]


@settings(max_examples=100, deadline=None)
@given(
    blocks=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3)), min_size=1, max_size=25),
    sizes=st.lists(st.integers(1, 400), min_size=100, max_size=100),
    keep=st.integers(0, 3_000),
)
def test_tail_never_starts_inside_a_tool_block(
    blocks: list[tuple[int, int]], sizes: list[int], keep: int
) -> None:
    messages = [m for i, (kind, n) in enumerate(blocks) for m in _block(kind, i, n)]
    tokens = sizes[: len(messages)]
    start = tail_start(tokens, messages, keep)
    tail = messages[start:]
    offered = {c.id for m in tail if isinstance(m, AssistantMessage) for c in m.tool_calls}
    answered = [m.tool_call_id for m in tail if isinstance(m, ToolResultMessage)]
    assert set(answered) <= offered
    longest = len(messages)
    while longest > 0 and sum(tokens[longest - 1 :]) <= keep:
        longest -= 1
    assert start <= longest
    if start < longest:  # moved earlier only over the results of one tool block
        assert isinstance(messages[start], AssistantMessage) and messages[start].tool_calls
        assert all(isinstance(m, ToolResultMessage) for m in messages[start + 1 : longest + 1])


def test_tail_moves_earlier_to_keep_the_call_with_its_results() -> None:
    call = ToolCall(id="c1", name="lookup")
    messages: list[Message] = [
        UserMessage.text("q"),
        AssistantMessage(tool_calls=(call,)),
        ToolResultMessage(tool_call_id="c1", name="lookup", content="r"),
        AssistantMessage(content="a"),
    ]
    assert tail_start([10, 10, 10, 10], messages, keep=25) == 1
    assert tail_start([10, 10, 10, 10], messages, keep=40) == 0
    assert tail_start([10, 10, 10, 10], messages, keep=5) == 4


def test_summary_message_round_trip() -> None:
    message = summary_message("## Goal\nfind rent\n")
    assert message.plain_text.startswith(SUMMARY_MARKER)
    assert previous_summary(message) == "## Goal\nfind rent"
    assert previous_summary(UserMessage.text("hello")) is None
    assert previous_summary(AssistantMessage(content=SUMMARY_MARKER)) is None


def test_render_keeps_ids_paths_and_image_references() -> None:
    call = ToolCall(id="call-7", name="artifact_get", arguments={"path": "derived/x.csv"})
    image = ImagePart(
        artifact_id="chart_3f9a1c20",
        path="artifacts/chart_3f9a1c20.png",
        text_representation="city,rent\nBerlin,1830",
    )
    messages: list[Message] = [
        UserMessage(content=(TextPart(text="see chart"), image)),
        AssistantMessage(content="checking", tool_calls=(call,)),
        ToolResultMessage(
            tool_call_id="call-7", name="artifact_get", content="Berlin,1830", is_error=False
        ),
    ]
    user, assistant, result = (render_message(message) for message in messages)
    assert user.startswith("USER: see chart")
    assert "artifact_id=chart_3f9a1c20 path=artifacts/chart_3f9a1c20.png" in user
    assert 'ASSISTANT TOOL CALL call-7: artifact_get({"path": "derived/x.csv"})' in assistant
    assert result == "TOOL RESULT call-7 from artifact_get: Berlin,1830"


def test_an_absolute_image_path_reaches_the_summarizer_as_its_file_name_only() -> None:
    """Two installs of one pack (its images inside each install's package folder) send the
    summarizer the same text."""
    rendered = {
        render_message(
            UserMessage(
                content=(
                    TextPart(text="keep this chart"),
                    ImagePart(artifact_id="chart_3f9a1c20", path=f"{root}/chart_3f9a1c20.png"),
                )
            )
        )
        for root in ("/work/main/harness/mirage/packs/data", "/tmp/venv/lib/site-packages/x")
    }
    image = "[image artifact_id=chart_3f9a1c20 file=chart_3f9a1c20.png]"
    assert rendered == {f"USER: keep this chart\n{image}"}
