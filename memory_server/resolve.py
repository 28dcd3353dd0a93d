"""Canonicalisation of references to artifacts.

Above: ``Workspace.resolve`` (and through it the harness, which canonicalises the SOURCE of
every answer). Below: the built manifest and the text of notes. Any of these resolve to the
canonical artifact id: the id itself, an alias or title, a file path (original or derived, with
or without ``./``, the workspace directory or an absolute prefix), a file name when unique, and
``path#anchor``. For a note (``MEMORY.md``, ``memory/YYYY-MM-DD.md``) an anchor that names a
section (heading slug) or lines (``L12`` / ``L12-L15``) resolves to the first artifact id that
section or those lines mention; otherwise the note's own id. A path whose directories are
unknown falls back to its file name (``/home/u/ws/artifacts/chart_x.png`` -> ``chart_x``).
Matching is case-insensitive.

This module is the one source canonicaliser: the harness scores every SOURCE answer through
``Workspace.resolve`` and builds its manifest-free fallback on ``clean_reference`` and
``IdMentions`` (the harness may import the memory server, never the reverse).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from memory_server.lines import split_lines
from memory_server.manifest import BuiltManifest

_WRAPPERS = "\"'`[]<>()*{} \t\r\n"
_TRAILING = ".,;:!?"
_LINE_ANCHOR = re.compile(r"^l?(\d+)(?:\s*-\s*l?(\d+))?$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")

NoteReader = Callable[[str], str | None]


def slugify(heading: str) -> str:
    """GitHub-style heading anchor."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


class Resolver:
    """A lookup table over one built manifest."""

    def __init__(self, manifest: BuiltManifest, root: Path, read_note: NoteReader) -> None:
        self._manifest = manifest
        self._read_note = read_note
        self._prefixes = _root_prefixes(root)
        self._table = _build_table(manifest)
        self._mentions = IdMentions(
            record.id for record in manifest.artifacts.values() if not record.is_note
        )

    def resolve(self, ref: str) -> str | None:
        if not isinstance(ref, str):
            return None
        text = self._strip_prefixes(clean_reference(ref))
        if not text:
            return None
        base, _, anchor = text.partition("#")
        found = self._lookup(text) or self._lookup(base) or self._lookup(base.rsplit("/", 1)[-1])
        if found is None:
            return None
        if anchor and self._manifest.artifacts[found].is_note:
            return self._resolve_note_anchor(found, anchor) or found
        return found

    def mentioned_ids(self, text: str) -> list[str]:
        """Artifact ids named in ``text``, in order of first mention."""
        return self._mentions.find(text)

    def _lookup(self, key: str) -> str | None:
        key = key.strip().strip(_TRAILING).lower()
        return self._table.get(key) if key else None

    def _strip_prefixes(self, text: str) -> str:
        lowered = text.lower()
        for prefix in self._prefixes:
            if lowered.startswith(prefix):
                text = text[len(prefix) :]
                break
        while text.startswith("./"):
            text = text[2:]
        return text.lstrip("/")

    def _resolve_note_anchor(self, note_id: str, anchor: str) -> str | None:
        direct = self._lookup(anchor)
        if direct and not self._manifest.artifacts[direct].is_note:
            return direct
        files = self._manifest.artifacts[note_id].files
        content = self._read_note(files[0]) if files else None
        if content is None:
            return None
        section = _anchor_text(content, anchor)
        if section is None:
            return None
        mentions = self.mentioned_ids(section)
        return mentions[0] if mentions else None


class IdMentions:
    """Finds artifact ids named inside free text. An id counts only as a whole token: letters,
    digits, ``_`` and ``-`` around it would extend it (``xchart_1``, ``chart_1-old``), while
    ``/``, ``.``, ``#``, spaces and punctuation delimit it (``derived/chart_1.table.csv``)."""

    def __init__(self, artifact_ids: Iterable[str]) -> None:
        ids = sorted({i for i in artifact_ids if i}, key=len, reverse=True)
        self._canonical = {i.casefold(): i for i in ids}
        alternatives = "|".join(re.escape(i) for i in ids)
        self._pattern = (
            re.compile(rf"(?<![\w\-])({alternatives})(?![\w\-])", re.IGNORECASE) if ids else None
        )

    def find(self, text: str) -> list[str]:
        """Ids named in ``text``, in order of first mention, spelled as given."""
        if self._pattern is None:
            return []
        found: list[str] = []
        for match in self._pattern.finditer(text):
            canonical = self._canonical[match.group(1).casefold()]
            if canonical not in found:
                found.append(canonical)
        return found


def clean_reference(ref: str) -> str:
    """Strip quoting, markdown, brackets and trailing punctuation around a reference; ``\\``
    becomes ``/`` and a ``file://`` scheme is dropped."""
    text = ref.strip()
    previous = None
    while previous != text:
        previous = text
        text = text.strip(_WRAPPERS).rstrip(_TRAILING)
    text = text.replace("\\", "/")
    if text.lower().startswith("file://"):
        text = text[len("file://") :]
    return text


def _root_prefixes(root: Path) -> list[str]:
    resolved = root.resolve()
    candidates = {str(resolved), str(root.absolute()), str(root)}
    prefixes = [candidate.replace("\\", "/").rstrip("/").lower() + "/" for candidate in candidates]
    prefixes.append(resolved.name.lower() + "/")
    return sorted(set(prefixes), key=len, reverse=True)


def _build_table(manifest: BuiltManifest) -> dict[str, str]:
    """Key -> canonical id. Earlier layers win; keys that are ambiguous within a layer are
    dropped rather than guessed."""
    layers: list[dict[str, set[str]]] = [{}, {}, {}, {}]
    for record in manifest.artifacts.values():
        _add(layers[0], record.id, record.id)
        for alias in record.aliases:
            _add(layers[1], alias, record.id)
        if record.title:
            _add(layers[1], record.title, record.id)
    for entry in manifest.files.values():
        _add(layers[2], entry.path, entry.artifact_id)
        _add(layers[2], entry.path.rsplit(".", 1)[0], entry.artifact_id)
        name = entry.path.rsplit("/", 1)[-1]
        _add(layers[3], name, entry.artifact_id)
        _add(layers[3], name.split(".", 1)[0], entry.artifact_id)
    table: dict[str, str] = {}
    for layer in layers:
        for key, ids in layer.items():
            if key not in table and len(ids) == 1:
                table[key] = next(iter(ids))
    return table


def _add(layer: dict[str, set[str]], key: str, artifact_id: str) -> None:
    cleaned = key.strip().lower()
    if cleaned:
        layer.setdefault(cleaned, set()).add(artifact_id)


def _anchor_text(content: str, anchor: str) -> str | None:
    """The lines an anchor designates: a line range ``L3``/``L3-L7`` or a heading slug."""
    lines = split_lines(content)
    match = _LINE_ANCHOR.match(anchor.strip().lower())
    if match:
        start = int(match.group(1))
        end = int(match.group(2) or start)
        if start < 1 or end < start:
            return None
        return "\n".join(lines[start - 1 : end]) or None
    return _section_text(lines, slugify(anchor))


def _section_text(lines: list[str], slug: str) -> str | None:
    for index, line in enumerate(lines):
        heading = _HEADING.match(line)
        if not heading or slugify(heading.group(2)) != slug:
            continue
        level = len(heading.group(1))
        body = [line]
        for following in lines[index + 1 :]:
            nested = _HEADING.match(following)
            if nested and len(nested.group(1)) <= level:
                break
            body.append(following)
        return "\n".join(body)
    return None
