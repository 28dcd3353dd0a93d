"""Integrity and fidelity through real MCP round trips (in process): what the server serves is
what is stored, citations point at the lines ``artifact_get`` returns, notes only grow, the
server's own state is never served, and tool arguments are exactly the advertised types."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import mcp
import pytest
import structlog
from typer.testing import CliRunner

from memory_server.calllog import read_calls
from memory_server.embedding import Embedder
from memory_server.index import HybridIndex, IndexConfig
from memory_server.server import build_server, service_of
from memory_server.workspace import Workspace
from mirage.cli import app
from tests.memory_server.conftest import write_workspace

# Every character str.splitlines() breaks at besides "\n", and a Windows line end.
ODD_BREAKS = ["\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\r\n"]


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return dict(result.structured_content)


def _error_text(result: Any) -> str:
    assert result.is_error, result.structured_content
    return " ".join(block.text for block in result.content)


@pytest.fixture
def files_server(tmp_path: Path) -> Any:
    """A server whose tests never search (the index, and the model, stay unopened)."""
    return build_server(write_workspace(tmp_path / "ws"))


@pytest.mark.parametrize("odd", ODD_BREAKS, ids=repr)
async def test_appended_note_is_cited_as_artifact_get_returns_it(
    files_server: Any, odd: str
) -> None:
    root = service_of(files_server).workspace.root
    first = f"alpha fact{odd}beta fact"
    second = "chart_3f9a1c20 shows Berlin at 2110 EUR in 2023."
    async with mcp.Client(files_server) as client:
        landed = _structured(await client.call_tool("memory_append", {"text": first}))
        before = (root / landed["path"]).read_bytes()
        then = _structured(await client.call_tool("memory_append", {"text": second}))
        after = (root / landed["path"]).read_bytes()
        cited = [
            _structured(
                await client.call_tool(
                    "artifact_get",
                    {
                        "ref": note["path"],
                        "start_line": note["start_line"],
                        "end_line": note["end_line"],
                    },
                )
            )
            for note in (landed, then)
        ]
    assert after.startswith(before), "the second append rewrote bytes of the first"
    assert first.encode() in before
    assert [got["content"] for got in cited] == [first, second]
    assert [got["citation"] for got in cited] == [landed["citation"], then["citation"]]
    workspace = service_of(files_server).workspace
    calls = read_calls(service_of(files_server).call_log.path)
    assert [call.tool for call in calls] == ["memory_append"] * 2 + ["artifact_get"] * 2
    assert calls[0].arguments["text"] == first
    assert workspace.resolve(then["citation"]) == "chart_3f9a1c20"
    assert workspace.resolve(landed["citation"]) == landed["path"].removesuffix(".md")


async def test_append_keeps_earlier_bytes_that_are_not_utf8_or_lf(files_server: Any) -> None:
    root = service_of(files_server).workspace.root
    note = root / "memory" / "2026-02-01.md"
    original = b"# 2026-02-01\r\nold line\rwith a lone CR\r\n\xff\xfe not utf-8\r\n"
    note.write_bytes(original)
    workspace = service_of(files_server).workspace
    landed = workspace.append_note("new fact", date="2026-02-01")
    assert note.read_bytes().startswith(original)
    async with mcp.Client(files_server) as client:
        got = _structured(
            await client.call_tool(
                "artifact_get",
                {"ref": landed.path, "start_line": landed.start_line, "end_line": landed.end_line},
            )
        )
    assert got["content"] == "new fact"


async def test_flipped_byte_in_a_stored_version_is_refused(files_server: Any) -> None:
    workspace = service_of(files_server).workspace
    version = workspace.snapshot()
    entry = workspace.version(version).files["derived/chart_3f9a1c20.table.csv"]
    blob = workspace.store.blob_path(entry.sha256)
    blob.write_bytes(blob.read_bytes().replace(b"2023,2110", b"2823,2110"))
    pinned = build_server(workspace, version=version)
    async with mcp.Client(pinned) as client:
        refused = await client.call_tool("artifact_get", {"ref": "chart_3f9a1c20"})
        intact = _structured(await client.call_tool("artifact_get", {"ref": "MEMORY.md"}))
    text = _error_text(refused)
    assert "corrupted" in text and "2823" not in text
    assert "\n" not in text
    assert "Miso" in intact["content"]


def test_corrupted_version_file_is_a_one_line_error(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    version = Workspace.open(root).snapshot()
    target = root / ".mirage" / "versions" / f"{version}.json"
    target.write_bytes(target.read_bytes()[:-40] + b"garbage")
    result = CliRunner().invoke(app, ["memory", "search", str(root), "rent", "--version", version])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "is corrupted" in lines[0] and version in lines[0], result.output


async def test_symlinks_into_server_state_are_neither_served_nor_listed(
    files_server: Any,
) -> None:
    workspace = service_of(files_server).workspace
    root = workspace.root
    async with mcp.Client(files_server) as client:
        await client.call_tool("artifact_get", {"ref": "MEMORY.md"})  # the call log now exists
        os.symlink(root / ".mirage" / "calls.jsonl", root / "notes" / "calls.jsonl")
        os.symlink("../.mirage/manifest.json", root / "notes" / "manifest.json")
        os.symlink("../.mirage", root / "notes" / "state")
        results = [
            await client.call_tool("artifact_get", {"ref": ref})
            for ref in ("notes/calls.jsonl", "notes/manifest.json", "notes/state/hashes.json")
        ]
    for result in results:
        assert "server state" in _error_text(result)
    listed = set(workspace.refresh().files)
    assert not {"notes/calls.jsonl", "notes/manifest.json"} & listed
    assert not any(path.startswith("notes/state") for path in listed)


STRICT_CALLS = [
    ("artifact_recall", {"query": "rent", "k": True}, "k must be an integer"),
    ("artifact_recall", {"query": "rent", "k": "5"}, "k must be an integer"),
    ("artifact_recall", {"query": "rent", "k": 2.5}, "k must be an integer"),
    ("artifact_recall", {"query": "rent", "k": [5]}, "k must be an integer"),
    ("artifact_get", {"ref": "MEMORY.md", "start_line": "2"}, "start_line must be"),
    ("artifact_get", {"ref": "MEMORY.md", "start_line": True}, "start_line must be"),
    ("artifact_get", {"ref": "MEMORY.md", "end_line": "3"}, "end_line must be"),
]


async def test_integer_arguments_are_strict(files_server: Any) -> None:
    async with mcp.Client(files_server) as client:
        for tool, arguments, message in STRICT_CALLS:
            text = _error_text(await client.call_tool(tool, arguments))
            assert message in text and "\n" not in text, (arguments, text)
        whole = _structured(
            await client.call_tool(
                "artifact_get", {"ref": "MEMORY.md", "start_line": 3.0, "end_line": 3}
            )
        )
    assert whole["content"] == "- The user's cat is called Miso."


async def test_unexpected_failure_is_a_short_reason_and_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace = Workspace.open(write_workspace(tmp_path / "ws"))
    broken = IndexConfig(model_path=str(tmp_path / "no-such-model"))
    server = build_server(workspace, index_config=broken)
    with structlog.testing.capture_logs() as logs:
        async with mcp.Client(server) as client:
            results = [
                await client.call_tool("artifact_recall", {"query": f"rent {i}"}) for i in range(2)
            ]
            still = await client.call_tool("artifact_get", {"ref": "MEMORY.md"})
    for result in results:
        text = _error_text(result)
        assert text.startswith("Error executing tool artifact_recall: internal error")
        assert "no-such-model" in text and "\n" not in text and len(text) < 500
    assert not still.is_error
    failures = [entry for entry in logs if entry["event"] == "memory.tool_failed"]
    assert len(failures) == 2 and all("\n" not in entry["error"] for entry in failures)
    assert not [record for record in caplog.records if record.exc_info]


async def test_appends_while_serving_replace_the_note_chunks(
    tmp_path: Path, embedder: Embedder, shared_cache: Path
) -> None:
    workspace = Workspace.open(write_workspace(tmp_path / "ws"))
    index = HybridIndex(workspace, IndexConfig(embedding_cache=shared_cache), embedder=embedder)
    server = build_server(workspace, index=index)
    async with mcp.Client(server) as client:
        for round_number in range(12):
            text = f"- fact {round_number}: the rent index rose by {round_number} percent."
            await client.call_tool("memory_append", {"text": text})
            found = _structured(
                await client.call_tool("artifact_recall", {"query": f"fact {round_number}"})
            )
            assert found["hits"], round_number
    served = index.chunk_count()
    fresh = HybridIndex(
        Workspace.open(tmp_path / "ws"),
        IndexConfig(embedding_cache=shared_cache),
        embedder=embedder,
    )
    fresh.rebuild()
    assert served == fresh.chunk_count()
