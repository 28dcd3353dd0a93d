"""The command adapter: real child processes speaking the one-request/one-reply protocol."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

import pytest

from harness.kit.agents.command import CommandAgent, CommandRequest, parse_command
from harness.mirage.trunk.checkpoints import Checkpoint
from tests.harness.agents_support import PROTOCOL_REPLY, make_checkpoint


@pytest.fixture
def checkpoint(tmp_path: Path) -> Checkpoint:
    return make_checkpoint(tmp_path / "family")


def script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time, subprocess\n{body}\n")
    path.chmod(0o755)
    return path


ECHO = f"""
request = json.load(sys.stdin)
with open(os.environ["ECHO_TO"], "w") as f:
    json.dump({{"request": request, "tag": os.environ.get("MIRAGE_TAG"),
               "url": os.environ.get("MIRAGE_MEMORY_URL")}}, f)
print(json.dumps({{"reply": {PROTOCOL_REPLY!r},
                   "tool_calls": [{{"name": "artifact_recall", "arguments": {{"query": "x"}}}}],
                   "usage": {{"eit": 99}}}}))
"""


async def test_request_and_reply(
    tmp_path: Path, checkpoint: Checkpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    echo_to = tmp_path / "echo.json"
    monkeypatch.setenv("ECHO_TO", str(echo_to))
    agent = CommandAgent(
        [str(script(tmp_path, "agent.py", ECHO))],
        memory_url=lambda tag: f"http://127.0.0.1:9/t/{tag}/mcp",
    )
    reply = await agent.probe(checkpoint, "Question: where?", tag="S2.Cm.q1.r0")

    assert reply.error is None and reply.text == PROTOCOL_REPLY
    assert reply.usage.eit == 99
    assert [c.name for c in reply.tool_calls] == ["artifact_recall"]
    assert reply.trace["tool_calls_reported"] is True
    assert reply.restored_sha256 == checkpoint.manifest.snapshot_sha256
    echoed = json.loads(echo_to.read_text())
    request = CommandRequest.model_validate(echoed["request"])
    assert request.tag == echoed["tag"] == "S2.Cm.q1.r0"
    assert request.memory_url == echoed["url"] == "http://127.0.0.1:9/t/S2.Cm.q1.r0/mcp"
    assert request.message == "Question: where?"
    assert request.checkpoint.state == "S2" and request.checkpoint.compaction_count == 1
    assert Path(request.checkpoint.snapshot).is_file()
    assert request.transcript[1]["content"].startswith("[Summary of earlier conversation]")
    assert reply.context is not None and reply.context.messages is not None
    assert reply.context.messages[0].text == request.transcript[1]["content"]
    assert len(reply.context.messages) == len(request.transcript) - 1  # the system prompt is boot


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("sys.stderr.write('boom: no model'); sys.exit(3)", "exit status 3; stderr: 'boom"),
        ("print('ANSWERABLE=YES but not json')", "bad_reply: stdout is not one reply object"),
        ("print(json.dumps({'tool_calls': []}))", "bad_reply: the reply object has neither"),
        ("print(json.dumps({'error': 'model overloaded'}))", "agent_reported: model overloaded"),
        ("pass", "bad_reply: the command wrote nothing"),
    ],
)
async def test_failures_come_back_as_errors(
    tmp_path: Path, checkpoint: Checkpoint, body: str, expected: str
) -> None:
    agent = CommandAgent([str(script(tmp_path, "agent.py", "sys.stdin.read()\n" + body))])
    reply = await agent.probe(checkpoint, "Q", tag="t1")
    assert reply.error is not None and expected in reply.error, reply.error
    assert reply.text is None


async def test_timeout_kills_the_agent_and_its_children(
    tmp_path: Path, checkpoint: Checkpoint
) -> None:
    pid_file = tmp_path / "child.pid"
    body = (
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)"
    )
    agent = CommandAgent([str(script(tmp_path, "slow.py", body))], timeout_s=8.0)
    reply = await agent.probe(checkpoint, "Q", tag="t1")
    assert reply.error is not None and "timeout: no reply within 8s" in reply.error
    assert pid_file.exists(), "the agent did not start its child within the timeout"
    child = int(pid_file.read_text())
    assert _gone_within(child, seconds=10.0), f"the agent's child {child} outlived the timeout"


def _gone_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` is gone within ``seconds``: a SIGKILLed process dies when the kernel gets
    to it, which a loaded machine may take a moment to do."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            _reap_or_signal(pid)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _reap_or_signal(pid: int) -> None:
    """Signal 0 to a killed child: gone, or a zombie reparented to init, which is reaped soon."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    status = Path(f"/proc/{pid}/status")
    if status.exists() and "State:\tZ" in status.read_text():
        raise ProcessLookupError(pid)
    os.kill(pid, 0)


def test_command_parsing(tmp_path: Path) -> None:
    agent = script(tmp_path, "agent.py", "pass")
    assert parse_command(f"{agent} --fast 'two words'") == [str(agent), "--fast", "two words"]
    with pytest.raises(ValueError, match="not found"):
        parse_command(str(tmp_path / "missing.py"))
    agent.chmod(0o644)
    with pytest.raises(ValueError, match="not executable"):
        parse_command(str(agent))
    with pytest.raises(ValueError, match="needs an executable"):
        parse_command("  ")
