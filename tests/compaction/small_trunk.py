"""A small trunk played and summarized by the real embedded SmolLM2, built by its own process:
``python small_trunk.py OUT [--worker-per-turn]``. Six user turns on a 1,024-token window, so
the context crosses the compaction threshold and SmolLM2 writes a summary on the way; the
session is saved after every turn (content-addressed, named as mirage's checkpoints are) and
``OUT/trunk.json`` lists the snapshots and the summary. ``--worker-per-turn`` starts a fresh
model worker before every turn, so no call finds anything in its KV cache (a trunk resumed
turn by turn). Used by ``test_reproducible_trunk.py``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from compaction.config import CompactionConfig
from compaction.policy import CompactionPolicy
from runtime.agent import Agent
from runtime.backbones import EmbeddedBackbone
from runtime.backbones.llama.worker import close_workers
from runtime.session import AgentConfig, Session
from runtime.snapshot import save_snapshot

HARVEST = "\n".join(
    f"{year},{41.2 + 2.1 * n:.1f},{28.7 + 1.6 * n:.1f},{19.4 + 1.7 * n:.1f}"
    for n, year in enumerate(range(2012, 2024))
)
TURNS = (
    "Please keep this chart of the apple harvest (thousand tonnes) by valley, from the Regional "
    f"Orchard Growers Board, artifact chart_17eee3bd:\nYear,Elmbrook,Kestrel,Harlow\n{HARVEST}",
    "Our cooperative meets every second Tuesday in the Kestrel barn; note that too.",
    "Draft one sentence for the newsletter about the 2023 harvest.",
    "Which valley did I mention, and what was its 2023 figure?",
    "Suggest a title for the newsletter's harvest section.",
    "Remind me where the cooperative meets.",
)
WINDOW = 1024


async def build(out: Path, worker_per_turn: bool) -> None:
    backbone = EmbeddedBackbone(max_output_tokens=24, context_window=2048)
    config = AgentConfig(model=backbone.model, context_window=WINDOW, max_output_tokens=24)
    session = Session.new(config, context_window=WINDOW).model_copy(
        update={"session_id": "small-trunk"}
    )
    policy = CompactionPolicy(
        CompactionConfig(window_cap=WINDOW, memory_flush=False), summarizer=backbone
    )
    agent = Agent(session, backbone, policy=policy)
    snapshots = []
    for text in TURNS:
        if worker_per_turn:
            close_workers()
        await agent.turn(text)
        snapshots.append(save_snapshot(agent.session, out / "snapshots").name)
    records = agent.session.compaction.records
    result = {"snapshots": snapshots, "summaries": [record.summary for record in records]}
    (out / "trunk.json").write_text(json.dumps(result, indent=1))
    close_workers()


if __name__ == "__main__":
    asyncio.run(build(Path(sys.argv[1]), "--worker-per-turn" in sys.argv[2:]))
