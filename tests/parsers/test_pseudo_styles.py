"""The tool-call styles real models write that no family reads (ReAct, Qwen-Agent, Gemma's
``tool_code``, a simulated ``<|im_start|>tool`` turn): labelled ``pseudo_tool`` with the style
named, and recovered by the adapters as a person would read them."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import structlog
from typer.testing import CliRunner

from mirage.cli import app
from mirage.wiring import default_tools
from runtime.parsers import parse_reply

TOOLS = default_tools()
Q = {"query": "Q3 revenue"}

# (id, reply, marker with adapters off, (name, arguments) recovered with adapters on, content)
ADAPTED: list[tuple[str, str, str, list[tuple[str, dict[str, Any]]], str]] = [
    (
        "react-lines",
        "Thought: I need the report.\nAction: artifact_recall\n"
        'Action Input: {"query": "Q3 revenue"}',
        "react_action",
        [("artifact_recall", Q)],
        "Thought: I need the report.",
    ),
    (
        "react-one-line",
        'Thought: search. Action: artifact_recall Action Input: {"query": "Q3 revenue"}',
        "react_action",
        [("artifact_recall", Q)],
        "Thought: search.",
    ),
    (
        "react-numbered-with-made-up-observation",
        'Thought 1: search\nAction 1: artifact_recall\nAction Input 1: {"query": "Q3 revenue"}\n'
        "Observation 1: 4.2 M",
        "react_action",
        [("artifact_recall", Q)],
        "Thought 1: search\n\nObservation 1: 4.2 M",
    ),
    (
        "react-text-input",
        "Action: artifact_recall\nAction Input: Q3 revenue",
        "react_action",
        [("artifact_recall", Q)],
        "",
    ),
    (
        "react-markdown",
        '**Action:** `artifact_recall`\n**Action Input:** {"query": "Q3 revenue", "k": 3}',
        "react_action",
        [("artifact_recall", {**Q, "k": 3})],
        "",
    ),
    (
        "react-two-actions",
        'Action: artifact_recall\nAction Input: {"query": "Q3 revenue"}\n'
        'Action: artifact_get\nAction Input: {"ref": "report.pdf"}',
        "react_action",
        [("artifact_recall", Q), ("artifact_get", {"ref": "report.pdf"})],
        "",
    ),
    (
        "qwen-agent",
        '✿FUNCTION✿: artifact_recall\n✿ARGS✿: {"query": "Q3 revenue"}',
        "qwen_agent",
        [("artifact_recall", Q)],
        "",
    ),
    (
        "qwen-agent-thought-comment-result",
        'Let me search.\n✿FUNCTION✿: artifact_recall\n✿ARGS✿: {"query": "Q3 revenue"} '
        "<!-- the report -->\n✿RESULT✿: 4.2 M\n✿RETURN✿: It was 4.2 M.",
        "qwen_agent",
        [("artifact_recall", Q)],
        "Let me search.",
    ),
    (
        "qwen-agent-parallel",
        '✿FUNCTION✿: artifact_recall\n✿ARGS✿: {"query": "Q3 revenue"}\n'
        '✿FUNCTION✿: artifact_get\n✿ARGS✿: {"ref": "report.pdf"}',
        "qwen_agent",
        [("artifact_recall", Q), ("artifact_get", {"ref": "report.pdf"})],
        "",
    ),
    (
        "gemma-tool-code",
        'I will look.\n```tool_code\nartifact_recall(query="Q3 revenue")\n```',
        "tool_code",
        [("artifact_recall", Q)],
        "I will look.",
    ),
    (
        "gemini-print-default-api",
        '```tool_code\nprint(default_api.artifact_recall(query="Q3 revenue", k=3))\n```',
        "tool_code",
        [("artifact_recall", {**Q, "k": 3})],
        "",
    ),
    (
        "tool-code-tags-two-calls",
        '<tool_code>\nartifact_recall(query="Q3 revenue")\nartifact_get(ref="report.pdf")\n'
        "</tool_code>",
        "tool_code",
        [("artifact_recall", Q), ("artifact_get", {"ref": "report.pdf"})],
        "",
    ),
    (
        "internvl-tool-turn",
        '<|im_start|>tool\nartifact_recall\n{"query": "Q3 revenue"}<|im_end|>',
        "role_header",
        [("artifact_recall", Q)],
        "<|im_start|>tool\n<|im_end|>",
    ),
    (
        "tool-turn-with-a-json-call",
        '<|im_start|>tool\n{"name": "artifact_recall", "arguments": {"query": "Q3 revenue"}}',
        "role_header",
        [("artifact_recall", Q)],
        "<|im_start|>tool",
    ),
]


@pytest.mark.parametrize(
    ("reply", "marker", "calls", "content"),
    [case[1:] for case in ADAPTED],
    ids=[case[0] for case in ADAPTED],
)
@pytest.mark.parametrize("family", ["hermes", "pythonic"])
def test_a_style_is_pseudo_tool_and_adapted(
    family: str, reply: str, marker: str, calls: list[tuple[str, dict[str, Any]]], content: str
) -> None:
    off = parse_reply(reply, TOOLS, family=family)
    assert (off.overall, off.pseudo_tool_markers[0]) == ("pseudo_tool", marker)
    assert not off.executable
    on = parse_reply(reply, TOOLS, family=family, adapters=True)
    assert on.overall == "adapted", on.model_dump()
    assert [(call.name, call.arguments) for call in on.calls] == calls
    assert on.content == content


# (id, reply, marker, the error the recovered call carries)
NOT_RECOVERED = [
    (
        "react-unknown-tool",
        'Action: web_search\nAction Input: {"query": "Q3 revenue"}',
        "react_action",
        "unknown_tool",
    ),
    (
        "react-no-tool-named",
        'Action:\nAction Input: {"query": "Q3 revenue"}',
        "react_action",
        "wrong_shape",
    ),
    (
        "react-k-as-a-string",
        'Action: artifact_recall\nAction Input: {"query": "Q3 revenue", "k": "5"}',
        "react_action",
        "type_error",
    ),
    (
        "qwen-agent-args-not-json",
        "✿FUNCTION✿: artifact_recall\n✿ARGS✿: Q3 revenue",
        "qwen_agent",
        "marker_bad_body",
    ),
    (
        "tool-code-unknown-tool",
        '```tool_code\nsearch(query="Q3 revenue")\n```',
        "tool_code",
        "unknown_tool",
    ),
]


@pytest.mark.parametrize(
    ("reply", "marker", "label"),
    [case[1:] for case in NOT_RECOVERED],
    ids=[case[0] for case in NOT_RECOVERED],
)
def test_a_style_whose_call_cannot_run_stays_pseudo_tool(
    reply: str, marker: str, label: str
) -> None:
    assert parse_reply(reply, TOOLS, family="hermes").pseudo_tool_markers[0] == marker
    on = parse_reply(reply, TOOLS, family="hermes", adapters=True)
    assert on.overall == "pseudo_tool"
    assert not on.executable
    assert f"not executable: {label}" in (on.calls[0].error or ""), on.model_dump()


@pytest.mark.parametrize(
    "reply",
    [
        "The next action: call the plumber before Friday.",
        "Action items for the week: file the invoice.",
        "The florist's ✿ bouquet was lovely.",
        "Use a code block like ```python\nprint(1)\n``` to show code.",
    ],
)
def test_prose_is_no_call(reply: str) -> None:
    result = parse_reply(reply, TOOLS, family="hermes", adapters=True)
    assert (result.overall, result.pseudo_tool_markers) == ("no_call", ())


LOOPING = 5_000  # a small model repeating one marker until its output budget runs out, and more


@pytest.mark.parametrize(
    ("reply", "overall"),
    [
        ("Action: x\n" * LOOPING, "pseudo_tool"),
        ("Action 1: " * LOOPING, "pseudo_tool"),
        ("Action: artifact_recall Action Input: " * LOOPING, "adapted"),  # the rest as query
        ('Action: artifact_recall\nAction Input: {"query": "q"}\n' * LOOPING, "adapted"),
        ("✿FUNCTION✿: artifact_recall\n" * LOOPING, "pseudo_tool"),
        ("<tool_code>" * LOOPING, "pseudo_tool"),
        ("```tool_code\n" * LOOPING, "pseudo_tool"),
        ("artifact_recall(" * LOOPING, "pseudo_tool"),
    ],
    ids=["action-lines", "numbered", "one-line-pairs", "pairs", "fn", "tag", "fence", "name"],
)
def test_a_reply_repeating_a_marker_is_read_in_linear_time(reply: str, overall: str) -> None:
    """Each reader passes over the reply once (a regex that looked ahead for a later marker
    from every earlier one took minutes on 50 KB); quadratic work would take far longer than the
    bound, which a loaded machine meets with room to spare."""
    started = time.monotonic()
    result = parse_reply(reply, TOOLS, family="hermes", adapters=True)
    assert time.monotonic() - started < 10
    assert result.overall == overall


def test_the_action_nearest_an_input_names_the_tool() -> None:
    reply = 'Action: let me think\nAction: artifact_recall\nAction Input: {"query": "Q3 revenue"}'
    result = parse_reply(reply, TOOLS, family="hermes", adapters=True)
    assert [(c.name, c.arguments) for c in result.calls] == [("artifact_recall", Q)]


@pytest.fixture(autouse=True)
def _fresh_logging() -> Any:
    yield
    structlog.reset_defaults()


def test_mirage_parse_labels_and_adapts_a_react_and_a_qwen_agent_reply() -> None:
    runner = CliRunner()
    for reply, marker in [
        ('Action: artifact_recall\nAction Input: {"query": "Q3 revenue"}', "react_action"),
        ('✿FUNCTION✿: artifact_recall\n✿ARGS✿: {"query": "Q3 revenue"}', "qwen_agent"),
    ]:
        off = json.loads(runner.invoke(app, ["parse"], input=reply).stdout)
        on = json.loads(runner.invoke(app, ["parse", "--adapters"], input=reply).stdout)
        assert (off["overall"], off["pseudo_tool_markers"]) == ("pseudo_tool", [marker])
        assert (on["overall"], on["executable"], on["calls"][0]["arguments"]) == ("adapted", 1, Q)


def test_an_unknown_model_says_which_family_reads_it() -> None:
    result = CliRunner().invoke(app, ["parse", "-m", "nosuch/model"], input="Hello.")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["family"] == "hermes"
    assert result.stderr.strip() == (
        "note: no model profile matches 'nosuch/model': its replies are read with the default "
        "family hermes, as mirage run and serve-model read them (-f FAMILY picks another)"
    )
    known = CliRunner().invoke(app, ["parse", "-m", "gemma-3-27b-it"], input="Hello.")
    assert (json.loads(known.stdout)["family"], known.stderr) == ("pythonic", "")
