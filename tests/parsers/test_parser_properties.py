"""Property tests: arbitrary and near-miss text never makes a parser raise, and every reply
gets a well-formed outcome."""

from __future__ import annotations

from typing import get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirage.wiring import default_tools
from runtime.parsers import FAMILIES, OutcomeLabel, get_parser, parse_reply
from runtime.parsers.validation import overall_label
from runtime.profiles import STYLE_OF_PARSER

DEFAULT_TOOLS = default_tools()

LABELS = set(get_args(OutcomeLabel))
MARKERS = [
    "<tool_call>",
    "</tool_call>",
    "<|python_tag|>",
    ";",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|action_start|>",
    "<|plugin|>",
    "<|action_end|>",
    "<function=",
    "<parameter=",
    "</parameter>",
    "</function>",
    "<|im_start|>tool\n",
    "<start_of_turn>",
    "<tool_code>",
    "<tool_response>",
    "Action: ",
    "\nAction Input: ",
    "```",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    '"',
    "'",
    ":",
    ",",
    "=",
    "\\",
    "\n",
    '{"name": ',
    '"arguments": ',
    '"parameters": ',
    "artifact_recall",
    "artifact_get",
    "artifact_recall(",
    'query="',
    "k=",
    "null",
    "true",
    "1e999",
    "-",
    "9" * 30,
]
near_miss_text = st.lists(
    st.one_of(st.sampled_from(MARKERS), st.text(max_size=12)), max_size=40
).map("".join)
any_text = st.one_of(st.text(max_size=400), near_miss_text)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_outcome(result_overall: str, labels: list[str]) -> None:
    assert result_overall in LABELS
    assert all(label in LABELS for label in labels)
    assert (result_overall == "no_call") == (not labels)


@SETTINGS
@given(text=any_text, family=st.sampled_from(FAMILIES), truncated=st.booleans())
def test_family_parsers_never_raise_and_always_label(
    text: str, family: str, truncated: bool
) -> None:
    result = get_parser(family).parse(text, DEFAULT_TOOLS, truncated=truncated)
    labels = [call.label for call in result.calls]
    _check_outcome(result.overall, labels)
    assert result.overall == overall_label(result.calls)
    assert "pseudo_tool" not in labels and "adapted" not in labels


@SETTINGS
@given(text=any_text, family=st.sampled_from(FAMILIES), adapters=st.booleans())
def test_parse_reply_never_raises_and_labels_consistently(
    text: str, family: str, adapters: bool
) -> None:
    result = parse_reply(text, DEFAULT_TOOLS, family=family, adapters=adapters)
    labels = [call.label for call in result.calls]
    _check_outcome(result.overall, labels)
    assert not any("parser error" in (call.error or "") for call in result.calls)
    if not adapters:
        assert "adapted" not in labels
    for call in result.executable_calls("p"):
        assert call.name in {"artifact_recall", "artifact_get"}


@SETTINGS
@given(
    query=st.text(max_size=60),
    k=st.integers(min_value=1, max_value=50),
    prose=st.text(alphabet=st.characters(blacklist_characters="<[{(`"), max_size=80),
)
def test_well_formed_hermes_call_survives_any_surrounding_prose(
    query: str, k: int, prose: str
) -> None:
    import json

    body = json.dumps({"name": "artifact_recall", "arguments": {"query": query, "k": k}})
    result = parse_reply(f"{prose}<tool_call>{body}</tool_call>", DEFAULT_TOOLS, family="hermes")
    assert result.overall == "ok"
    assert result.calls[0].arguments == {"query": query, "k": k}
    assert result.content == prose.strip()


@SETTINGS
@given(query=st.text(max_size=60), k=st.integers(min_value=1, max_value=50))
def test_pythonic_round_trip_of_any_string(query: str, k: int) -> None:
    from runtime.profiles import render_tool_call

    rendered = render_tool_call("pythonic", "artifact_recall", {"query": query, "k": k})
    result = parse_reply(rendered, DEFAULT_TOOLS, family="pythonic")
    assert result.overall == "ok", (rendered, result.model_dump())
    assert result.calls[0].arguments == {"query": query, "k": k}


