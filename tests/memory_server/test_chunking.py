"""Chunking per file kind keeps the evidence findable and the line ranges exact."""

from __future__ import annotations

import json

import pytest

from memory_server.chunking import MAX_CHUNK_CHARS, chunk_text
from memory_server.lines import split_lines
from tests.memory_server.conftest import INVOICE, NOTE, SCRIPT, TABLE


def _lines(text: str, start: int, end: int) -> str:
    return "\n".join(split_lines(text)[start - 1 : end])


def test_markdown_sections_carry_heading_trail() -> None:
    chunks = chunk_text(NOTE, "markdown")
    by_locator = {chunk.locator: chunk for chunk in chunks}
    assert "2026-01-03 > Rent" in by_locator
    rent = by_locator["2026-01-03 > Rent"]
    assert "chart_3f9a1c20" in rent.text
    assert "chart_3f9a1c20" in _lines(NOTE, rent.start_line, rent.end_line)
    assert "window seats" in by_locator["2026-01-03 > Travel"].text


def test_markdown_heading_inside_code_fence_is_not_a_section() -> None:
    text = "# Title\n\n```\n# not a heading\n```\n\nbody\n"
    assert [chunk.locator for chunk in chunk_text(text, "markdown")] == ["Title"]


def test_csv_rows_carry_headers_and_line_numbers() -> None:
    chunks = chunk_text(TABLE, "csv")
    assert len(chunks) == 4
    first = chunks[0]
    assert first.text == "city: Berlin; year: 2019; median_rent_eur: 1830"
    assert (first.start_line, first.end_line, first.locator) == (2, 2, "row 1")
    munich = next(chunk for chunk in chunks if "Munich" in chunk.text)
    assert _lines(TABLE, munich.start_line, munich.end_line) == "Munich,2019,2240"


def test_csv_record_with_a_multiline_cell_cites_all_its_lines() -> None:
    text = 'item,note\nA,"first\nsecond"\n\nB,plain\n'
    chunks = chunk_text(text, "csv")
    assert [(c.start_line, c.end_line, c.locator) for c in chunks] == [
        (2, 3, "row 1"),
        (5, 5, "row 3"),
    ]
    assert _lines(text, 2, 3) == 'A,"first\nsecond"'


@pytest.mark.parametrize("odd", ["\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c"], ids=repr)
@pytest.mark.parametrize("kind", ["markdown", "text", "code"])
def test_chunk_lines_are_the_lines_artifact_get_counts(odd: str, kind: str) -> None:
    text = f"# Notes\n\nfirst{odd}still the first line\nsecond line\n\n## Later\nthird\n"
    chunks = chunk_text(text, kind)
    assert chunks
    for chunk in chunks:
        cited = _lines(text, chunk.start_line, chunk.end_line)
        assert chunk.text.strip() in cited
    later = next(chunk for chunk in chunks if "third" in chunk.text)
    assert _lines(text, later.end_line, later.end_line) == "third"


def test_tsv_is_detected() -> None:
    chunks = chunk_text("name\tvalue\nalpha\t1\n", "csv")
    assert chunks[0].text == "name: alpha; value: 1"


def test_json_fields_are_flattened_per_top_level_key() -> None:
    chunks = chunk_text(INVOICE, "json")
    texts = "\n".join(chunk.text for chunk in chunks)
    assert '$.invoice_number = "INV-2023-0042"' in texts
    assert "$.total_eur = 4812.5" in texts
    assert '$.lines[1].item = "installation"' in texts
    assert {chunk.locator for chunk in chunks} >= {"$.invoice_number", "$.lines"}
    lines = next(chunk for chunk in chunks if chunk.locator == "$.lines")
    assert '"lines"' in _lines(INVOICE, lines.start_line, lines.start_line)
    assert (lines.start_line, lines.end_line) == (3, 4)  # the last line of the file


def test_json_list_of_records_gives_one_chunk_per_record() -> None:
    data = json.dumps([{"id": i, "name": f"item {i}"} for i in range(3)])
    chunks = chunk_text(data, "json")
    assert [chunk.locator for chunk in chunks] == ["$[0]", "$[1]", "$[2]"]
    pretty = json.dumps([{"id": i} for i in range(3)], indent=2)
    spans = [(chunk.start_line, chunk.end_line) for chunk in chunk_text(pretty, "json")]
    assert spans == [(2, 4), (5, 7), (8, 11)]


def test_invalid_json_falls_back_to_text() -> None:
    assert chunk_text("{not json", "json")[0].text == "{not json"


def test_jsonl_records_keep_their_line() -> None:
    chunks = chunk_text('{"a": 1}\n\n{"a": 2}\n', "jsonl")
    assert [(chunk.text, chunk.start_line) for chunk in chunks] == [("$.a = 1", 1), ("$.a = 2", 3)]


def test_code_is_split_at_top_level_blocks() -> None:
    chunks = chunk_text(SCRIPT, "code")
    assert chunks[0].locator.startswith("def monthly_payment")
    ledger = next(chunk for chunk in chunks if chunk.locator.startswith("class Ledger"))
    assert _lines(SCRIPT, ledger.start_line, ledger.start_line) == "class Ledger:"


def test_long_text_is_windowed_without_losing_lines() -> None:
    paragraphs = [f"Paragraph {i}: " + "word " * 60 for i in range(20)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text, "text")
    assert len(chunks) > 1
    assert all(len(chunk.text) <= MAX_CHUNK_CHARS for chunk in chunks)
    joined = " ".join(chunk.text for chunk in chunks)
    assert all(f"Paragraph {i}:" in joined for i in range(20))
    for chunk in chunks:
        assert _lines(text, chunk.start_line, chunk.end_line).strip() == chunk.text


@pytest.mark.parametrize("kind", ["markdown", "csv", "json", "code", "text", "jsonl"])
def test_empty_input_gives_no_chunks(kind: str) -> None:
    assert chunk_text("", kind) == []  # type: ignore[arg-type]
