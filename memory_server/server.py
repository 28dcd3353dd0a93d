"""The MCP server: ``artifact_recall``, ``artifact_get`` and ``memory_append`` over stdio and
streamable HTTP.

Above: any MCP client — our runtime, the harness, agents we did not write. Below: the memory
service (workspace, hybrid index, call log). Tool bodies run in worker threads so a slow
search never blocks other clients.

Attribution: every call is logged with a tag. Over HTTP the tag comes from the URL path
(``/t/<tag>/mcp``, so a per-probe URL works with any client) or else from the
``X-Mirage-Tag`` header; over stdio from the server's ``--tag`` option. The SDK hands each
tool call the Starlette ``Request`` of the HTTP message that carried it
(``ctx.request_context.request``), which is how the tool reads both.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, WithJsonSchema

from memory_server.errors import MemoryServerError, short_reason
from memory_server.index import HybridIndex, IndexConfig
from memory_server.service import (
    MAX_K,
    AppendResult,
    CallerInfo,
    FileContent,
    MemoryService,
    RecallResult,
)
from memory_server.workspace import Workspace
from runtime.messages import ToolSpec

log = structlog.get_logger(__name__)

SERVER_NAME = "mirage-memory"
TAG_HEADER = "x-mirage-tag"
TAG_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")

INSTRUCTIONS = (
    "This server holds the user's persistent workspace: artifacts shared earlier (charts, "
    "documents, screenshots, tables, code), their extracted text, and dated notes. Earlier "
    "evidence may no longer be visible in the conversation. Before answering a question that "
    "depends on it, call artifact_recall, then cite the artifact_id of the hit you used."
)

RECALL_DESCRIPTION = (
    "Search the user's persistent workspace for evidence from earlier conversations: artifacts "
    "(charts, documents, screenshots, tables, code), the text extracted from them, and dated "
    "notes. Use it whenever an answer depends on an earlier artifact, value, name or id that is "
    "not fully visible in the current conversation; do not answer such questions from memory. "
    "Finds evidence by meaning and by exact identifiers and numbers. Returns ranked hits, each "
    "with artifact_id (cite it as the source), path, snippet, score and citation "
    "(path#Lstart-Lend). To read more than the snippet, call artifact_get with the hit's path "
    "and lines."
)
GET_DESCRIPTION = (
    "Read the full text of one workspace file. Pass an artifact_id (reads the artifact's text, "
    "e.g. the extracted table of a chart or the summary of a screenshot) or a path returned by "
    "artifact_recall; optionally start_line and end_line (1-based, inclusive) to read only the "
    "cited lines."
)
APPEND_DESCRIPTION = (
    "Append durable notes to today's dated note (memory/YYYY-MM-DD.md) in the workspace. "
    "Append-only: nothing is overwritten, and every other file is read-only. Write what must "
    "survive a context compaction: facts, decisions, preferences and values, each with the "
    "artifact_id it came from. Returns the path and line range where the note landed."
)

QueryArg = Annotated[
    str,
    Field(
        description="What to look for: key words, names, artifact ids or numbers "
        "(at most 2000 characters)."
    ),
]
# Integer arguments are typed Any with their JSON schema spelled out: the SDK would otherwise
# coerce "5" and true to integers before the service's own checks could refuse them.
KArg = Annotated[
    Any,
    WithJsonSchema({"type": "integer"}),
    Field(description=f"How many hits to return, 1 to {MAX_K}."),
]
ArtifactArg = Annotated[
    str | None,
    Field(
        description="Restrict the search to one artifact (its id, alias or path). "
        "Omit to search everything."
    ),
]
RefArg = Annotated[
    str, Field(description="An artifact_id, or a workspace path from artifact_recall.")
]
LineArg = Annotated[
    Any,
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    Field(description="1-based line number (inclusive); omit for the whole file."),
]
TextArg = Annotated[
    str, Field(description="The note to append (markdown, at most 20,000 characters).")
]
KeyArg = Annotated[
    str | None,
    Field(
        description="Optional. Send the same key when retrying the same note: it is written once."
    ),
]


class _Bindings:
    """What the tool functions are bound to; ``service`` is None only for ``tools_specs``."""

    def __init__(
        self, service: MemoryService | None, default_tag: str | None, transport: str
    ) -> None:
        self.service = service
        self.default_tag = default_tag
        self.transport = transport

    def require(self) -> MemoryService:
        assert self.service is not None, "tool called on a spec-only server"
        return self.service

    def caller(self, ctx: Context | None) -> CallerInfo:
        request = _http_request(ctx)
        if request is None:
            return CallerInfo(tag=self.default_tag, transport=self.transport)
        path_tag = request.path_params.get("tag") if hasattr(request, "path_params") else None
        tag = path_tag or request.headers.get(TAG_HEADER) or self.default_tag
        return CallerInfo(tag=tag, session=request.headers.get("mcp-session-id"), transport="http")


def _http_request(ctx: Context | None) -> Any:
    if ctx is None:
        return None
    try:
        return getattr(ctx.request_context, "request", None)
    except ValueError:
        return None


async def _in_thread(bindings: _Bindings, tool: str, call: Callable[[MemoryService], Any]) -> Any:
    """Run a tool body in a worker thread. A ``MemoryServerError`` reaches the client with its
    own message; anything unexpected reaches it as a short reason while the server logs one
    line (the SDK would send a bare "Error executing tool" and log a traceback per call)."""
    service = bindings.require()
    try:
        return await anyio.to_thread.run_sync(lambda: call(service))
    except MemoryServerError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        reason = short_reason(exc)
        log.error("memory.tool_failed", tool=tool, error=reason)
        raise ToolError(f"internal error in the memory server ({reason}); retry later") from exc


def _tool_functions(bindings: _Bindings) -> list[tuple[Callable[..., Any], str]]:
    async def artifact_recall(
        query: QueryArg, ctx: Context, k: KArg = 5, artifact_id: ArtifactArg = None
    ) -> RecallResult:
        caller = bindings.caller(ctx)
        return await _in_thread(
            bindings, "artifact_recall", lambda s: s.recall(query, k, artifact_id, caller)
        )

    async def artifact_get(
        ref: RefArg, ctx: Context, start_line: LineArg = None, end_line: LineArg = None
    ) -> FileContent:
        caller = bindings.caller(ctx)
        return await _in_thread(
            bindings, "artifact_get", lambda s: s.get(ref, start_line, end_line, caller)
        )

    async def memory_append(
        text: TextArg, ctx: Context, idempotency_key: KeyArg = None
    ) -> AppendResult:
        caller = bindings.caller(ctx)
        return await _in_thread(
            bindings, "memory_append", lambda s: s.append(text, caller, idempotency_key)
        )

    return [
        (artifact_recall, RECALL_DESCRIPTION),
        (artifact_get, GET_DESCRIPTION),
        (memory_append, APPEND_DESCRIPTION),
    ]


class MemoryMCPServer(MCPServer):
    """The MCP server of the memory tools; ``service`` is the memory service they call (pin a
    workspace version with ``service.pin``)."""

    def __init__(self, service: MemoryService, *, tag: str | None, transport: str) -> None:
        super().__init__(name=SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
        self.service = service
        bindings = _Bindings(service, tag, transport)
        for function, description in _tool_functions(bindings):
            self.tool(description=description)(function)


def build_server(
    workspace: Workspace | str | Path,
    *,
    index_config: IndexConfig | None = None,
    index: HybridIndex | None = None,
    service: MemoryService | None = None,
    call_log: Path | None = None,
    tag: str | None = None,
    version: str | None = None,
    transport: str = "memory",
) -> MemoryMCPServer:
    """An MCP server over ``workspace``. ``tag`` attributes calls that carry no tag of their
    own (stdio); ``version`` pins the server to one read-only workspace version."""
    if tag is not None and not TAG_PATTERN.match(tag):
        raise ValueError(f"tag {tag!r} must match {TAG_PATTERN.pattern}")
    if service is None:
        opened = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
        service = MemoryService(
            opened, index, index_config=index_config, call_log=call_log, version=version
        )
    return MemoryMCPServer(service, tag=tag, transport=transport)


def tools_specs() -> list[ToolSpec]:
    """The offered tools as ``ToolSpec``s (for text-mode tool prompts and ``mirage parse``),
    with exactly the names, descriptions and JSON schemas the MCP server advertises."""
    from mcp.server.mcpserver.tools import Tool

    specs = []
    for function, description in _tool_functions(_Bindings(None, None, "spec")):
        tool = Tool.from_function(function, description=description)
        specs.append(
            ToolSpec(name=tool.name, description=tool.description, parameters=tool.parameters)
        )
    return specs
