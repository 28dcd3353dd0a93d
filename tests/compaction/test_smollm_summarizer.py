"""Real compactions with the embedded SmolLM2-135M as summarizer, every format, one through
the ``mirage compact`` command."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from compaction.compactor import compact
from compaction.transcript import previous_summary
from mirage.cli import app
from runtime.backbones import make_backbone
from runtime.session import Session
from runtime.snapshot import load_snapshot, save_snapshot

EXAMPLES = Path(__file__).parents[2] / "examples" / "compaction"


def _load_example_session() -> Callable[..., Session]:
    spec = importlib.util.spec_from_file_location("compaction_example", EXAMPLES / "session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.example_session  # type: ignore[no-any-return]


example_session = _load_example_session()

pytestmark = pytest.mark.slow
TEMPLATE = f"template:{EXAMPLES / 'summary_template.txt'}"


@pytest.mark.parametrize("summary_format", ["free-form", "per-fact-citations", TEMPLATE])
async def test_smollm2_writes_a_summary_in_each_format(summary_format: str) -> None:
    session = example_session(filler_rounds=2)
    kept = session.messages[-3:]
    summarizer = make_backbone(
        "local/smollm2-135m", max_output_tokens=32, context_window=4_096, n_threads=1
    )
    record = await compact(session, summary_format, summarizer, keep_recent_tokens=150)
    assert record.summary.strip()
    assert record.format == summary_format and record.summarizer_model == "local/smollm2-135m"
    assert previous_summary(session.messages[0]) == record.summary
    assert session.messages[-3:] == kept
    assert session.ledger.calls[-1].purpose == "summary"


def test_mirage_compact_with_smollm2(tmp_path: Path, cli_runner: CliRunner) -> None:
    source = save_snapshot(example_session(filler_rounds=2), tmp_path / "in")
    raw = source.read_bytes()
    result = cli_runner.invoke(
        app,
        [
            "compact",
            str(source),
            "--format",
            "verbatim",
            "--summarizer",
            "local/smollm2-135m",
            "--max-summary-tokens",
            "32",
            "--keep-recent-tokens",
            "150",
            "--focus",
            "the invoice",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 0, result.output
    path = Path(result.output.splitlines()[0])
    assert path.parent == tmp_path / "out" and source.read_bytes() == raw
    assert "tokens before:" in result.output and "tokens after:" in result.output
    record = load_snapshot(path).compaction.records[0]
    assert (record.format, record.summarizer_model, record.focus) == (
        "verbatim",
        "local/smollm2-135m",
        "the invoice",
    )
    assert record.tokens_after < record.tokens_before
