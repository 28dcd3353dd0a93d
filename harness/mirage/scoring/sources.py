"""Source canonicalisation: ``canon(SOURCE)`` of paper section 3.5.

Above: the scorer, which compares the canonical id of a predicted SOURCE with the gold source.
Below: a ``SourceResolver`` — anything with ``resolve(ref) -> artifact id | None``. The memory
server's ``Workspace`` is the canonicaliser: paths, derived files, summaries, dated notes and
anchors resolve through the workspace manifest (``memory_server.resolve``, shared with the MCP
tools). ``KnownIdResolver`` accepts a reference that mentions exactly one known id, e.g.
``derived/chart_3f9a.table.csv``, using the memory server's own id-token rule (``IdMentions``);
the ``lenient`` profile chains it after the workspace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from harness.mirage.protocol import NONE_VALUE
from memory_server.resolve import IdMentions, clean_reference

__all__ = [
    "ChainResolver",
    "KnownIdResolver",
    "MappingResolver",
    "SourceResolver",
    "canonical_source",
    "clean_reference",
    "same_source",
]


@runtime_checkable
class SourceResolver(Protocol):
    def resolve(self, ref: str) -> str | None: ...


class KnownIdResolver:
    """Resolves a reference that names exactly one of a fixed set of artifact ids."""

    def __init__(self, artifact_ids: Iterable[str]) -> None:
        self._mentions = IdMentions(artifact_ids)

    def resolve(self, ref: str) -> str | None:
        found = self._mentions.find(ref)
        return found[0] if len(found) == 1 else None


class MappingResolver:
    """Resolves through an explicit reference → id table (case-insensitive keys)."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self._table = {clean_reference(k).casefold(): v for k, v in table.items()}

    def resolve(self, ref: str) -> str | None:
        return self._table.get(clean_reference(ref).casefold())


class ChainResolver:
    """Asks each resolver in turn; the first id wins."""

    def __init__(self, *resolvers: SourceResolver) -> None:
        self._resolvers = resolvers

    def resolve(self, ref: str) -> str | None:
        for resolver in self._resolvers:
            found = resolver.resolve(ref)
            if found:
                return found
        return None


def canonical_source(source: str | None, resolver: SourceResolver | None) -> str | None:
    """Canonical artifact id of a predicted SOURCE; ``None`` for NONE or an empty source.

    An unresolvable reference canonicalises to itself (cleaned), so it can still equal the gold
    id verbatim but never matches by accident.
    """
    if source is None:
        return None
    cleaned = clean_reference(source)
    if not cleaned or cleaned.upper() == NONE_VALUE:
        return None
    resolved = resolver.resolve(cleaned) if resolver is not None else None
    return resolved or cleaned


def same_source(predicted: str | None, gold: str | None) -> bool:
    return predicted is not None and gold is not None and predicted.casefold() == gold.casefold()
