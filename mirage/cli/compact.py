"""``mirage compact``: compact a saved session snapshot with a chosen summary format.

One pre-compaction checkpoint yields one post-compaction (S2) checkpoint per format; the input
snapshot is never modified. Heavy modules load inside the command, not at import.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

FORMAT_HELP = (
    "Summary format: verbatim (default), free-form, per-fact-citations, or template:FILE "
    "(placeholders {transcript} {focus} {previous_summary} {first_index} {last_index} "
    "{message_count})."
)


def compact_command(
    session: Annotated[Path, typer.Argument(help="Session snapshot file (*.session) to compact.")],
    out: Annotated[Path, typer.Option("--out", help="Directory for the new snapshot.")],
    summary_format: Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)] = "verbatim",
    summarizer: Annotated[
        str | None,
        typer.Option("--summarizer", help="Summarizer model (default: the session's own model)."),
    ] = None,
    focus: Annotated[
        str | None, typer.Option("--focus", help="Focus instructions for the summary.")
    ] = None,
    keep_recent_tokens: Annotated[
        int | None,
        typer.Option(
            "--keep-recent-tokens",
            min=0,
            help="Verbatim tail (default: the policy's budget for the session's window).",
        ),
    ] = None,
    max_summary_tokens: Annotated[
        int | None,
        typer.Option("--max-summary-tokens", min=1, help="Output budget of each summary call."),
    ] = None,
    api_base: Annotated[
        str | None, typer.Option("--api-base", help="API base of the summarizer.")
    ] = None,
) -> None:
    """Compact SESSION into a new snapshot under --out and print its path and token counts."""
    from compaction.compactor import compact_snapshot
    from compaction.errors import CompactionError
    from compaction.strategies import get_strategy
    from runtime.backbones import make_backbone
    from runtime.backbones.base import ProviderError
    from runtime.snapshot import SnapshotError, load_snapshot

    try:
        strategy = get_strategy(summary_format)
        model = summarizer or load_snapshot(session).config.model
        backbone = make_backbone(model, api_base=api_base, max_output_tokens=max_summary_tokens)
        path, record = asyncio.run(
            compact_snapshot(
                session, out, strategy, backbone, focus=focus, keep_recent_tokens=keep_recent_tokens
            )
        )
    except (SnapshotError, CompactionError, ProviderError, ValueError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=1) from error
    typer.echo(str(path))
    typer.echo(f"format: {record.format}  summarizer: {record.summarizer_model}")
    typer.echo(f"tokens before: {record.tokens_before}  tokens after: {record.tokens_after}")


def register(app: typer.Typer) -> None:
    app.command("compact")(compact_command)
