"""Real processes on one workspace: the single-writer lock (kill -9 included), servers that keep
answering while another process rebuilds or writes the index, and a stdio server that keeps a
chat screen clean."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import mcp
import pytest

from memory_server.index import HybridIndex
from memory_server.workspace import Workspace
from memory_server.writelock import read_holder
from mirage.wiring import memory_server_stdio
from runtime.mcp_client import MCPToolset
from runtime.offline import offline_env
from tests.memory_server.conftest import write_workspace

HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from memory_server.writelock import WriterLock

    WriterLock.for_path(Path(sys.argv[1]), "a test workspace").acquire(0)
    print("held", flush=True)
    time.sleep(600)
    """
)


def _env() -> dict[str, str]:
    env = {**os.environ, **offline_env()}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path.cwd()), env.get("PYTHONPATH")] if p)
    return env


def _memory(*args: str) -> list[str]:
    return [sys.executable, "-m", "mirage", "memory", *args]


def _run(command: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=_env(), timeout=900, check=False
    )


def _bigger_workspace(root: Path, files: int) -> Path:
    write_workspace(root)
    for number in range(files):
        (root / "notes" / f"record_{number:03d}.txt").write_text(
            f"Record {number}: shipment ZQ{number:03d}X holds {number * 7} crates for "
            f"warehouse {number % 13}.\n",
            encoding="utf-8",
        )
    return root


def _lock_file(root: Path) -> Path:
    return root / ".mirage" / "index" / "writer.lock"


@pytest.mark.slow
def test_second_writer_names_the_holder_then_takes_over_after_kill_9(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(_lock_file(root))],
        stdout=subprocess.PIPE,
        env=_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        refused = _run(_memory("index", "-w", str(root), "--lock-timeout", "1"))
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert refused.returncode == 2, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert f"pid {holder.pid}" in errors[0] and "python -c" in errors[0]
    assert "since" in errors[0] and "waited 1 s" in errors[0]
    left = read_holder(_lock_file(root))
    assert left is not None and left.pid == holder.pid  # the killed holder never released it

    taken = _run(_memory("index", "-w", str(root), "--lock-timeout", "5"))
    assert taken.returncode == 0, taken.stderr
    assert "index.writer_lock_recovered" in taken.stderr and f"pid {holder.pid}" in taken.stderr
    assert "+11 units" in taken.stdout  # 8 files + the dated note's 3 chunk units
    assert read_holder(_lock_file(root)) is None  # released cleanly: the record is gone


