"""The trunk's day is fixed (issue 44, item 4): its memory flush names, and its notes land in,
``memory/<TRUNK_DATE>.md`` whatever day the trunk is built, so two builds of one family are
identical on any day."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from compaction.flush import flush_records
from harness.mirage.config import RunConfig
from harness.mirage.run import MirageRun
from harness.mirage.trunk.runner import TRUNK_DATE
from runtime.snapshot import load_snapshot

pytestmark = pytest.mark.slow  # a whole scripted run: ~30 s of CPU


async def test_the_trunk_writes_its_notes_on_its_own_day(tmp_path: Path) -> None:
    assert dt.date.today().isoformat() != TRUNK_DATE
    config = RunConfig(
        models=["reference/retriever"],
        references=False,
        trunk_model="scripted",
        summarizer_model="reference/keep-charts",
        limit=2,
        out=tmp_path / "run",
    )
    run = MirageRun(config)
    await run.execute()
    notes = sorted(p.name for p in (run.workspace / "memory").glob("*.md"))
    assert notes == [f"{TRUNK_DATE}.md"]
    checkpoints = run.family.existing()
    assert checkpoints is not None
    session = load_snapshot(checkpoints["S2"].snapshot_path)
    [flush] = flush_records(session)
    assert flush.appended > 0
    assert all(TRUNK_DATE in (call.result or "") for call in flush.tool_calls)
