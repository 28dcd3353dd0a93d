"""memory_server package of mirage: the persistent workspace, its hybrid index and the MCP
server that exposes ``artifact_recall`` (see ``docs/memory_server.md``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import runtime as _runtime  # noqa: F401  (applies the offline defaults first)

if TYPE_CHECKING:
    from runtime.messages import ToolSpec


def tools_specs() -> list[ToolSpec]:
    """The memory server's tools as ``ToolSpec``s, exactly as the MCP server offers them
    (imports the MCP SDK on first call)."""
    from memory_server.server import tools_specs as _tools_specs

    return _tools_specs()
