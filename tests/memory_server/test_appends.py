"""``memory_append`` under crashes, retries and concurrent recalls: an append is logged before it
is written (a kill -9 at any point leaves it logged or absent, never in the notes unlogged), a
retry with the same idempotency key lands once, the index takes in only a note's new tail, and
recalls neither wait for a note being indexed nor miss a note acknowledged before them."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest

from memory_server.appends import JOURNAL_NAME
from memory_server.calllog import read_calls
from memory_server.embedding import Embedder
from memory_server.errors import InvalidInputError
from memory_server.index import HybridIndex, IndexConfig
from memory_server.server import build_server
from memory_server.service import CallerInfo, MemoryService
from memory_server.workspace import Workspace
from runtime.offline import offline_env
from tests.memory_server.conftest import write_workspace

NOTE_DAY = "2031-05-17"


def _env() -> dict[str, str]:
    env = {**os.environ, **offline_env()}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path.cwd()), env.get("PYTHONPATH")] if p)
    return env


def _note(root: Path, day: str = NOTE_DAY) -> str:
    path = root / "memory" / f"{day}.md"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _appends(root: Path) -> list[Any]:
    return [
        call
        for call in read_calls(root / ".mirage" / "calls.jsonl")
        if call.tool == "memory_append"
    ]


def _cited(workspace: Workspace, hit: Any) -> str:
    """The lines a hit cites (its snippet is the chunk's first 320 characters only)."""
    lines = workspace.read_bytes(hit.path).decode("utf-8").split("\n")
    return "\n".join(lines[hit.start_line - 1 : hit.end_line])


# -- the note's date ---------------------------------------------------------------------------


def test_a_fixed_note_date_names_the_note_appends_go_to(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    fixed = MemoryService(workspace, note_date=NOTE_DAY).append("- Miso was fed at 7.")
    assert (fixed.path, fixed.citation) == (f"memory/{NOTE_DAY}.md", f"memory/{NOTE_DAY}.md#L3")
    today = MemoryService(workspace).append("- Miso was fed at 8.")
    assert today.path == f"memory/{dt.date.today().isoformat()}.md"
    with pytest.raises(InvalidInputError, match="not an ISO date"):
        MemoryService(workspace, note_date="17.05.2031")


# -- idempotency keys ------------------------------------------------------------------------


def test_a_retry_with_the_same_key_lands_once_also_after_a_restart(workspace_dir: Path) -> None:
    workspace = Workspace.open(workspace_dir)
    before_note = workspace.snapshot()
    service = MemoryService(workspace, note_date=NOTE_DAY)
    text = "- The garage code is 4417 (from notes/meeting_minutes.txt)."
    first = service.append(text, idempotency_key="retry-1")
    again = service.append(text, idempotency_key="retry-1")
    restarted = MemoryService(Workspace.open(workspace_dir), note_date=NOTE_DAY)
    after_restart = restarted.append(text, idempotency_key="retry-1")
    assert first == again == after_restart
    assert _note(workspace_dir).count("garage code") == 1

    with pytest.raises(InvalidInputError, match="already used for a different note"):
        restarted.append("- another note", idempotency_key="retry-1")
    unkeyed = [restarted.append(text), restarted.append(text)]
    assert _note(workspace_dir).count("garage code") == 3  # without a key every call appends
    assert unkeyed[0].start_line != unkeyed[1].start_line

    calls = _appends(workspace_dir)
    assert [call.error is None for call in calls] == [True, True, True, False, True, True]
    assert calls[1].result is not None and calls[1].result["replay_of"] == calls[0].call_id
    assert calls[2].result is not None and calls[2].result["replay_of"] == calls[0].call_id

    # The note back as it was before (a checkout): the key's text is gone, so it lands anew.
    workspace.checkout(before_note)
    anew = MemoryService(Workspace.open(workspace_dir), note_date=NOTE_DAY).append(
        text, idempotency_key="retry-1"
    )
    assert anew.start_line == first.start_line and _note(workspace_dir).count("garage code") == 1


def test_a_logged_append_whose_write_fails_is_logged_as_not_written(
    workspace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = MemoryService(Workspace.open(workspace_dir), note_date=NOTE_DAY)
    text = "- The boiler was serviced in May."

    def full_disk(self: Workspace, plan: Any) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(Workspace, "write_note", full_disk)
        with pytest.raises(OSError, match="No space left"):
            service.append(text, idempotency_key="boiler")
    assert "boiler" not in _note(workspace_dir)
    (call,) = _appends(workspace_dir)  # logged twice, read as one call: its last record
    assert call.error is not None and call.error.startswith("not written: OSError")
    retried = service.append(text, idempotency_key="boiler")  # the key did not land: it writes
    assert _note(workspace_dir).count("boiler") == 1
    last = _appends(workspace_dir)[-1]
    assert last.error is None and last.result is not None
    assert last.result["citation"] == retried.citation
    assert "replay_of" not in last.result


async def test_memory_append_takes_an_idempotency_key_over_mcp(workspace_dir: Path) -> None:
    server = build_server(workspace_dir, tag="probe-1")
    arguments = {"text": "- Dana owns Project Falcon.", "idempotency_key": "a1b2-c3"}
    async with mcp.Client(server) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        first = await client.call_tool("memory_append", arguments)
        retried = await client.call_tool("memory_append", arguments)
        spaced = await client.call_tool("memory_append", {**arguments, "idempotency_key": "a b"})
    assert "idempotency_key" in listed["memory_append"].input_schema["properties"]
    assert not first.is_error and first.structured_content == retried.structured_content
    assert spaced.is_error
    assert (workspace_dir / str(first.structured_content["path"])).read_text().count("Dana") == 1


# -- kill -9 at each step of an append ------------------------------------------------------

# A service in a child process appends one note and SIGKILLs itself at one step of the write
# path: a real kill -9 at a known point, not a simulated one.
KILLED_APPEND = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from memory_server import calllog, workspace as workspace_module
    from memory_server.service import MemoryService
    from memory_server.workspace import Workspace

    root, step, text, day = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    if step == "before-log":  # journal written, log record not yet
        original_log = calllog.CallLog.append
        def log_then_die(self, record, *, durable=False):
            if durable:
                die()
            original_log(self, record, durable=durable)
        calllog.CallLog.append = log_then_die
    elif step == "torn-log":  # half the log record written (as a power loss can leave it)
        def tear_then_die(self, record, *, durable=False):
            line = record.model_dump_json().encode()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, line[: len(line) // 2])
            die()
        calllog.CallLog.append = tear_then_die
    elif step == "before-write":  # logged, note not yet written
        def die_instead(self, plan):
            die()
        workspace_module.Workspace.write_note = die_instead
    elif step == "before-ack":  # logged and written, journal still there, no answer sent
        original_write = workspace_module.Workspace.write_note
        def write_then_die(self, plan):
            original_write(self, plan)
            die()
        workspace_module.Workspace.write_note = write_then_die
    service = MemoryService(Workspace.open(root), note_date=day)
    service.append(text, idempotency_key="kill-key")
    print("acknowledged", flush=True)
    """
)


@pytest.mark.parametrize(
    ("step", "after_restart"),
    [
        ("before-log", "absent"),
        ("torn-log", "absent"),
        ("before-write", "written"),
        ("before-ack", "written"),
    ],
)
def test_an_append_killed_at_any_step_is_logged_or_absent(
    workspace_dir: Path, step: str, after_restart: str
) -> None:
    text = f"- Killed {step}: crate KX{len(step)}Q is in bay 4."
    child = subprocess.run(
        [sys.executable, "-c", KILLED_APPEND, str(workspace_dir), step, text, NOTE_DAY],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert "acknowledged" not in child.stdout
    logged = [call for call in _appends(workspace_dir) if call.error is None]
    # The invariant at the moment of the kill: in the note only if logged.
    if text in _note(workspace_dir):
        assert len(logged) == 1
    assert (workspace_dir / ".mirage" / JOURNAL_NAME).exists()

    # A restarted service recovers: a logged append is completed, an unlogged one dropped.
    restarted = MemoryService(Workspace.open(workspace_dir), note_date=NOTE_DAY)
    assert not (workspace_dir / ".mirage" / JOURNAL_NAME).exists()
    assert _note(workspace_dir).count(text) == (1 if after_restart == "written" else 0)
    assert len(logged) == (1 if after_restart == "written" else 0)

    # The client never got an answer and retries with its key: the text lands exactly once.
    retried = restarted.append(text, idempotency_key="kill-key")
    assert _note(workspace_dir).count(text) == 1
    last = _appends(workspace_dir)[-1]  # readable: not glued to a torn line
    assert last.arguments["idempotency_key"] == "kill-key" and last.error is None
    if logged:
        assert logged[0].result is not None
        assert retried.start_line == logged[0].result["start_line"]


# -- the index takes in a note's tail only ---------------------------------------------------


def test_an_append_indexes_only_the_notes_tail_and_versions_keep_theirs(
    tmp_path: Path, embedder: Embedder, shared_cache: Path
) -> None:
    root = write_workspace(tmp_path / "ws")
    workspace = Workspace.open(root)
    for number in range(40):
        workspace.append_note(
            f"- Delivery {number}: pallet P{number:03d} went to depot {number % 7}.", NOTE_DAY
        )
    index = HybridIndex(workspace, IndexConfig(embedding_cache=shared_cache), embedder=embedder)
    index.sync()
    chunks_before = index.chunk_count()
    before = workspace.snapshot()
    workspace.append_note("- Delivery 40: pallet P040 was returned damaged.", NOTE_DAY)
    report = index.sync()
    assert report.chunks_added <= 2 < chunks_before  # the new tail, not the whole note again
    assert report.texts_embedded <= 2
    assert index.search("pallet P040 returned damaged", 1)[0].path == f"memory/{NOTE_DAY}.md"
    past = index.search("pallet P040 returned damaged", 5, version=before)
    assert all("P040" not in hit.snippet for hit in past)
    assert any("P039" in hit.snippet for hit in index.search("pallet P039", 3, version=before))


# -- recalls while notes are written ---------------------------------------------------------


def test_a_recall_does_not_wait_for_a_note_being_indexed(
    tmp_path: Path, embedder: Embedder, shared_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append whose index update is held mid-way: recalls meanwhile answer from the index as
    it was, and the append, once indexed, is found."""
    workspace = Workspace.open(write_workspace(tmp_path / "ws"))
    index = HybridIndex(workspace, IndexConfig(embedding_cache=shared_cache), embedder=embedder)
    service = MemoryService(workspace, index, note_date=NOTE_DAY)
    service.recall("warm up")
    entered, release = threading.Event(), threading.Event()
    original_add = index._ingester.add

    def held_add(*args: Any, **kwargs: Any) -> None:
        entered.set()
        assert release.wait(120)
        original_add(*args, **kwargs)

    monkeypatch.setattr(index._ingester, "add", held_add)
    landed: list[Any] = []
    writer = threading.Thread(
        target=lambda: landed.append(service.append("- Shipment ZQ999X was lost at sea."))
    )
    writer.start()
    try:
        assert entered.wait(120)
        answered: list[Any] = []
        reader = threading.Thread(target=lambda: answered.append(service.recall("Project Falcon")))
        reader.start()
        reader.join(120)
        assert answered and answered[0].hits, "a recall waited for the note's index update"
        assert not landed  # the append is still being indexed
    finally:
        release.set()
        writer.join(120)
    assert landed
    hits = service.recall("ZQ999X lost at sea", 3).hits
    assert hits[0].path == landed[0].path and "ZQ999X" in _cited(workspace, hits[0])


def test_recalls_see_every_note_acknowledged_before_them(
    tmp_path: Path, embedder: Embedder, shared_cache: Path
) -> None:
    """Writers append codes and recall them at once, another writer's codes too, while readers
    recall all the time: every recall finds every code acknowledged before it started."""
    workspace = Workspace.open(write_workspace(tmp_path / "ws"))
    index = HybridIndex(workspace, IndexConfig(embedding_cache=shared_cache), embedder=embedder)
    service = MemoryService(workspace, index, note_date=NOTE_DAY)
    service.recall("warm up")
    acknowledged: list[str] = []
    guard = threading.Lock()
    misses: list[str] = []
    done = threading.Event()

    def found(code: str) -> bool:
        hits = service.recall(f"crate code {code}", 3, caller=CallerInfo(tag="check")).hits
        return any(code in _cited(workspace, hit) for hit in hits)  # snippets are cut

    def writer(number: int) -> None:
        for round_number in range(4):
            code = f"KX{number}R{round_number}Q"
            service.append(f"- Crate code {code} belongs to client {number}.")
            with guard:
                acknowledged.append(code)
                earlier = list(acknowledged)
            for seen in (code, earlier[len(earlier) // 2]):
                if not found(seen):
                    misses.append(seen)

    def reader() -> None:
        while not done.is_set():
            service.recall("Project Falcon budget")

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join(300)
    done.set()
    for thread in readers:
        thread.join(300)
    assert len(acknowledged) == 12 and misses == []
    assert all(found(code) for code in acknowledged)


# -- a real server killed while clients append ------------------------------------------------


@pytest.mark.slow
async def test_a_server_killed_under_appends_leaves_notes_and_log_consistent(
    tmp_path: Path,
) -> None:
    """Six MCP clients append (each note with its own key) to ``mirage memory serve --http``
    until 20 appends are acknowledged, then the server gets SIGKILL with appends in flight.
    Every note in the file is in the call log, every acknowledged one in both; a restarted
    server, sent every unanswered append again with its key, holds each note exactly once."""
    from tests.memory_server.test_processes import _HttpServer

    root = write_workspace(tmp_path / "ws")
    sent: dict[str, str] = {}  # code -> idempotency key
    acknowledged: set[str] = set()
    killed = anyio.Event()
    server = _HttpServer(root, tmp_path / "server.log")

    def text_of(code: str) -> str:
        return f"- Crate code {code} was counted."

    async def client(number: int) -> None:
        try:
            async with mcp.Client(server.url) as session:
                for round_number in range(1000):
                    code = f"KC{number}N{round_number}Q"
                    sent[code] = f"key-{code}"
                    result = await session.call_tool(
                        "memory_append", {"text": text_of(code), "idempotency_key": sent[code]}
                    )
                    assert not result.is_error, result.content
                    acknowledged.add(code)
                    if len(acknowledged) >= 20 and not killed.is_set():
                        server.process.send_signal(signal.SIGKILL)
                        killed.set()
        except Exception:  # the connection dies with the server
            if not killed.is_set():
                raise

    try:
        await server.ready()
        async with anyio.create_task_group() as group:
            for number in range(6):
                group.start_soon(client, number)
    finally:
        if server.process.poll() is None:
            server.process.kill()
        server.process.wait(timeout=60)
    assert server.process.returncode == -signal.SIGKILL
    in_flight = set(sent) - acknowledged
    assert in_flight, "no append was in flight when the server was killed"

    def codes_in_notes() -> list[str]:
        return [code for code in sent for _ in range(_note_count(root, text_of(code)))]

    logged = {
        call.arguments["idempotency_key"].removeprefix("key-")
        for call in _appends(root)
        if call.error is None and call.result is not None
    }
    in_notes = codes_in_notes()
    assert set(in_notes) <= logged, "a note is in the file but not in the call log"
    assert acknowledged <= set(in_notes) and acknowledged <= logged
    assert len(in_notes) == len(set(in_notes))

    restarted = _HttpServer(root, tmp_path / "restarted.log")
    try:
        await restarted.ready()
        async with mcp.Client(restarted.url) as session:
            for code in sorted(in_flight):
                arguments = {"text": text_of(code), "idempotency_key": sent[code]}
                assert not (await session.call_tool("memory_append", arguments)).is_error
    finally:
        restarted.stop()
    assert sorted(codes_in_notes()) == sorted(sent)  # each note exactly once
    assert "Traceback" not in restarted.log.read_text()


def _note_count(root: Path, text: str) -> int:
    return sum(path.read_text().count(text) for path in (root / "memory").glob("*.md"))
