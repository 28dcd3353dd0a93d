"""Chunking per file kind: markdown sections, CSV rows with their headers, JSON fields and
records, code blocks, PDF page text, plain-text paragraphs.

Above: the index, which embeds and keyword-indexes each chunk. Below: file bytes. A chunk
records the 1-based line range it came from (of the file's text, or of the extracted text for
a PDF), so ``artifact_get(path, start_line, end_line)`` shows exactly the cited lines.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from memory_server.errors import InvalidInputError
from memory_server.lines import split_lines
from memory_server.manifest import FileKind

CHUNKER_VERSION = "1"
MAX_CHUNK_CHARS = 800
MAX_CSV_CHUNKS = 5000
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_BLOCK_START = re.compile(
    r"^(async\s+def|def|class|function|func|fn|pub\s+fn|impl|interface|struct|type|"
    r"export\s+(default\s+)?(function|class|const)|public|private|protected|CREATE|SELECT)\b"
)


class Chunk(BaseModel):
    model_config = ConfigDict(frozen=True)

    ordinal: int
    text: str
    start_line: int
    end_line: int
    locator: str = ""


class PdfUnavailableError(InvalidInputError):
    """PDF text extraction needs the ``pypdf`` package."""


def extract_text(data: bytes, kind: FileKind) -> str | None:
    """The text a file of ``kind`` is chunked from (and shown as), or None for images and
    binaries."""
    if kind in ("image", "binary"):
        return None
    if kind == "pdf":
        return pdf_text(data)
    return data.decode("utf-8", errors="replace")


def pdf_text(data: bytes) -> str:
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise PdfUnavailableError(
            "reading PDF text needs the 'pypdf' package (pip install pypdf)"
        ) from exc
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        texts = [(page.extract_text() or "").strip() for page in reader.pages]
    except PyPdfError as exc:
        raise InvalidInputError(f"not a readable PDF ({exc})") from exc
    return "\n".join(f"--- page {n} ---\n{text}" for n, text in enumerate(texts, start=1))


def chunk_text(text: str, kind: FileKind) -> list[Chunk]:
    """Split extracted text into chunks according to the file kind."""
    pieces = list(_CHUNKERS.get(kind, _paragraph_pieces)(text))
    return [
        Chunk(ordinal=index, text=body, start_line=start, end_line=end, locator=locator)
        for index, (body, start, end, locator) in enumerate(
            piece for piece in pieces if piece[0].strip()
        )
    ]


Piece = tuple[str, int, int, str]


def _paragraph_pieces(text: str, locator: str = "", first_line: int = 1) -> Iterator[Piece]:
    """Windows of whole lines up to MAX_CHUNK_CHARS, preferring to break at blank lines."""
    lines = split_lines(text)
    buffer: list[str] = []
    start = first_line
    for offset, line in enumerate(lines):
        number = first_line + offset
        too_long = sum(len(item) + 1 for item in buffer) + len(line) > MAX_CHUNK_CHARS
        if buffer and (too_long or (not line.strip() and _size(buffer) > MAX_CHUNK_CHARS // 2)):
            yield "\n".join(buffer).strip(), start, number - 1, locator
            buffer, start = [], number
        if not buffer and not line.strip():
            start = number + 1
            continue
        buffer.append(line[: MAX_CHUNK_CHARS * 4])
    if buffer:
        yield "\n".join(buffer).strip(), start, first_line + len(lines) - 1, locator


def _size(buffer: list[str]) -> int:
    return sum(len(item) + 1 for item in buffer)


def _markdown_pieces(text: str) -> Iterator[Piece]:
    lines = split_lines(text)
    sections: list[tuple[int, list[str], str]] = []
    trail: list[tuple[int, str]] = []
    current: list[str] = []
    current_start, current_title = 1, ""
    in_fence = False
    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _HEADING.match(line)
        if heading:
            sections.append((current_start, current, current_title))
            level = len(heading.group(1))
            trail = [item for item in trail if item[0] < level] + [(level, heading.group(2))]
            current, current_start = [], number
            current_title = " > ".join(title for _, title in trail)
        current.append(line)
    sections.append((current_start, current, current_title))
    for start, body, title in sections:
        yield from _paragraph_pieces("\n".join(body), title, start)


def _csv_pieces(text: str) -> Iterator[Piece]:
    sample = text[:4096]
    delimiter = "\t" if sample.count("\t") > sample.count(",") else ","
    try:
        records = _csv_records(text, delimiter)
    except csv.Error:
        yield from _paragraph_pieces(text)
        return
    if not records:
        return
    header = [cell.strip() or f"column_{index + 1}" for index, cell in enumerate(records[0][2])]
    data = [
        (number, first, last, row)
        for number, (first, last, row) in enumerate(records[1:], start=1)
        if any(row)
    ]
    per_chunk = max(1, math.ceil(len(data) / MAX_CSV_CHUNKS))
    for index in range(0, len(data), per_chunk):
        group = data[index : index + per_chunk]
        body = "\n".join(_csv_row(header, row) for *_, row in group)
        first_row, last_row = group[0][0], group[-1][0]
        locator = f"row {first_row}" if first_row == last_row else f"rows {first_row}-{last_row}"
        yield body, group[0][1], group[-1][2], locator


def _csv_records(text: str, delimiter: str) -> list[tuple[int, int, list[str]]]:
    """(first line, last line, cells) of every record; a quoted cell may span several lines,
    and the reader's source splits lines at "\n" only, as ``split_lines`` does."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    records = []
    previous_end = 0
    for row in reader:
        records.append((previous_end + 1, reader.line_num, row))
        previous_end = reader.line_num
    return records


