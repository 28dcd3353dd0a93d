"""Assertions for command-line failures: a clean exit with one readable line, no traceback."""

from __future__ import annotations

from click.testing import Result


def assert_one_line_error(result: Result, *fragments: str, exit_code: int | None = None) -> str:
    """``result`` failed through ``typer.Exit`` (not an escaped exception) and one line of its
    output carries every fragment; returns that line."""
    assert result.exit_code != 0, result.output
    if exit_code is not None:
        assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if all(f in line for f in fragments)]
    assert len(lines) == 1, result.output
    return lines[0]
