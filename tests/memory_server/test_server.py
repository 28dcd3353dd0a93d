"""MCP round trips against the real server: in process, over HTTP on loopback, over stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp
import pytest
from mcp.client.stdio import StdioServerParameters

from memory_server.calllog import read_calls
from memory_server.embedding import Embedder
from memory_server.http import HttpServerThread, build_http_app
from memory_server.index import HybridIndex, IndexConfig
from memory_server.server import build_server, service_of, tools_specs
from memory_server.workspace import Workspace
from runtime.offline import offline_env
from tests.memory_server.conftest import write_workspace


@pytest.fixture
def server(tmp_path: Path, embedder: Embedder, shared_cache: Path) -> Any:
    workspace = Workspace.open(write_workspace(tmp_path / "ws"))
    index = HybridIndex(workspace, IndexConfig(embedding_cache=shared_cache), embedder=embedder)
    return build_server(workspace, index=index, tag="default-tag")


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return dict(result.structured_content)


def _error_text(result: Any) -> str:
    assert result.is_error
    return " ".join(block.text for block in result.content)


async def test_tools_are_listed_with_model_facing_descriptions(server: Any) -> None:
    async with mcp.Client(server) as client:
        listed = await client.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == {"artifact_recall", "artifact_get", "memory_append"}
    recall = tools["artifact_recall"]
    assert "artifact_id" in recall.description and "cite" in recall.description
    assert recall.input_schema["required"] == ["query"]
    assert set(recall.input_schema["properties"]) == {"query", "k", "artifact_id"}
    specs = {spec.name: spec for spec in tools_specs()}
    assert set(specs) == set(tools)
    for name, tool in tools.items():
        assert specs[name].parameters == tool.input_schema
        assert specs[name].description == tool.description


async def test_recall_get_append_in_process(server: Any) -> None:
    async with mcp.Client(server) as client:
        recall = _structured(await client.call_tool("artifact_recall", {"query": "INV-2023-0042"}))
        top = recall["hits"][0]
        assert top["artifact_id"] == "invoice_2023_0042"
        assert set(top) >= {"artifact_id", "path", "snippet", "score", "citation"}

        got = _structured(await client.call_tool("artifact_get", {"ref": "chart A"}))
        assert got["path"] == "derived/chart_3f9a1c20.table.csv"
        assert "Munich,2019,2240" in got["content"]
        lines = _structured(
            await client.call_tool(
                "artifact_get",
                {"ref": "derived/chart_3f9a1c20.table.csv", "start_line": 2, "end_line": 3},
            )
        )
        assert lines["content"] == "Berlin,2019,1830\nBerlin,2023,2110"
        assert lines["citation"] == "derived/chart_3f9a1c20.table.csv#L2-L3"

        note = _structured(
            await client.call_tool("memory_append", {"text": "- Dana owns Project Falcon."})
        )
        again = _structured(await client.call_tool("artifact_recall", {"query": "Dana owns"}))
    assert note["path"].startswith("memory/")
    assert any(hit["path"] == note["path"] for hit in again["hits"])
    calls = read_calls(service_of(server).call_log.path)
    assert [call.tool for call in calls] == [
        "artifact_recall",
        "artifact_get",
        "artifact_get",
        "memory_append",
        "artifact_recall",
    ]
    assert calls[0].hits[0] == "invoice_2023_0042"
    assert all(call.tag == "default-tag" and call.error is None for call in calls)
    assert all(call.latency_ms >= 0 for call in calls)


BAD_CALLS = [
    ("artifact_recall", {"query": ""}, "query is empty"),
    ("artifact_recall", {"query": "   "}, "query is empty"),
    ("artifact_recall", {"query": "x" * 5000}, "limit is 2000"),
    ("artifact_recall", {"query": "rent", "k": 0}, "k must be an integer from 1 to 50"),
    ("artifact_recall", {"query": "rent", "k": 51}, "k must be an integer from 1 to 50"),
    ("artifact_recall", {"query": "rent", "k": "many"}, "k"),
    ("artifact_recall", {"query": 42}, "query"),
    ("artifact_recall", {}, "query"),
    ("artifact_recall", {"query": "rent", "artifact_id": "nope_123"}, "unknown artifact_id"),
    ("artifact_get", {"ref": "../outside.txt"}, "'..' is not allowed"),
    ("artifact_get", {"ref": "/etc/passwd"}, "absolute paths are not allowed"),
    ("artifact_get", {"ref": ".mirage/calls.jsonl"}, "server state"),
    ("artifact_get", {"ref": "no_such_artifact"}, "no file or artifact matches"),
    ("artifact_get", {"ref": "MEMORY.md", "start_line": 0}, "positive integer"),
    ("artifact_get", {"ref": "MEMORY.md", "start_line": 99}, "past the end"),
    ("artifact_get", {"ref": "MEMORY.md", "start_line": 3, "end_line": 2}, "before start_line"),
    ("memory_append", {"text": ""}, "note text is empty"),
    ("memory_append", {"text": "y" * 20_001}, "limit is 20000"),
    ("no_such_tool", {}, "no_such_tool"),
]


async def test_bad_input_gets_clear_errors_and_server_keeps_serving(server: Any) -> None:
    async with mcp.Client(server) as client:
        for tool, arguments, message in BAD_CALLS:
            result = await client.call_tool(tool, arguments)
            assert message in _error_text(result), (tool, arguments)
        still = await client.call_tool("artifact_get", {"ref": "MEMORY.md"})
        assert "Miso" in _structured(still)["content"]
    logged = read_calls(service_of(server).call_log.path)
    failed = [call for call in logged if call.error]
    assert any("'..' is not allowed" in (call.error or "") for call in failed)
    huge = next(call for call in logged if "limit is 2000" in (call.error or ""))
    assert len(huge.arguments["query"]) < 600


async def test_symlink_escape_is_a_tool_error(server: Any, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2")
    os.symlink(secret, service_of(server).workspace.root / "notes" / "leak.txt")
    async with mcp.Client(server) as client:
        result = await client.call_tool("artifact_get", {"ref": "notes/leak.txt"})
        text = _error_text(result)
        recall = _structured(await client.call_tool("artifact_recall", {"query": "password"}))
    assert "hunter2" not in text
    assert all("hunter2" not in hit["snippet"] for hit in recall["hits"])


async def _recall_over_http(url: str, query: str, headers: dict[str, str] | None = None) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    transport: Any = url
    if headers:
        transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))
    async with mcp.Client(transport) as client:
        return await client.call_tool("artifact_recall", {"query": query, "k": 2})


async def test_http_attribution_by_path_and_header_with_concurrent_clients(server: Any) -> None:
    with HttpServerThread(server) as http:
        tags = [f"probe-{i}" for i in range(6)]

        async def by_path(tag: str) -> None:
            result = await _recall_over_http(http.tagged_url(tag), f"rent {tag}")
            assert not result.is_error

        async def by_header(tag: str) -> None:
            result = await _recall_over_http(http.url, f"invoice {tag}", {"X-Mirage-Tag": tag})
            assert not result.is_error

        async with anyio.create_task_group() as group:
            for tag in tags[:3]:
                group.start_soon(by_path, tag)
            for tag in tags[3:]:
                group.start_soon(by_header, tag)
        untagged = await _recall_over_http(http.url, "cat")
        assert not untagged.is_error
    log_path = service_of(server).call_log.path
    for tag in tags:
        calls = read_calls(log_path, tag=tag)
        assert len(calls) == 1, tag
        assert calls[0].arguments["query"].endswith(tag)
        assert calls[0].transport == "http"
    assert read_calls(log_path, tag="default-tag")[-1].arguments["query"] == "cat"


async def test_http_bearer_token(server: Any) -> None:
    with HttpServerThread(server, token="s3cret") as http:
        async with httpx.AsyncClient() as plain:
            denied = await plain.post(http.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert denied.status_code == 401
        ok = await _recall_over_http(http.url, "rent", {"Authorization": "Bearer s3cret"})
        assert not ok.is_error


async def test_http_rejects_malformed_tags(server: Any) -> None:
    with HttpServerThread(server) as http:
        async with httpx.AsyncClient() as plain:
            bad_path = await plain.post(http.url.replace("/mcp", "/t/%20bad%20/mcp"), json={})
            bad_header = await plain.post(http.url, json={}, headers={"X-Mirage-Tag": "a b"})
    assert bad_path.status_code == 400
    assert bad_header.status_code == 400


def test_binding_beyond_loopback_requires_a_token(server: Any) -> None:
    with pytest.raises(ValueError, match="without a bearer token"):
        build_http_app(server, host="0.0.0.0")
    assert build_http_app(server, host="0.0.0.0", token="t") is not None


def _stdio_params(root: Path, *extra: str) -> StdioServerParameters:
    env = offline_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path.cwd()), env.get("PYTHONPATH")] if p)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mirage", "memory", "serve", "--workspace", str(root), *extra],
        env=env,
    )


async def test_stdio_subprocess_get_append_and_tag(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    async with mcp.Client(_stdio_params(root, "--tag", "stdio-probe")) as client:
        got = _structured(await client.call_tool("artifact_get", {"ref": "invoice_2023_0042"}))
        bad = await client.call_tool("artifact_get", {"ref": "../../etc/passwd"})
        note = _structured(await client.call_tool("memory_append", {"text": "stdio note"}))
    assert "INV-2023-0042" in got["content"]
    assert "'..' is not allowed" in _error_text(bad)
    assert "stdio note" in (root / note["path"]).read_text()
    calls = read_calls(root / ".mirage" / "calls.jsonl", tag="stdio-probe")
    assert [call.tool for call in calls] == ["artifact_get", "artifact_get", "memory_append"]
    assert {call.transport for call in calls} == {"stdio"}


@pytest.mark.slow
async def test_stdio_subprocess_recall(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    async with mcp.Client(_stdio_params(root)) as client:
        result = _structured(
            await client.call_tool("artifact_recall", {"query": "Munich median rent 2019"})
        )
    assert result["hits"][0]["artifact_id"] == "chart_3f9a1c20"
    assert json.loads(json.dumps(result))["hits"][0]["citation"].startswith("derived/")
