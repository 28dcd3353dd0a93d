"""A trunk played and summarized by the real embedded SmolLM2 is reproducible: built by two
fresh processes in fresh folders, one as usual (every turn reusing the KV cache of the turns
before it) and one with a fresh model worker before every turn (a trunk resumed turn by turn:
no turn finds anything in the cache), it holds the same conversation and the same summary, and
its snapshots differ only in the ledger's cached-token counts, a statistic of the cache
(runtime/backbones/llama/prefill.py). Two builds made alike also have equal counts, hence
snapshots of one name (the default run, twice: docs/running.md, "Reproducibility")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.snapshot import load_snapshot, session_hash

pytestmark = pytest.mark.slow

BUILDER = Path(__file__).with_name("small_trunk.py")


def build(out: Path, *options: str) -> dict[str, Any]:
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    subprocess.run(
        [sys.executable, str(BUILDER), str(out), *options],
        check=True,
        env=environment,
        timeout=900,
    )
    built: dict[str, Any] = json.loads((out / "trunk.json").read_text())
    return built


def without_cache_counts(snapshot: Path) -> str:
    session = load_snapshot(snapshot)
    for call in session.ledger.calls:
        call.cached_tokens = 0
    session.ledger.total_cached_tokens = 0
    return session_hash(session)


def turn_reuse(snapshot: Path) -> int:
    return sum(c.cached_tokens for c in load_snapshot(snapshot).ledger.calls if c.purpose == "turn")


def test_a_small_trunk_is_the_same_whatever_its_cache_held(tmp_path: Path) -> None:
    warm, cold = build(tmp_path / "warm"), build(tmp_path / "cold", "--worker-per-turn")
    assert len(warm["summaries"]) == 1 and warm["summaries"][0].strip()
    assert cold["summaries"] == warm["summaries"]
    last = warm["snapshots"][-1], cold["snapshots"][-1]
    assert turn_reuse(tmp_path / "warm" / "snapshots" / last[0]) > 1000  # each turn's history
    assert turn_reuse(tmp_path / "cold" / "snapshots" / last[1]) == 0
    for ours, theirs in zip(warm["snapshots"], cold["snapshots"], strict=True):
        assert without_cache_counts(tmp_path / "warm" / "snapshots" / ours) == (
            without_cache_counts(tmp_path / "cold" / "snapshots" / theirs)
        )
