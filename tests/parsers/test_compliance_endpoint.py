"""``mirage compliance`` as a user runs it against a served model: a real process, a loopback
OpenAI-compatible endpoint reached with ``--api-base``, replies in the styles real models write,
and a table whose every column the docs explain."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.compliance import COLUMNS, TOOL_INSTRUCTION
from runtime.serve import read_request_log
from tests.fakes.openai_server import FakeOpenAIServer, hang, reply, unused_port
from tests.serve.test_serve_model_cli import serve_model_process

ROOT = Path(__file__).resolve().parents[2]
MODEL = "hosted_vllm/fake-model"
HERMES = '<tool_call>{"name": "artifact_recall", "arguments": {"query": "Q3 revenue"}}</tool_call>'
STYLES = [
    HERMES,
    'Thought: I need the report.\nAction: artifact_recall\nAction Input: {"query": "invoice"}',
    '✿FUNCTION✿: artifact_recall\n✿ARGS✿: {"query": "design review"}',
    '```tool_code\nprint(default_api.artifact_recall(query="traffic chart"))\n```',
    '<|im_start|>tool\nartifact_recall\n{"query": "notice period"}<|im_end|>',
    '<tool_call>{"name": "artifact_recall", "arguments": {"query": "oven", "k": "5"}}</tool_call>',
    "Your flight leaves from gate 12.",
]


def _compliance(
    *args: str, model: str = MODEL, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mirage", "compliance", "-m", model, *args]
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=300, cwd=ROOT, env=environment
    )


def _rows(table: str) -> list[dict[str, str]]:
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        for line in lines[1:]
    ]


def test_compliance_against_a_served_model_labels_each_style(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        server.push(*(reply(text) for text in STYLES))
        finished = _compliance(
            "--api-base", server.api_base, "--n", str(len(STYLES)), "--adapters", "both",
            "-o", str(tmp_path),
        )  # fmt: skip
        requests = list(server.requests)
    assert finished.returncode == 0, finished.stderr
    assert len(requests) == len(STYLES)
    assert all(r.body["model"] == "fake-model" for r in requests)
    assert TOOL_INSTRUCTION in json.dumps(requests[0].body["messages"])
    assert "note: no model profile matches 'hosted_vllm/fake-model'" in finished.stderr

    text = (tmp_path / "compliance.md").read_text()
    off, on = _rows(text)
    assert (off["adapters"], off["attempted"], off["ok"], off["pseudo_tool"]) == (
        "off",
        "7",
        "1",
        "4",
    )
    assert (off["type_error"], off["no_call"], off["executable"]) == ("1", "1", "1")
    assert (on["adapters"], on["ok"], on["adapted"], on["pseudo_tool"]) == ("on", "1", "4", "0")
    assert (on["executable"], on["share_executable"]) == ("5", "71%")
    replies = json.loads((tmp_path / "compliance.json").read_text())["replies"]
    markers = [r["overall"] for r in replies if not r["adapters"]]
    assert markers == ["ok", *["pseudo_tool"] * 4, "type_error", "no_call"]

    columns = list(off)
    assert columns == [name for name, _ in COLUMNS]
    top = text.split("| model |")[0]
    parsers_doc = (ROOT / "docs" / "parsers.md").read_text()
    section = parsers_doc.split("## The compliance table", 1)[1].split("\n## ", 1)[0]
    for column in columns:  # explained at the top of the file and in the docs
        assert f"- `{column}`:" in top, column
        assert re.search(rf"^\| `{re.escape(column)}` \|", section, re.MULTILINE), column


@pytest.mark.slow
def test_compliance_against_mirage_serve_model_with_a_key(tmp_path: Path) -> None:
    """The whole chain as processes: ``mirage compliance`` → ``mirage serve-model --api-key``
    on loopback → a provider. The key travels in the provider's variable as for ``mirage run``
    (``HOSTED_VLLM_API_KEY``); without it every prompt is refused (401) and the command says so
    after writing the table."""
    served = ("--model", "openai/fake-model", "--name", "served", "--api-key", "s3cret")
    with FakeOpenAIServer() as provider:
        provider.push(*(reply(text) for text in STYLES))
        log = tmp_path / "requests.jsonl"
        with serve_model_process(log, *served, "--api-base", provider.api_base) as base_url:
            common = ("--api-base", base_url, "--n", str(len(STYLES)), "--adapters", "both")
            keyless = _compliance(
                *common, "-o", str(tmp_path / "keyless"), model="hosted_vllm/served"
            )
            finished = _compliance(
                *common, "-o", str(tmp_path / "keyed"), model="hosted_vllm/served",
                env={"HOSTED_VLLM_API_KEY": "s3cret"},
            )  # fmt: skip
    assert keyless.returncode == 1, keyless.stderr
    assert f"the provider failed on {len(STYLES)} prompt(s)" in keyless.stderr
    assert finished.returncode == 0, finished.stderr
    replies = json.loads((tmp_path / "keyed" / "compliance.json").read_text())["replies"]
    labels = [r["overall"] for r in replies if not r["adapters"]]
    assert labels == ["ok", *["pseudo_tool"] * 4, "type_error", "no_call"]
    adapted = [r["overall"] for r in replies if r["adapters"]]
    assert adapted == ["ok", *["adapted"] * 4, "type_error", "no_call"]
    assert [record.status for record in read_request_log(log)] == [200] * len(STYLES)


def test_a_provider_timeout_is_a_provider_error_and_exit_1(tmp_path: Path) -> None:
    """``--request-timeout`` reaches the backbone: four attempts of 0.5 s, not of 120 s."""
    with FakeOpenAIServer() as server:
        server.push(*(hang(5) for _ in range(4)))
        started = time.monotonic()
        finished = _compliance(
            "--api-base", server.api_base, "--n", "1", "--request-timeout", "0.5",
            "-o", str(tmp_path),
        )  # fmt: skip
        elapsed = time.monotonic() - started
    assert finished.returncode == 1, finished.stderr
    assert elapsed < 60
    errors = [line for line in finished.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: the provider failed on 1 prompt(s) (provider_error; each reason in "
        f"{tmp_path / 'compliance.json'})"
    ]
    [record] = json.loads((tmp_path / "compliance.json").read_text())["replies"]
    assert record["overall"] == "provider_error"
    assert "timeout" in record["record"]["provider_error"]
    assert _rows((tmp_path / "compliance.md").read_text())[0]["provider_error"] == "1"


def test_models_are_checked_before_any_prompt(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{unused_port()}/v1"
    refused = _compliance("--api-base", dead, "-o", str(tmp_path))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"error: --api-base {dead} does not answer (connection refused) for {MODEL}"
    )
    environment = {key: value for key, value in os.environ.items() if key != "ANTHROPIC_API_KEY"}
    argv = [sys.executable, "-m", "mirage", "compliance", "-m", "anthropic/claude-haiku-4-5"]
    no_key = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=environment
    )
    assert no_key.returncode == 2
    assert no_key.stderr.strip() == (
        "error: anthropic/claude-haiku-4-5 needs ANTHROPIC_API_KEY (not set)"
    )
    assert not (tmp_path / "results").exists()
