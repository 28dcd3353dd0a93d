"""The tools ``mirage parse`` and ``mirage compliance`` offer by default: the memory server's
retrieval tools, exactly as its MCP server advertises them (``memory_server.tools_specs``)."""

from __future__ import annotations

from memory_server import tools_specs
from runtime.messages import ToolSpec

_SPECS = {spec.name: spec for spec in tools_specs()}

ARTIFACT_RECALL: ToolSpec = _SPECS["artifact_recall"]
ARTIFACT_GET: ToolSpec = _SPECS["artifact_get"]

DEFAULT_TOOLS: tuple[ToolSpec, ...] = (ARTIFACT_RECALL, ARTIFACT_GET)
