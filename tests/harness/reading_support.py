"""A run folder shaped like the default run's (issue 49): the embedded model that fails the
protocol, the three reference agents, the profile's four states and summary-format arms, and
summaries that carry Markdown of their own (``## Goal``, ``- **bold**``, a fence)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from harness.kit.results import ResultsLog
from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record
from harness.mirage.report.formats import FormatSummary, write_summaries
from harness.mirage.scoring import Gold
from tests.harness.report_support import ANSWERABLE, RESOLVER, SOURCE, UNANSWERABLE, VALUE

MODEL = "local/smollm2-135m"
RETRIEVER, READER, CONFABULATOR = (
    "reference/retriever",
    "reference/context-reader",
    "reference/confabulator",
)
PROFILE_STATES = ("S1-d0", "S1-d50k", "S1-d80k", "S2")
CALIBRATION_ARMS = (
    "verbatim~reference/keep-charts",
    "free-form~reference/keep-charts",
    "per-fact-citations~reference/keep-charts",
    "verbatim~reference/keep-nothing",
)
FIVE_FORMATS = (
    "verbatim",
    "free-form",
    "per-fact-citations",
    "template:examples/compaction/summary_template.txt",
    "free-form~reference/keep-nothing",
)
FIVE_FORMAT_STUDY = (*FIVE_FORMATS, *CALIBRATION_ARMS)  # with the references: the arms too
SUMMARY_WITH_MARKDOWN = (
    "## Goal\nContinue the conversation.\n## Progress\n- **Flagged:** nothing\n"
    "```\n# Apple harvest\n```\n"
)
GROUNDED = f"ANSWERABLE=YES\nSOURCE={SOURCE}\nANSWER={VALUE}"
ABSTAINED = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
CONFABULATED = "ANSWERABLE=YES\nSOURCE=NONE\nANSWER=1234"
PARROT = "Saved. I've filed it in your workspace."


def arm_state(summary_format: str) -> str:
    from harness.mirage.trunk.checkpoints import checkpoint_dir_name

    return checkpoint_dir_name("S2", summary_format)


DEGENERATE = " ".join(f"[{n}]" for n in range(1, 13))  # one pattern repeated: flagged


def _reply(model: str, state: str, answerable: bool, s2_kept: bool) -> str:
    """The embedded model parrots (a PF), the confabulator says YES to everything, the
    retriever finds every answer; the context-reader loses what the state's summary dropped."""
    if model == MODEL:
        return PARROT
    if model == CONFABULATOR:
        return CONFABULATED
    if not answerable:
        return ABSTAINED
    kept = s2_kept if state == "S2" else "keep-charts" in state and "free-form" not in state
    if model == READER and state.startswith("S2") and not kept:
        return ABSTAINED
    return GROUNDED


def write_study(
    run: Path, formats: Sequence[str] = ("verbatim", *CALIBRATION_ARMS), s2_kept: bool = False
) -> dict[str, list[ProbeRecord]]:
    """``run/`` with one result folder per answerer; the first of ``formats`` is the trunk's own
    S2 (written by the embedded model, degenerate), each other one a state ``S2@<format>``
    probed by the references only; ``s2_kept``: the context-reader still answers at S2.
    Returns each answerer's records."""
    run.mkdir(parents=True, exist_ok=True)
    config = {"pack": "mirage-core", "profile": "scaled", "summary_formats": list(formats)}
    (run / "run.json").write_text(json.dumps(config))
    states = {state: None for state in PROFILE_STATES[:-1]}
    states |= {"S2": formats[0], **{arm_state(f): f for f in formats[1:]}}
    found = {}
    for model in (MODEL, CONFABULATOR, READER, RETRIEVER):
        folder = run / model.replace("/", "_")
        records = []
        with ResultsLog(folder / "results.jsonl", ProbeRecord) as results:
            for state, summary_format in states.items():
                if model == MODEL and "@" in state:
                    continue
                for cond in ("C0", "Cm"):
                    for question in (ANSWERABLE, UNANSWERABLE):
                        answerable = question.gold_answerable == "YES"
                        record = build_record(
                            RecordKey(state, cond, question.id, 0),
                            _reply(model, state, answerable, s2_kept),
                            Gold.from_question(question),
                            RESOLVER,
                            model=model,
                            summary_format=summary_format,
                            state_eit={"S1-d0": 3600, "S1-d50k": 3800}.get(state, 5500),
                        )
                        results.append(record)
                        records.append(record)
        summaries = [
            FormatSummary(
                state=state,
                summary_format=summary_format,
                text=DEGENERATE if state == "S2" and not s2_kept else SUMMARY_WITH_MARKDOWN,
                tokens=40,
                summarizer_model=None if "~" in summary_format else MODEL,
            )
            for state, summary_format in states.items()
            if summary_format is not None and (model != MODEL or "@" not in state)
        ]
        write_summaries(folder, summaries)
        found[model] = records
    return found