def _csv_row(header: list[str], row: list[str]) -> str:
    cells = []
    for index, value in enumerate(row):
        name = header[index] if index < len(header) else f"column_{index + 1}"
        cells.append(f"{name}: {value.strip()}")
    return "; ".join(cells)


def _json_pieces(text: str) -> Iterator[Piece]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        yield from _paragraph_pieces(text)
        return
    groups = _json_groups(data, "$")
    spans = _json_group_lines(text, data, len(groups))
    for (locator, leaves), (first, last) in zip(groups, spans, strict=True):
        buffer: list[str] = []
        for leaf in leaves:
            if buffer and _size(buffer) + len(leaf) > MAX_CHUNK_CHARS:
                yield "\n".join(buffer), first, last, locator
                buffer = []
            buffer.append(leaf[: MAX_CHUNK_CHARS * 2])
        if buffer:
            yield "\n".join(buffer), first, last, locator


def _json_groups(data: Any, root: str) -> list[tuple[str, list[str]]]:
    """One group per record of a top-level list, per top-level key of an object."""
    if isinstance(data, list):
        return [
            (f"{root}[{index}]", _leaves(item, f"{root}[{index}]"))
            for index, item in enumerate(data)
        ]
    if isinstance(data, dict):
        return [(f"{root}.{key}", _leaves(value, f"{root}.{key}")) for key, value in data.items()]
    return [(root, _leaves(data, root))]


def _json_group_lines(text: str, data: Any, count: int) -> list[tuple[int, int]]:
    """The line span of each top-level member, found by decoding the members in order."""
    last_line = max(1, len(split_lines(text)))
    starts = _member_offsets(text, data)
    if len(starts) != count:
        return [(1, last_line)] * count
    lines = [text.count("\n", 0, offset) + 1 for offset in starts]
    ends = [max(line, following - 1) for line, following in itertools.pairwise(lines)]
    return list(zip(lines, [*ends, last_line], strict=True))


def _member_offsets(text: str, data: Any) -> list[int]:
    decoder = json.JSONDecoder()
    offsets: list[int] = []
    position = text.index("[" if isinstance(data, list) else "{") + 1 if text.strip() else 0
    if not isinstance(data, list | dict):
        return [0]
    for _ in range(len(data)):
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        offsets.append(position)
        try:
            if isinstance(data, dict):
                _, position = decoder.raw_decode(text, position)
                position = text.index(":", position) + 1
                while text[position] in " \t\r\n":
                    position += 1
            _, position = decoder.raw_decode(text, position)
        except (ValueError, IndexError):
            return []
    return offsets


def _leaves(data: Any, path: str) -> list[str]:
    if isinstance(data, dict):
        if not data:
            return [f"{path} = {{}}"]
        return [leaf for key, value in data.items() for leaf in _leaves(value, f"{path}.{key}")]
    if isinstance(data, list):
        if not data:
            return [f"{path} = []"]
        return [
            leaf for index, value in enumerate(data) for leaf in _leaves(value, f"{path}[{index}]")
        ]
    return [f"{path} = {json.dumps(data, ensure_ascii=False)}"]


def _jsonl_pieces(text: str) -> Iterator[Piece]:
    for number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            leaves = _leaves(json.loads(line), "$")
            body = "\n".join(leaves)
        except json.JSONDecodeError:
            body = line
        yield body[: MAX_CHUNK_CHARS * 2], number, number, f"line {number}"


def _code_pieces(text: str) -> Iterator[Piece]:
    """Top-level blocks (def/class/function…), each split further if long."""
    lines = split_lines(text)
    starts = [0] + [
        index for index, line in enumerate(lines) if index > 0 and _CODE_BLOCK_START.match(line)
    ]
    bounds = list(zip(starts, [*starts[1:], len(lines)], strict=True))
    for begin, end in bounds:
        block = lines[begin:end]
        first = block[0].strip() if block else ""
        locator = first[:80] if _CODE_BLOCK_START.match(first) else ""
        yield from _paragraph_pieces("\n".join(block), locator, begin + 1)


def _pdf_pieces(text: str) -> Iterator[Piece]:
    lines = split_lines(text)
    page_starts = [index for index, line in enumerate(lines) if line.startswith("--- page ")]
    bounds = zip(page_starts, [*page_starts[1:], len(lines)], strict=True)
    for begin, end in bounds:
        locator = lines[begin].strip("- ")
        yield from _paragraph_pieces("\n".join(lines[begin + 1 : end]), locator, begin + 2)


_CHUNKERS = {
    "markdown": _markdown_pieces,
    "csv": _csv_pieces,
    "json": _json_pieces,
    "jsonl": _jsonl_pieces,
    "code": _code_pieces,
    "pdf": _pdf_pieces,
    "text": _paragraph_pieces,
}
