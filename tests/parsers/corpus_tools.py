"""Fixed tool specs for the parser corpus: the retrieval tools with explicit bounds and
optional fields, frozen here so parser behaviour is tested independently of the memory
server's current schema."""

from __future__ import annotations

from runtime.messages import ToolSpec

ARTIFACT_RECALL = ToolSpec(
    name="artifact_recall",
    description=(
        "Search earlier artifacts (documents, tables, screenshots, notes) for passages relevant "
        "to a query. Returns ranked passages with their artifact ids and line ranges."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "k": {
                "type": "integer",
                "description": "How many passages to return.",
                "default": 5,
                "minimum": 1,
                "maximum": 50,
            },
            "artifact_id": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "Only search this artifact.",
                "default": None,
            },
        },
        "required": ["query"],
    },
)

ARTIFACT_GET = ToolSpec(
    name="artifact_get",
    description=(
        "Read an artifact (or a line range of it) by the reference artifact_recall returned."
    ),
    parameters={
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "Artifact id or reference."},
            "start_line": {"type": "integer", "description": "First line (1-based).", "minimum": 1},
            "end_line": {"type": "integer", "description": "Last line (inclusive).", "minimum": 1},
        },
        "required": ["ref"],
    },
)

DEFAULT_TOOLS: tuple[ToolSpec, ...] = (ARTIFACT_RECALL, ARTIFACT_GET)
