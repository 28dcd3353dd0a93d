"""A user executable as the agent under test (``mirage run --agent cmd:PATH``).

Above: ``AttributedAgent`` (harness.kit.attribution). Below: one child process per probe. The
harness writes one JSON request (``CommandRequest``) to the process's stdin and closes it; the
process writes one JSON reply (``CommandReply``) to stdout and exits 0. Stderr is kept for error
messages only. A timeout (the process group is killed), a non-zero exit, or stdout that is not
one valid reply object is a recorded probe failure. The protocol is documented in
docs/own_agent.md; it is the escape hatch for stateful agents that snapshot themselves (the
request names the checkpoint folder and its runtime snapshot as well as carrying the transcript).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.kit.agents.base import AgentUnderTest, MemoryURL, ProbeReply, ProbeUsage, RestorePoint
from harness.kit.agents.transcript import RestoredContext, TranscriptSource, reported_call
from runtime.offline import offline_env

log = structlog.get_logger(__name__)

STDERR_TAIL = 400


class CheckpointInfo(BaseModel):
    directory: str
    state: str
    snapshot: str
    snapshot_sha256: str
    workspace_version: str | None
    eit: int
    compaction_count: int


class CommandRequest(BaseModel):
    """What the command reads from stdin (one JSON object)."""

    protocol: Literal["mirage-agent-command/1"] = "mirage-agent-command/1"
    tag: str
    checkpoint: CheckpointInfo
    transcript: list[dict[str, Any]] = Field(
        description="the checkpoint's context as OpenAI chat messages (system prompt first)"
    )
    message: str = Field(description="the probe message to answer (the next user turn)")
    memory_url: str | None = Field(
        default=None, description="this probe's MCP URL on the memory server (streamable HTTP)"
    )


class CommandReply(BaseModel):
    """What the command writes to stdout (one JSON object)."""

    model_config = ConfigDict(extra="ignore")

    reply: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    usage: ProbeUsage | None = None
    error: str | None = Field(default=None, description="the agent's own failure report")


def parse_command(spec: str) -> list[str]:
    """``PATH [ARGS…]`` (shell-quoted) as argv; the executable must exist."""
    argv = shlex.split(spec)
    if not argv:
        raise ValueError("cmd: needs an executable, e.g. cmd:./my_agent.py")
    executable = argv[0]
    found = shutil.which(executable) if os.sep not in executable else executable
    if found is None or not Path(found).is_file():
        raise ValueError(f"agent command not found: {executable}")
    if not os.access(found, os.X_OK):
        raise ValueError(f"agent command is not executable: {executable} (chmod +x it)")
    return argv


class CommandAgent(AgentUnderTest):
    def __init__(
        self,
        argv: Sequence[str],
        *,
        memory_url: MemoryURL | None = None,
        timeout_s: float = 300.0,
        name: str | None = None,
    ) -> None:
        if not argv:
            raise ValueError("argv must name an executable")
        self.argv = list(argv)
        self.name = name or f"cmd:{Path(argv[0]).name}"
        self.memory_url = memory_url
        self.timeout_s = timeout_s
        self._transcripts = TranscriptSource()

    def build_request(
        self, checkpoint: RestorePoint, message: str, tag: str
    ) -> tuple[CommandRequest, RestoredContext]:
        """The request and the restored session it was built from."""
        restored = self._transcripts.restore(checkpoint)
        request = CommandRequest(
            tag=tag,
            checkpoint=CheckpointInfo(
                directory=str(checkpoint.directory.resolve()),
                state=checkpoint.state,
                snapshot=str(checkpoint.snapshot_path.resolve()),
                snapshot_sha256=checkpoint.snapshot_sha256,
                workspace_version=checkpoint.workspace_version,
                eit=checkpoint.eit,
                compaction_count=checkpoint.compaction_count,
            ),
            transcript=list(restored.messages),
            message=message,
            memory_url=self.memory_url(tag) if self.memory_url is not None else None,
        )
        return request, restored

    async def probe(self, checkpoint: RestorePoint, message: str, *, tag: str) -> ProbeReply:
        request, restored = self.build_request(checkpoint, message, tag)
        started = time.perf_counter()
        try:
            stdout = await self._run(request)
            reply = parse_command_reply(stdout)
        except CommandFailed as failure:
            log.info("agent.command_failed", tag=tag, kind=failure.kind)
            reply = ProbeReply(error=f"agent_error: {failure}")
        return reply.model_copy(
            update={
                "latency_s": time.perf_counter() - started,
                "restored_sha256": restored.restored_sha256,
                "context": restored.context,
            }
        )

    async def _run(self, request: CommandRequest) -> bytes:
        env = {**os.environ, **offline_env(), "MIRAGE_TAG": request.tag}
        if request.memory_url:
            env["MIRAGE_MEMORY_URL"] = request.memory_url
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise CommandFailed("spawn", f"cannot start {self.argv[0]}: {exc}") from exc
        try:
            stdout, stderr = await asyncio.wait_for(
                process.communicate(request.model_dump_json().encode()), self.timeout_s
            )
        except TimeoutError as exc:
            await _kill_group(process)
            raise CommandFailed("timeout", f"no reply within {self.timeout_s:g}s") from exc
        if process.returncode != 0:
            tail = stderr.decode(errors="replace")[-STDERR_TAIL:].strip()
            raise CommandFailed("exit", f"exit status {process.returncode}; stderr: {tail!r}")
        return stdout


class CommandFailed(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill the probe's process and its children (it runs in its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()


def parse_command_reply(stdout: bytes) -> ProbeReply:
    text = stdout.decode(errors="replace").strip()
    if not text:
        raise CommandFailed("bad_reply", "the command wrote nothing to stdout")
    try:
        reply = CommandReply.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise CommandFailed(
            "bad_reply", f"stdout is not one reply object ({first['msg']}): {text[:120]!r}"
        ) from exc
    if reply.error is not None:
        raise CommandFailed("agent_reported", reply.error)
    if reply.reply is None:
        raise CommandFailed("bad_reply", "the reply object has neither 'reply' nor 'error'")
    calls = [reported_call(entry) for entry in reply.tool_calls or []]
    return ProbeReply(
        text=reply.reply,
        tool_calls=calls,
        usage=reply.usage or ProbeUsage(),
        trace={"tool_calls_reported": reply.tool_calls is not None},
    )
