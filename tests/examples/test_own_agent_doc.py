"""docs/own_agent.md against a real run (issue 47: its tag example ``S1-d50k.C0.q017.r0`` matched
no real tag, so a user's first agent split tags wrong). The example command agent
(examples/own_agent/command_agent.py) runs under ``mirage run --agent cmd:…`` with a scripted
trunk, logging every request it gets; the tags, the tag pattern and the request the document
shows must be what it received, field by field."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from examples.own_agent.command_agent import TAG
from harness.kit.results import read_records
from harness.mirage.probing.records import ProbeRecord

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "examples" / "own_agent" / "command_agent.py"
DOC = (ROOT / "docs" / "own_agent.md").read_text(encoding="utf-8")
DOCUMENTED_TAG = re.compile(r"`([\w@-]+\.(?:C0|Cm)\.[\w.-]+\.r\d+)`")


def _section(title: str) -> str:
    return DOC.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Path]:
    """The documented command's run: what the agent logged, and the result folder."""
    out = tmp_path_factory.mktemp("own-agent-doc")
    log = out / "requests.jsonl"
    argv = [
        sys.executable, "-m", "mirage", "run", "--agent", f"cmd:{AGENT}",
        "--trunk-model", "scripted", "--limit", "2", "--out", str(out / "run"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COMMAND_AGENT_LOG": str(log)}
    subprocess.run(argv, cwd=ROOT, env=env, check=True, timeout=1800, capture_output=True)
    [folder] = [path for path in (out / "run").iterdir() if (path / "results.jsonl").is_file()]
    return [json.loads(line) for line in log.read_text().splitlines()], folder


def test_the_documented_tags_are_the_tags_of_a_real_run(
    run: tuple[list[dict[str, Any]], Path],
) -> None:
    requests, _ = run
    real = {request["tag"] for request in requests}
    assert len(real) == len(requests) == 16
    documented = DOCUMENTED_TAG.findall(_section("Probe tags"))
    assert documented and set(documented) <= real, documented
    pattern = re.search(r'TAG = re\.compile\(r"(.+)"\)', _section("Probe tags"))
    assert pattern is not None and pattern.group(1) == TAG.pattern  # the doc shows the agent's


def test_the_documented_pattern_splits_every_tag_into_its_record_fields(
    run: tuple[list[dict[str, Any]], Path],
) -> None:
    requests, folder = run
    records = {record.tag: record for record in read_records(folder, ProbeRecord)}  # type: ignore[attr-defined]
    for request in requests:
        record = records[request["tag"]]
        fields = (record.state, record.condition, record.question_id, record.repeat)
        assert tuple(request["fields"].values()) == fields


def test_the_documented_request_is_the_request_a_command_agent_gets(
    run: tuple[list[dict[str, Any]], Path],
) -> None:
    requests, _ = run
    example = json.loads(re.findall(r"```json\n(.*?)```", _section("The command adapter"), re.S)[0])
    received = requests[0]
    assert sorted(example) == received["keys"]
    assert sorted(example["checkpoint"]) == received["checkpoint_keys"]
    assert example["tag"] in {request["tag"] for request in requests}
    assert example["memory_url"].endswith(f"/t/{example['tag']}/mcp")
    assert received["memory_url"].endswith(f"/t/{received['tag']}/mcp")
