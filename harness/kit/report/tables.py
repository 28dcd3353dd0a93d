"""Markdown tables and the number format of every report cell.

Above: the protocols' reports and tables. Below: nothing but the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence

DASH = "—"
"""What a table shows where a value is undefined."""


def fmt(value: float | int | None, digits: int = 1, signed: bool = False) -> str:
    if value is None:
        return DASH
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
