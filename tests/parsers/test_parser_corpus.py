"""A corpus of real-format backbone replies per family with the labels they must get: our own
cases below, and cases borrowed from peers' parser test suites in ``corpus/*.yaml``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from corpus_tools import DEFAULT_TOOLS, PEER_TOOLS
from pydantic import BaseModel, ConfigDict, model_validator

from runtime.parsers import parse_reply


class Case(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    family: str
    text: str
    overall: str
    labels: tuple[str, ...]
    names: tuple[str | None, ...] | None = None
    arguments: tuple[dict[str, Any], ...] | None = None
    content: str | None = None
    adapters: bool = False
    truncated: bool = False
    tools: str | None = None
    """A peer tool set from ``corpus_tools.PEER_TOOLS``; default: the retrieval tools."""
    source: str | None = None
    """Where a borrowed case comes from: repository, file and test (or issue / pull request)."""
    note: str | None = None
    """Why our outcome deliberately differs from the peer's."""

    @model_validator(mode="after")
    def _known_tools(self) -> Case:
        if self.tools is not None and self.tools not in PEER_TOOLS:
            raise ValueError(f"{self.id}: unknown tool set {self.tools!r}")
        return self


CORPUS_DIR = Path(__file__).parent / "corpus"


def load_borrowed() -> tuple[Case, ...]:
    """The peer cases of every ``corpus/<family>.yaml``."""
    cases = []
    for path in sorted(CORPUS_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        cases += [Case(family=data["family"], **case) for case in data["cases"]]
    return tuple(cases)


BORROWED = load_borrowed()


RECALL = '{"name": "artifact_recall", "arguments": {"query": "Q3 revenue"}}'

CASES: tuple[Case, ...] = (
    # --- hermes ---------------------------------------------------------------------------
    Case(
        id="hermes-one",
        family="hermes",
        text=f"<tool_call>\n{RECALL}\n</tool_call>",
        overall="ok",
        labels=("ok",),
        names=("artifact_recall",),
        arguments=({"query": "Q3 revenue"},),
        content="",
    ),
    Case(
        id="hermes-prose-around",
        family="hermes",
        text=f"I will search your files.\n<tool_call>\n{RECALL}\n</tool_call>\nOne moment.",
        overall="ok",
        labels=("ok",),
        content="I will search your files.\n\nOne moment.",
    ),
    Case(
        id="hermes-parallel-blocks",
        family="hermes",
        text=f"<tool_call>\n{RECALL}\n</tool_call>\n<tool_call>\n"
        '{"name": "artifact_get", "arguments": {"ref": "report.pdf", "start_line": 10.0}}\n'
        "</tool_call>",
        overall="ok",
        labels=("ok", "ok"),
        names=("artifact_recall", "artifact_get"),
        arguments=({"query": "Q3 revenue"}, {"ref": "report.pdf", "start_line": 10}),
    ),
    Case(
        id="hermes-smollm-list",
        family="hermes",
        text='<tool_call>[{"name": "artifact_recall", "arguments": {"query": "invoice"}}, '
        '{"name": "artifact_get", "arguments": {"ref": "inv-7"}}]</tool_call>',
        overall="ok",
        labels=("ok", "ok"),
    ),
    Case(
        id="hermes-one-bad-block-keeps-good",
        family="hermes",
        text=f"<tool_call>{{'name': artifact_recall}}</tool_call><tool_call>{RECALL}</tool_call>",
        overall="marker_bad_body",
        labels=("marker_bad_body", "ok"),
    ),
    Case(
        id="hermes-truncated-final",
        family="hermes",
        text=f"<tool_call>{RECALL}</tool_call>\n<tool_call>\n"
        '{"name": "artifact_get", "arguments": {"ref": "rep',
        overall="truncated",
        labels=("ok", "truncated"),
        truncated=True,
    ),
    Case(
        id="hermes-unclosed-but-complete",
        family="hermes",
        text=f"<tool_call>\n{RECALL}",
        overall="ok",
        labels=("ok",),
    ),
    Case(
        id="hermes-unknown-tool",
        family="hermes",
        text='<tool_call>{"name": "web_search", "arguments": {"q": "x"}}</tool_call>',
        overall="unknown_tool",
        labels=("unknown_tool",),
        names=("web_search",),
    ),
    Case(
        id="hermes-missing-required",
        family="hermes",
        text='<tool_call>{"name": "artifact_recall", "arguments": {"k": 3}}</tool_call>',
        overall="missing_required",
        labels=("missing_required",),
    ),
    Case(
        id="hermes-unexpected-param",
        family="hermes",
        text='<tool_call>{"name": "artifact_recall", "arguments": {"query": "a", "top": 3}}'
        "</tool_call>",
        overall="unexpected_param",
        labels=("unexpected_param",),
    ),
    Case(
        id="hermes-type-error",
        family="hermes",
        text='<tool_call>{"name": "artifact_recall", "arguments": {"query": "a", "k": "many"}}'
        "</tool_call>",
        overall="type_error",
        labels=("type_error",),
    ),
    Case(
        id="hermes-bound-violation",
        family="hermes",
        text='<tool_call>{"name": "artifact_recall", "arguments": {"query": "a", "k": 0}}'
        "</tool_call>",
        overall="type_error",
        labels=("type_error",),
    ),
    Case(
        id="hermes-wrong-shape",
        family="hermes",
        text='<tool_call>{"tool": "artifact_recall", "query": "a"}</tool_call>',
        overall="wrong_shape",
        labels=("wrong_shape",),
    ),
    Case(
        id="hermes-string-arguments",
        family="hermes",
        text='<tool_call>{"name": "artifact_recall", "arguments": "{\\"query\\": \\"a\\"}"}'
        "</tool_call>",
        overall="ok",
        labels=("ok",),
        arguments=({"query": "a"},),
    ),
    Case(
        id="hermes-fenced-body",
        family="hermes",
        text=f"<tool_call>\n```json\n{RECALL}\n```\n</tool_call>",
        overall="ok",
        labels=("ok",),
    ),
    Case(
        id="hermes-null-optional-dropped",
        family="hermes",
        text='<tool_call>{"name": "artifact_get", "arguments": {"ref": "a", "end_line": null}}'
        "</tool_call>",
        overall="ok",
        labels=("ok",),
        arguments=({"ref": "a"},),
    ),
    Case(
        id="hermes-plain-answer",
        family="hermes",
        text="The Q3 revenue was $4.2M.",
        overall="no_call",
        labels=(),
        content="The Q3 revenue was $4.2M.",
    ),
    Case(
        id="hermes-empty-list",
        family="hermes",
        text="<tool_call>[]</tool_call>",
        overall="wrong_shape",
        labels=("wrong_shape",),
    ),
    # Agents that write about tool calls (issue 16): a marker inside a value, a marker that is
    # only mentioned in prose, and a mention followed by a real call.
    Case(
        id="hermes-open-marker-inside-value",
        family="hermes",
        text='<tool_call>{"name": "artifact_recall", "arguments": {"query": "how do I write '
        '<tool_call> blocks?"}}</tool_call>',
        overall="ok",
        labels=("ok",),
        arguments=({"query": "how do I write <tool_call> blocks?"},),
        content="",
    ),
    Case(
        id="hermes-close-marker-inside-value",
        family="hermes",
        text='<tool_call>\n{"name": "artifact_recall", "arguments": {"query": "end with '
        '</tool_call> then"}}\n</tool_call>\nDone.',
        overall="ok",
        labels=("ok",),
        arguments=({"query": "end with </tool_call> then"},),
        content="Done.",
    ),
    Case(
        id="hermes-marker-mentioned-in-prose",
        family="hermes",
        text="You can wrap a call in <tool_call> tags, which the runtime then executes for you.",
        overall="no_call",
        labels=(),
        content="You can wrap a call in <tool_call> tags, which the runtime then executes for you.",
    ),
    Case(
        id="hermes-mention-then-real-call",
        family="hermes",
        text=f"Calls go inside <tool_call> and </tool_call>; here is mine:\n<tool_call>{RECALL}"
        "</tool_call>",
        overall="ok",
        labels=("ok",),
        arguments=({"query": "Q3 revenue"},),
        content="Calls go inside <tool_call> and </tool_call>; here is mine:",
    ),
    Case(
        id="hermes-nan-for-a-string-is-not-executed",
        family="hermes",
        text='<tool_call>{"name": "artifact_recall", "arguments": {"query": NaN}}</tool_call>',
        overall="type_error",
        labels=("type_error",),
    ),
    Case(
        id="hermes-empty-block-at-end-is-cut-off",
        family="hermes",
        text="Let me look.\n<tool_call>\n",
        overall="truncated",
        labels=("truncated",),
        content="Let me look.",
    ),
    # --- pythonic -------------------------------------------------------------------------
    Case(
        id="pythonic-list",
        family="pythonic",
        text='[artifact_recall(query="Q3 revenue", k=3), artifact_get(ref="r.pdf")]',
        overall="ok",
        labels=("ok", "ok"),
        arguments=({"query": "Q3 revenue", "k": 3}, {"ref": "r.pdf"}),
    ),
    Case(
        id="pythonic-prose-and-fence",
        family="pythonic",
        text="Let me check.\n```tool_code\n[artifact_recall(query='invoice')]\n```",
        overall="ok",
        labels=("ok",),
        content="Let me check.",
    ),
    Case(
        id="pythonic-positional",
        family="pythonic",
        text='[artifact_get("r.pdf", 3, 9)]',
        overall="ok",
        labels=("ok",),
        arguments=({"ref": "r.pdf", "start_line": 3, "end_line": 9},),
    ),
    Case(
        id="pythonic-non-literal",
        family="pythonic",
        text="[artifact_recall(query=user_question), artifact_get(ref='a')]",
        overall="wrong_shape",
        labels=("wrong_shape", "ok"),
    ),
    Case(
        id="pythonic-no-eval",
        family="pythonic",
        text="[artifact_recall(query=__import__('os').system('echo pwned'))]",
        overall="wrong_shape",
        labels=("wrong_shape",),
    ),
    Case(
        id="pythonic-truncated",
        family="pythonic",
        text='[artifact_recall(query="Q3 rev',
        overall="truncated",
        labels=("truncated",),
        truncated=True,
    ),
    Case(
        id="pythonic-syntax-error",
        family="pythonic",
        text="[artifact_recall(query=Q3 revenue)]",
        overall="marker_bad_body",
        labels=("marker_bad_body",),
    ),
    Case(
        id="pythonic-cut-off-inside-a-string",
        family="pythonic",
        text='Checking. [artifact_recall(query="Q3 rev',
        overall="truncated",
        labels=("truncated",),
        content="Checking.",
    ),
    Case(
        id="pythonic-mismatched-but-complete",
        family="pythonic",
        text='[artifact_recall(query="a"}]\nThat is all.',
        overall="marker_bad_body",
        labels=("marker_bad_body",),
        content="That is all.",
    ),
    Case(
        id="pythonic-stray-apostrophe-is-not-cut-off",
        family="pythonic",
        text="[artifact_recall(query=Bob's invoice)] I will wait.",
        overall="marker_bad_body",
        labels=("marker_bad_body",),
        content="I will wait.",
    ),
    Case(
        id="pythonic-extra-parens-keeps-the-good-call",
        family="pythonic",
        text='[artifact_recall(query="a"), artifact_get(ref="b")))]',
        overall="marker_bad_body",
        labels=("ok", "marker_bad_body"),
        arguments=({"query": "a"}, {}),
    ),
    Case(
        id="pythonic-json-words",
        family="pythonic",
        text='[artifact_recall(query="a", artifact_id=null)]',
        overall="ok",
        labels=("ok",),
    ),
    # --- bare json ------------------------------------------------------------------------
    Case(
        id="json-llama",
        family="json",
        text='{"name": "artifact_recall", "parameters": {"query": "Q3 revenue"}}',
        overall="ok",
        labels=("ok",),
    ),
    Case(
        id="json-python-tag-semicolons",
        family="json",
        text='<|python_tag|>{"name": "artifact_recall", "parameters": {"query": "a"}}; '
        '{"name": "artifact_get", "parameters": {"ref": "b"}}',
        overall="ok",
        labels=("ok", "ok"),
    ),
    Case(
        id="json-llama32-type",
        family="json",
        text='{"type": "function", "name": "artifact_recall", "parameters": {"query": "a"}}',
        overall="ok",
        labels=("ok",),
    ),
    Case(
        id="json-prose-before",
        family="json",
        text='Looking that up: {"name": "artifact_recall", "parameters": {"query": "a"}}',
        overall="ok",
        labels=("ok",),
        content="Looking that up:",
    ),
    Case(
        id="json-truncated",
        family="json",
        text='{"name": "artifact_recall", "parameters": {"query": "a',
        overall="truncated",
        labels=("truncated",),
    ),
    Case(
        id="json-python-tag-code",
        family="json",
        text="<|python_tag|>print(42)",
        overall="marker_bad_body",
        labels=("marker_bad_body",),
    ),
    # --- internlm -------------------------------------------------------------------------
    Case(
        id="internlm-plugin",
        family="internlm",
        text='Sure.<|action_start|><|plugin|>\n{"name": "artifact_recall", "parameters": '
        '{"query": "a"}}<|action_end|>\n',
        overall="ok",
        labels=("ok",),
        content="Sure.",
    ),
    Case(
        id="internlm-interpreter",
        family="internlm",
        text="<|action_start|><|interpreter|>\nprint(1)<|action_end|>",
        overall="unknown_tool",
        labels=("unknown_tool",),
        names=("interpreter",),
    ),
    Case(
        id="internlm-truncated",
        family="internlm",
        text='<|action_start|><|plugin|>\n{"name": "artifact_recall", "para',
        overall="truncated",
        labels=("truncated",),
    ),
    Case(
        id="internlm-marker-mentioned-in-prose",
        family="internlm",
        text="InternLM opens an action with the <|action_start|> token and closes it later.",
        overall="no_call",
        labels=(),
        content="InternLM opens an action with the <|action_start|> token and closes it later.",
    ),
    # --- mistral --------------------------------------------------------------------------
    Case(
        id="mistral-array",
        family="mistral",
        text='[TOOL_CALLS] [{"name": "artifact_recall", "arguments": {"query": "a"}, '
        '"id": "abc123def"}, {"name": "artifact_get", "arguments": {"ref": "b"}}]',
        overall="ok",
        labels=("ok", "ok"),
    ),
    Case(
        id="mistral-v11-named",
        family="mistral",
        text='[TOOL_CALLS]artifact_recall{"query": "a"}[TOOL_CALLS]artifact_get{"ref": "b"}',
        overall="ok",
        labels=("ok", "ok"),
    ),
    Case(
        id="mistral-args-token",
        family="mistral",
        text='[TOOL_CALLS]artifact_recall[ARGS]{"query": "a", "k": 2}',
        overall="ok",
        labels=("ok",),
    ),
    Case(
        id="mistral-prose",
        family="mistral",
        text="[TOOL_CALLS] I think I should search.",
        overall="marker_bad_body",
        labels=("marker_bad_body",),
    ),
    Case(
        id="mistral-truncated",
        family="mistral",
        text='[TOOL_CALLS][{"name": "artifact_recall", "arguments": {"qu',
        overall="truncated",
        labels=("truncated",),
    ),
    # --- qwen3-coder xml ------------------------------------------------------------------
    Case(
        id="qwen3xml-one",
        family="qwen3_xml",
        text="<tool_call>\n<function=artifact_recall>\n<parameter=query>\nQ3 revenue\n"
        "</parameter>\n<parameter=k>\n3\n</parameter>\n</function>\n</tool_call>",
        overall="ok",
        labels=("ok",),
        arguments=({"query": "Q3 revenue", "k": 3},),
    ),
    Case(
        id="qwen3xml-numeric-string-kept",
        family="qwen3_xml",
        text="<tool_call><function=artifact_recall><parameter=query>2023</parameter>"
        "</function></tool_call>",
        overall="ok",
        labels=("ok",),
        arguments=({"query": "2023"},),
    ),
    Case(
        id="qwen3xml-truncated",
        family="qwen3_xml",
        text="<tool_call>\n<function=artifact_recall>\n<parameter=query>\nQ3",
        overall="truncated",
        labels=("truncated",),
        truncated=True,
    ),
    Case(
        id="qwen3xml-json-body-is-bad",
        family="qwen3_xml",
        text=f"<tool_call>{RECALL}</tool_call>",
        overall="marker_bad_body",
        labels=("marker_bad_body",),
    ),
    Case(
        id="qwen3xml-two-functions",
        family="qwen3_xml",
        text="<tool_call><function=artifact_get><parameter=ref>a</parameter></function>"
        "</tool_call><tool_call><function=nope></function></tool_call>",
        overall="unknown_tool",
        labels=("ok", "unknown_tool"),
    ),
    Case(
        id="qwen3xml-markers-inside-value",
        family="qwen3_xml",
        text="<tool_call>\n<function=artifact_recall>\n<parameter=query>\nwhy does "
        "<tool_call><function=artifact_get> fail\n</parameter>\n</function>\n</tool_call>",
        overall="ok",
        labels=("ok",),
        arguments=({"query": "why does <tool_call><function=artifact_get> fail"},),
        content="",
    ),
    Case(
        id="qwen3xml-mention-then-real-call",
        family="qwen3_xml",
        text="I write <tool_call> blocks like this:\n<tool_call>\n<function=artifact_get>\n"
        "<parameter=ref>\nr.pdf\n</parameter>\n</function>\n</tool_call>",
        overall="ok",
        labels=("ok",),
        content="I write <tool_call> blocks like this:",
    ),
    # --- pseudo-tool text, adapters off and on ---------------------------------------------
    Case(
        id="pseudo-internvl-role-header",
        family="hermes",
        text='<|im_start|>tool\n{"name": "artifact_recall", "arguments": {"query": "Q3"}}',
        overall="pseudo_tool",
        labels=("pseudo_tool",),
        names=("artifact_recall",),
    ),
    Case(
        id="adapted-internvl-role-header",
        family="hermes",
        adapters=True,
        text='<|im_start|>tool\n{"name": "artifact_recall", "arguments": {"query": "Q3"}}',
        overall="adapted",
        labels=("adapted",),
        arguments=({"query": "Q3"},),
    ),
    Case(
        id="adapted-internvl-name-then-json",
        family="hermes",
        adapters=True,
        text="<|im_start|>tool\nartifact_recall\n{'query': 'Q3 revenue'}<|im_end|>",
        overall="adapted",
        labels=("adapted",),
        arguments=({"query": "Q3 revenue"},),
    ),
    Case(
        id="pseudo-gemma-tool-code",
        family="pythonic",
        text="```tool_code\nprint(artifact_recall(query='Q3 revenue'))\n```",
        overall="pseudo_tool",
        labels=("pseudo_tool",),
    ),
    Case(
        id="adapted-gemma-tool-code",
        family="pythonic",
        adapters=True,
        text="```tool_code\nprint(artifact_recall(query='Q3 revenue'))\n```",
        overall="adapted",
        labels=("adapted",),
        arguments=({"query": "Q3 revenue"},),
    ),
    Case(
        id="adapted-foreign-hermes-in-pythonic",
        family="pythonic",
        adapters=True,
        text=f"<tool_call>{RECALL}</tool_call>",
        overall="adapted",
        labels=("adapted",),
    ),
    Case(
        id="adapted-react",
        family="hermes",
        adapters=True,
        text="Thought: I need the report.\nAction: artifact_recall\nAction Input: Q3 revenue",
        overall="adapted",
        labels=("adapted",),
        arguments=({"query": "Q3 revenue"},),
        content="Thought: I need the report.",
    ),
    Case(
        id="pseudo-unrecoverable",
        family="hermes",
        adapters=True,
        text="<tool_response>\nRevenue was 4.2M\n</tool_response>",
        overall="pseudo_tool",
        labels=("pseudo_tool",),
    ),
    Case(
        id="pseudo-adapter-invalid-call",
        family="hermes",
        adapters=True,
        text="<start_of_turn>tool\nartifact_recall(top=3)",
        overall="pseudo_tool",
        labels=("pseudo_tool",),
        names=("artifact_recall",),
    ),
    Case(
        id="prose-mentioning-tool-is-no-call",
        family="hermes",
        text="I could use artifact_recall but the answer is already above.",
        overall="no_call",
        labels=(),
    ),
    Case(
        id="prose-tool-name-then-space-paren-is-no-call",
        family="hermes",
        text="I searched with artifact_recall (the memory tool) and found nothing.",
        overall="no_call",
        labels=(),
    ),
    Case(
        id="json-blob-in-hermes",
        family="hermes",
        text=f"Calling: {RECALL}",
        overall="pseudo_tool",
        labels=("pseudo_tool",),
    ),
)


@pytest.mark.parametrize("case", CASES + BORROWED, ids=[case.id for case in CASES + BORROWED])
def test_corpus_reply_gets_expected_labels(case: Case) -> None:
    result = parse_reply(
        case.text,
        PEER_TOOLS[case.tools] if case.tools else DEFAULT_TOOLS,
        family=case.family,
        adapters=case.adapters,
        truncated=case.truncated,
    )
    assert result.overall == case.overall, result.model_dump()
    assert tuple(call.label for call in result.calls) == case.labels, result.model_dump()
    if case.names is not None:
        assert tuple(call.name for call in result.calls) == case.names
    if case.arguments is not None:
        assert tuple(call.arguments for call in result.calls) == case.arguments
    if case.content is not None:
        assert result.content == case.content


def test_borrowed_cases_name_their_source_and_cover_every_text_family() -> None:
    assert all(case.source for case in BORROWED)
    assert len({case.id for case in CASES + BORROWED}) == len(CASES + BORROWED)
    assert {case.family for case in BORROWED} >= {
        "hermes",
        "pythonic",
        "json",
        "internlm",
        "mistral",
        "qwen3_xml",
    }


def test_the_readme_counts_the_borrowed_cases_per_peer() -> None:
    counted: dict[str, list[int]] = {}
    for case in BORROWED:
        tally = counted.setdefault(str(case.source).split()[0], [0, 0])
        tally[0] += 1
        tally[1] += case.note is not None
    readme = (CORPUS_DIR / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\S+/\S+) \| (\d+) \| (\d+) \|$", readme, re.MULTILINE)
    assert {peer: [int(cases), int(notes)] for peer, cases, notes in rows} == counted


def test_every_family_and_label_is_covered() -> None:
    assert {case.family for case in CASES} >= {
        "hermes",
        "pythonic",
        "json",
        "internlm",
        "mistral",
        "qwen3_xml",
    }
    labels = {label for case in CASES for label in case.labels} | {case.overall for case in CASES}
    assert labels == {
        "no_call",
        "ok",
        "marker_bad_body",
        "wrong_shape",
        "truncated",
        "unknown_tool",
        "missing_required",
        "unexpected_param",
        "type_error",
        "pseudo_tool",
        "adapted",
    }


def test_native_calls_are_validated_like_parsed_ones() -> None:
    from runtime.messages import ToolCall

    calls = (
        ToolCall(id="c1", name="artifact_recall", arguments={"query": "a", "k": 2.0}),
        ToolCall(id="c2", name="artifact_get", arguments={}),
        ToolCall(id="c3", name="artifact_recall", arguments={"query": "a", "k": "2"}),
    )
    result = parse_reply("", DEFAULT_TOOLS, family="native", native_calls=calls)
    assert [call.label for call in result.calls] == ["ok", "missing_required", "type_error"]
    assert result.calls[0].arguments == {"query": "a", "k": 2}
    assert [call.name for call in result.executable_calls("turn1")] == ["artifact_recall"]


def test_native_reply_without_calls_still_gets_pseudo_tool_detection() -> None:
    result = parse_reply(
        'artifact_recall(query="x")', DEFAULT_TOOLS, family="native", adapters=True
    )
    assert result.overall == "adapted"
    assert result.executable_calls("t")[0].arguments == {"query": "x"}


def test_adapted_calls_are_executable_and_keep_ids_in_order() -> None:
    text = "<|im_start|>tool\nartifact_recall(query='a')\nartifact_get(ref='b')"
    result = parse_reply(text, DEFAULT_TOOLS, family="hermes", adapters=True)
    assert [(c.id, c.name) for c in result.executable_calls("r")] == [
        ("r-0", "artifact_recall"),
        ("r-1", "artifact_get"),
    ]
    assert result.pseudo_tool_markers == ("role_header", "tool_name_call")


def test_unknown_family_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown tool-call parser family 'yaml'"):
        parse_reply("x", DEFAULT_TOOLS, family="yaml")
