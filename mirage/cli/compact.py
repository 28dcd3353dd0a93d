"""``mirage compact``: compact a saved session snapshot with a chosen summary format.

One pre-compaction checkpoint yields one post-compaction (S2) checkpoint per format; the input
snapshot is never modified. Heavy modules load inside the command, not at import.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mirage.cli.options import (
    EXIT_FAILURE,
    MAX_OUTPUT_TOKENS,
    OUT,
    SUMMARY_FORMAT,
    aliased,
    fail,
    folder_to_write,
)

if TYPE_CHECKING:
    from runtime.session import CompactionRecord

FORMAT_HELP = (
    "Summary format: verbatim (default), free-form, per-fact-citations, or template:FILE "
    "(placeholders {transcript} {focus} {previous_summary} {first_index} {last_index} "
    "{message_count})."
)

SessionArg = Annotated[Path, typer.Argument(help="Session snapshot file (*.session) to compact.")]
OutOpt = Annotated[
    Path, typer.Option(*OUT, help="Directory for the new snapshot.", callback=folder_to_write)
]
SummaryFormatOpt = Annotated[str, typer.Option(*SUMMARY_FORMAT, help=FORMAT_HELP)]
OldFormatOpt = Annotated[str | None, typer.Option("--format", hidden=True)]
SummarizerOpt = Annotated[
    str | None,
    typer.Option(
        "--summarizer",
        help="Summarizer model, or a reference summarizer (reference/keep-charts, "
        "reference/names-only, reference/keep-nothing; docs/references.md); default: the "
        "session's own model.",
    ),
]
FocusOpt = Annotated[
    str | None, typer.Option("--focus", help="Focus instructions for the summary.")
]
KeepRecentTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--keep-recent-tokens",
        min=0,
        help="Verbatim tail (default: the policy's budget for the session's window).",
    ),
]
MaxOutputTokensOpt = Annotated[
    int | None,
    typer.Option(*MAX_OUTPUT_TOKENS, min=1, help="Output budget of each summary call."),
]
OldMaxTokensOpt = Annotated[int | None, typer.Option("--max-summary-tokens", min=1, hidden=True)]
ApiBaseOpt = Annotated[str | None, typer.Option("--api-base", help="API base of the summarizer.")]


def compact_command(
    session: SessionArg,
    out: OutOpt,
    summary_format: SummaryFormatOpt = "verbatim",
    old_format: OldFormatOpt = None,
    summarizer: SummarizerOpt = None,
    focus: FocusOpt = None,
    keep_recent_tokens: KeepRecentTokensOpt = None,
    max_output_tokens: MaxOutputTokensOpt = None,
    old_max_tokens: OldMaxTokensOpt = None,
    api_base: ApiBaseOpt = None,
) -> None:
    """Compact SESSION into a new snapshot under --out and print its path and token counts."""
    summary_format = aliased(summary_format, old_format, "--format", SUMMARY_FORMAT[0])
    budget = aliased(
        max_output_tokens, old_max_tokens, "--max-summary-tokens", MAX_OUTPUT_TOKENS[0]
    )
    path, record = _compact(
        session,
        out,
        summary_format,
        summarizer=summarizer,
        focus=focus,
        keep_recent_tokens=keep_recent_tokens,
        max_output_tokens=budget,
        api_base=api_base,
    )
    typer.echo(str(path))
    typer.echo(f"format: {record.format}  summarizer: {record.summarizer_model}")
    typer.echo(f"tokens before: {record.tokens_before}  tokens after: {record.tokens_after}")


def _compact(
    session: Path,
    out: Path,
    summary_format: str,
    *,
    summarizer: str | None,
    focus: str | None,
    keep_recent_tokens: int | None,
    max_output_tokens: int | None,
    api_base: str | None,
) -> tuple[Path, CompactionRecord]:
    """The new snapshot's path and its compaction record; bad input (a snapshot, a format, a
    template) ends the command as a usage error, a failed summary call as a runtime failure."""
    from compaction.compactor import compact_snapshot
    from compaction.errors import CompactionError
    from compaction.references import make_summarizer
    from compaction.strategies import get_strategy
    from runtime.backbones.base import ProviderError
    from runtime.snapshot import SnapshotError, load_snapshot

    try:
        strategy = get_strategy(summary_format)
        model = summarizer or load_snapshot(session).config.model
        backbone = make_summarizer(model, api_base=api_base, max_output_tokens=max_output_tokens)
        return asyncio.run(
            compact_snapshot(
                session, out, strategy, backbone, focus=focus, keep_recent_tokens=keep_recent_tokens
            )
        )
    except (SnapshotError, ValueError) as error:  # bad input (a template error is both)
        raise fail(str(error)) from error
    except (CompactionError, ProviderError) as error:
        raise fail(str(error), EXIT_FAILURE) from error


def register(app: typer.Typer) -> None:
    app.command("compact")(compact_command)
