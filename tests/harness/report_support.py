"""A result folder for report.html tests: records scored by ``build_record`` against questions of
the bundled pack, tool calls logged by the memory server's own ``CallLog``, every outcome once."""

from __future__ import annotations

import json
from pathlib import Path

from harness.kit.results import ResultsLog
from harness.mirage.packs import load_pack
from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record
from harness.mirage.scoring import Gold, KnownIdResolver
from memory_server.calllog import CallLog, CallRecord, now_iso

PACK = load_pack("mirage-core")
ANSWERABLE = next(q for q in PACK.questions if q.gold_answerable == "YES")
UNANSWERABLE = next(q for q in PACK.questions if q.gold_answerable == "NO")
RESOLVER = KnownIdResolver([str(ANSWERABLE.gold_source)])
SOURCE, VALUE = ANSWERABLE.gold_source, ANSWERABLE.gold_answer
STATES = ("S1-d0", "S1-d80k", "S2")
# per state: the answerable reply (grounded, ungrounded-but-correct, hallucinated) and the
# unanswerable one (refused, hallucinated, PF)
ANSWERABLE_REPLIES = (
    f"ANSWERABLE=YES\nSOURCE={SOURCE}\nANSWER={VALUE}",
    f"ANSWERABLE=YES\nSOURCE=NONE\nANSWER={VALUE}",
    "ANSWERABLE=YES\nSOURCE=NONE\nANSWER=1234",
)
UNANSWERABLE_REPLIES = (
    "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE",
    "ANSWERABLE=YES\nSOURCE=NONE\nANSWER=</script><script>alert(1)</script>",
    "I would rather not say.",
)


def write_result_folder(run: Path, model: str = "tester") -> Path:
    """``run/run.json`` naming the bundled pack and ``run/<model>/`` with records and calls."""
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text(json.dumps({"pack": "mirage-core", "profile": "scaled"}))
    folder = run / model
    calls = CallLog(folder / "calls.jsonl")
    with ResultsLog(folder / "results.jsonl", ProbeRecord) as results:
        for index, state in enumerate(STATES):
            for cond in ("C0", "Cm"):
                pairs = (
                    (ANSWERABLE, ANSWERABLE_REPLIES[index]),
                    (UNANSWERABLE, UNANSWERABLE_REPLIES[index]),
                )
                for question, reply in pairs:
                    key = RecordKey(state, cond, question.id, 0)
                    tag = f"{state}.{cond}.{question.id}.r0"
                    tool_calls = []
                    if cond == "Cm":
                        arguments = {"query": question.question, "k": 5}
                        tool_calls = [{"name": "artifact_recall", "arguments": arguments,
                                       "executed": True}]  # fmt: skip
                        calls.append(
                            CallRecord(time=now_iso(), tool="artifact_recall",
                                       arguments=arguments, hits=[str(SOURCE)], tag=tag,
                                       transport="http", latency_ms=12.5)
                        )  # fmt: skip
                    record = build_record(
                        key, reply, Gold.from_question(question), RESOLVER, model=model,
                        tag=tag, tool_calls=tool_calls, usage={"eit": 3000 + index,
                        "cached_tokens": 2048, "output_tokens": 20}, latency_s=0.25,
                    )  # fmt: skip
                    results.append(record)
    return folder