WORD = st.text(alphabet=st.characters(whitelist_categories=("L", "Nd")), min_size=1, max_size=8)
MENTIONS = {
    "hermes": ["<tool_call> tags", "</tool_call>", "<function=name> elements"],
    "qwen3_xml": ["<tool_call> tags", "</tool_call>", "<function=name> elements"],
    "internlm": ["<|action_start|> marker", "<|action_end|>"],
    "pythonic": ["<|python_start|> token"],
    "json": ["<|eom_id|> token", "<|eot_id|>"],
    "mistral": ["[ARGS] token"],
}


@st.composite
def prose_with_mentions(draw: st.DrawFn, family: str) -> str:
    """Prose (any characters but brackets, quotes, backticks) that may mention the family's
    markers the way an agent writing about tool calls does."""
    plain = st.text(
        alphabet=st.characters(blacklist_characters="<>[]{}()\"'`", blacklist_categories=("Cs",)),
        max_size=30,
    )
    pieces = draw(st.lists(st.one_of(plain, st.sampled_from(MENTIONS[family])), max_size=5))
    return draw(WORD) + " " + " ".join(pieces) + " " + draw(WORD)


@SETTINGS
@given(data=st.data(), family=st.sampled_from(list(STYLE_OF_PARSER)))
def test_text_outside_a_real_call_is_kept_byte_for_byte(data: st.DataObject, family: str) -> None:
    from runtime.profiles import render_tool_call

    before = data.draw(prose_with_mentions(family)).strip()
    after = data.draw(prose_with_mentions(family)).strip()
    call = render_tool_call(STYLE_OF_PARSER[family], "artifact_get", {"ref": "r.pdf"})
    result = parse_reply(f"{before}\n{call}\n{after}", DEFAULT_TOOLS, family=family)
    assert [c.label for c in result.calls] == ["ok"], result.model_dump()
    assert result.content == f"{before}\n\n{after}"


MARKERS_IN_VALUES = [
    "<tool_call>",
    "</tool_call>",
    "<function=artifact_get>",
    "</function>",
    "<parameter=note>",
    "</parameter>",
    "<|action_start|>",
    "<|action_end|>",
    "[TOOL_CALLS]",
    "<|python_tag|>",
]


@SETTINGS
@given(
    family=st.sampled_from(["hermes", "qwen3_xml", "internlm", "mistral", "json"]),
    pieces=st.lists(st.tuples(st.sampled_from(MARKERS_IN_VALUES), WORD), max_size=4),
    first=WORD,
)
def test_markers_written_inside_a_value_stay_in_the_value(
    family: str, pieces: list[tuple[str, str]], first: str
) -> None:
    """An agent writing about tool calls puts markers into argument values; the call must
    neither split nor lose them."""
    from runtime.profiles import render_tool_call

    query = first + "".join(f" {marker}{word}" for marker, word in pieces)
    rendered = render_tool_call(STYLE_OF_PARSER[family], "artifact_recall", {"query": query})
    result = parse_reply(f"Searching.\n{rendered}\nDone.", DEFAULT_TOOLS, family=family)
    assert [c.label for c in result.calls] == ["ok"], (rendered, result.model_dump())
    assert result.calls[0].arguments == {"query": query}
    assert result.content == "Searching.\n\nDone."


@SETTINGS
@given(
    query=st.text(max_size=30),
    k=st.integers(min_value=1, max_value=50),
    where=st.integers(min_value=1),
    stray=st.sampled_from([")", "]", "}", "'", '"']),
)
def test_a_complete_pythonic_list_is_never_truncated(
    query: str, k: int, where: int, stray: str
) -> None:
    """One stray closer or quote anywhere in a finished call list followed by prose makes it
    malformed at most: the reply did not end inside the call."""
    from runtime.profiles import render_tool_call

    rendered = render_tool_call("pythonic", "artifact_recall", {"query": query, "k": k})
    position = 1 + where % (len(rendered) - 1)
    text = rendered[:position] + stray + rendered[position:] + "\nDone."
    result = parse_reply(text, DEFAULT_TOOLS, family="pythonic")
    assert "truncated" not in [c.label for c in result.calls], (text, result.model_dump())
    assert result.content.endswith("Done.")