@pytest.mark.slow
def test_concurrent_writers_leave_one_consistent_index(tmp_path: Path) -> None:
    root = _bigger_workspace(tmp_path / "ws", 200)
    held_back = tmp_path / "held-back"
    # Index everything once (every text lands in the embedding cache), then without notes/:
    # the writers below then add those units back and rebuild, all without the model.
    assert _run(_memory("index", "-w", str(root))).returncode == 0
    (root / "notes").rename(held_back)
    assert _run(_memory("index", "-w", str(root))).returncode == 0
    held_back.rename(root / "notes")
    commands = [["index", str(root)], ["index", "--rebuild", str(root)]] * 2
    writers = [
        subprocess.Popen(
            _memory(*command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), text=True
        )
        for command in commands
    ]
    outcomes = [(writer.wait(timeout=900), writer.communicate()) for writer in writers]
    for code, (_, stderr) in outcomes:
        assert code == 0 and "Traceback" not in stderr, stderr
    index = HybridIndex(Workspace.open(root))
    try:
        generation = index.generation
        assert index.sync().units_added == 0
        assert index.generation == generation  # opened consistent: not reset
        hits = index.search("shipment ZQ042X crates", 3, refresh=False)
        assert hits[0].path == "notes/record_042.txt"
    finally:
        index.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _HttpServer:
    """``mirage memory serve --http`` as a child process."""

    def __init__(self, root: Path, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = log
        with log.open("w") as sink:
            self.process = subprocess.Popen(
                _memory("serve", "--workspace", str(root), "--http", f"127.0.0.1:{self.port}"),
                stderr=sink,
                stdout=subprocess.DEVNULL,
                env=_env(),
            )

    async def ready(self) -> None:
        for _ in range(600):
            assert self.process.poll() is None, self.log.read_text()
            try:
                async with mcp.Client(self.url) as client:
                    await client.list_tools()
                    return
            except Exception:
                await asyncio.sleep(0.2)
        raise AssertionError("the memory server did not start")

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        async with mcp.Client(self.url) as client:
            return await client.call_tool(tool, arguments)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def _top_path(result: Any) -> str:
    assert not result.is_error, result.content
    return str(result.structured_content["hits"][0]["path"])


@pytest.mark.slow
async def test_server_keeps_answering_through_a_rebuild(tmp_path: Path) -> None:
    root = _bigger_workspace(tmp_path / "ws", 60)
    assert _run(_memory("index", "-w", str(root))).returncode == 0
    server = _HttpServer(root, tmp_path / "server.log")
    try:
        await server.ready()
        query = {"query": "shipment ZQ017X crates"}
        assert _top_path(await server.call("artifact_recall", query)) == "notes/record_017.txt"
        rebuild = subprocess.Popen(
            _memory("index", "--rebuild", "-w", str(root)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        during = []
        while rebuild.poll() is None:
            during.append(_top_path(await server.call("artifact_recall", query)))
            await asyncio.sleep(0.2)
        assert rebuild.returncode == 0, rebuild.communicate()[1]
        after = [_top_path(await server.call("artifact_recall", query)) for _ in range(3)]
        note = await server.call("memory_append", {"text": "Shipment ZQ999X was lost at sea."})
        assert not note.is_error
        found = _top_path(await server.call("artifact_recall", {"query": "ZQ999X lost"}))
    finally:
        server.stop()
    assert during and set(during) == set(after) == {"notes/record_017.txt"}
    assert found.startswith("memory/")
    assert "Traceback" not in server.log.read_text()


@pytest.mark.slow
async def test_two_servers_on_one_workspace_under_load(tmp_path: Path) -> None:
    root = _bigger_workspace(tmp_path / "ws", 40)
    assert _run(_memory("index", "-w", str(root))).returncode == 0
    servers = [_HttpServer(root, tmp_path / f"server-{n}.log") for n in range(2)]
    failures: list[str] = []

    async def client(number: int, server: _HttpServer) -> None:
        for round_number in range(8):
            code = f"KX{number}{round_number}Q"
            if round_number % 2 == 0:
                appended = await server.call(
                    "memory_append", {"text": f"Crate code {code} belongs to client {number}."}
                )
                if appended.is_error:
                    failures.append(str(appended.content))
            found = await server.call(
                "artifact_recall", {"query": f"record {round_number * 3} crates {code}"}
            )
            if found.is_error:
                failures.append(str(found.content))

    try:
        await asyncio.gather(*(server.ready() for server in servers))
        await asyncio.gather(*(client(n, servers[n % 2]) for n in range(4)))
        crossed = [
            await servers[1 - n % 2].call("artifact_recall", {"query": f"KX{n}0Q", "k": 3})
            for n in range(4)
        ]
    finally:
        for server in servers:
            server.stop()
    assert failures == []
    for number, result in enumerate(crossed):
        assert not result.is_error, result.content
        snippets = " ".join(hit["snippet"] for hit in result.structured_content["hits"])
        assert f"KX{number}0Q" in snippets
    for server in servers:
        assert "Traceback" not in server.log.read_text()


@pytest.mark.slow
def test_client_config_is_printed_on_a_terminal_not_to_an_mcp_client(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    piped = _run(_memory("serve", "--workspace", str(root)))
    assert piped.returncode == 0, piped.stderr
    assert "mcpServers" not in piped.stderr
    controller, terminal = pty.openpty()
    try:
        interactive = subprocess.Popen(
            _memory("serve", "--workspace", str(root)),
            stdin=terminal,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=_env(),
            text=True,
        )
        os.write(controller, b"\x04")  # Ctrl-D: end of input once the server reads it
        _, stderr = interactive.communicate(timeout=120)
    finally:
        os.close(terminal)
        os.close(controller)
    assert '"mcpServers"' in stderr


async def test_stdio_child_logs_to_its_file_not_to_the_parent_screen(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root = write_workspace(tmp_path / "ws")
    log_file = root / ".mirage" / "server.log"
    async with MCPToolset([memory_server_stdio(root, log_file=log_file)]) as tools:
        got = await tools.call("artifact_get", {"ref": "MEMORY.md"})
    assert "Miso" in got.text
    screen = capfd.readouterr()
    assert screen.err == "" and screen.out == ""
    assert "memory.serving" in log_file.read_text()


@pytest.mark.slow
def test_chat_screen_shows_no_memory_server_output(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    chat = [sys.executable, "-m", "mirage", "chat", "--workspace", str(root)]
    options = ["--max-output-tokens", "8"]
    quiet = _run([*chat, *options], stdin="Hello.\n/exit\n")
    assert quiet.returncode == 0, quiet.stderr
    screen = quiet.stdout + quiet.stderr
    assert "agent> " in screen and "[EIT " in screen
    assert "mcpServers" not in screen and "memory.serving" not in screen, screen
    log_file = root / ".mirage" / "server.log"
    assert f"memory server log: {log_file}" in screen
    assert "memory.serving" in log_file.read_text()
    verbose = _run(
        [sys.executable, "-m", "mirage", "-v", "chat", "--workspace", str(root), *options],
        stdin="/exit\n",
    )
    assert verbose.returncode == 0, verbose.stderr
    assert "memory.serving" in verbose.stderr and "mcpServers" not in verbose.stderr
