"""The reference agents' reading rules, the instrument check and the comparison's opening
(docs/references.md), on small inputs; the agents end to end are in test_references_e2e."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.mirage.config import RunConfig
from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record
from harness.mirage.protocol import CONDITIONS, PROFILE_NAMES, probe_prompt
from harness.mirage.references import REFERENCE_MODELS, make_reference
from harness.mirage.references.reading import (
    artifact_ids,
    question_from_probe,
    read_value,
)
from harness.mirage.report.aggregate import aggregate
from harness.mirage.report.instrument import AVAILABLE_NOT_USED, check_markdown, instrument_check
from harness.mirage.report.overview import overview
from harness.mirage.scoring import Gold
from runtime.backbones import DEFAULT_MODEL

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "According to the apple harvest chart I shared, what was the Elmbrook harvest in 2019?"
CSV = "Year,Elmbrook,Kestrel,Harlow\n2018,39.5,33.9,21.0\n2019,47.3,31.4,24.6"
RECALLED = '$.unit = "thousand tonnes"\nYear: 2019; Elmbrook: 47.3; Kestrel: 31.4; Harlow: 24.6'


@pytest.mark.parametrize("profile", PROFILE_NAMES)
@pytest.mark.parametrize("condition", CONDITIONS)
def test_the_question_comes_out_of_every_probe_wording(profile: str, condition: str) -> None:
    message = probe_prompt(QUESTION, condition, profile)  # type: ignore[arg-type]
    assert question_from_probe(message) == QUESTION


def test_a_message_in_no_known_wording_is_the_question() -> None:
    assert question_from_probe("  What was it?  ") == "What was it?"


def test_cell_rule_reads_a_csv_table_and_a_recalled_row() -> None:
    assert read_value(QUESTION, CSV) == "47.3"
    assert read_value(QUESTION, RECALLED) == "47.3"


def test_a_named_table_without_the_asked_row_fits_nothing() -> None:
    assert read_value(QUESTION.replace("2019", "2014"), CSV) is None
    assert read_value(QUESTION.replace("2019", "2014"), RECALLED) is None


def test_clause_rule_takes_the_number_of_the_best_clause() -> None:
    evidence = "- Name: Maya Okafor\n- Workouts 248; distance 1942.6 km; active time 187.5 h"
    assert read_value("What active time has Maya logged?", evidence) == "187.5"
    assert read_value("What distance has Maya run?", evidence) is None  # one shared word
    assert read_value("Which colour is the Larkspur logo?", evidence) is None


def test_artifact_ids_in_order_of_mention() -> None:
    text = "filed as chart_17eee3bd (see derived/chart_17eee3bd.json) and ui_9bd5e7db"
    assert artifact_ids(text) == ["chart_17eee3bd", "ui_9bd5e7db"]


def test_make_reference_knows_the_three_and_refuses_others() -> None:
    assert [make_reference(m).name for m in REFERENCE_MODELS] == list(REFERENCE_MODELS)
    with pytest.raises(ValueError, match="unknown reference agent 'reference/oracle'"):
        make_reference("reference/oracle")


def test_references_join_the_default_models_only() -> None:
    assert RunConfig().answerers == [DEFAULT_MODEL, *REFERENCE_MODELS]
    assert RunConfig(models=["m"]).answerers == ["m"]
    assert RunConfig(models=["m"], references=True).answerers == ["m", *REFERENCE_MODELS]
    assert RunConfig(references=False).answerers == [DEFAULT_MODEL]
    only = RunConfig(models=["reference/retriever"]).answerers
    assert only == ["reference/retriever"]


def _record(
    state: str,
    question: str,
    reply: str,
    gold: Gold,
    path: str,
    declared: str | None,
    model: str,
) -> ProbeRecord:
    record = build_record(
        RecordKey(state, "C0", question, 0),
        reply,
        gold,
        None,
        declared_path=declared,
        model=model,
        trace={"reference": {"kind": model}, "declared_path": declared},
    )
    return record.model_copy(update={"path": path})  # the harness's label, given


YES = Gold(answerable="YES", source="chart_17eee3bd", answer="47.3", answer_type="numeric")
GROUNDED = "ANSWERABLE=YES\nSOURCE=chart_17eee3bd\nANSWER=47.3"
ABSTAIN = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
MADE_UP = "ANSWERABLE=YES\nSOURCE=ui_9bd5e7db\nANSWER=12.0"


def _reference_records() -> dict[str, list[ProbeRecord]]:
    return {
        "reference/retriever": [
            _record(s, "q1", GROUNDED, YES, "R_tool", "R_tool", "reference/retriever")
            for s in ("S1-d0", "S2")
        ],
        "reference/context-reader": [
            _record("S1-d0", "q1", GROUNDED, YES, "R_context", "R_context", "c"),
            _record("S2", "q1", ABSTAIN, YES, "R_none", None, "c"),
        ],
        "reference/confabulator": [
            _record("S1-d0", "q1", MADE_UP, YES, "R_context", "R_none", "f"),
            _record("S2", "q1", MADE_UP, YES, "R_none", "R_none", "f"),
        ],
    }


def test_instrument_check_counts_agreement_per_label_and_lists_disagreements() -> None:
    check = instrument_check(_reference_records())
    assert check is not None
    assert (check.declared, check.agreed, check.abstained) == (5, 4, 1)
    assert {r.label: (r.declared, r.agreed) for r in check.labels} == {
        "R_context": (1, 1),
        "R_none": (2, 1),
        "R_tool": (2, 2),
    }
    [wrong] = check.disagreements
    assert (wrong.answerer, wrong.state, wrong.declared, wrong.labelled) == (
        "reference/confabulator",
        "S1-d0",
        "R_none",
        "R_context",
    )
    assert wrong.question_ids == ["q1"]
    text = check_markdown(check)
    assert (
        "**4 of 5**" in text and "reference/confabulator | S1-d0 | C0 | R_none | R_context" in text
    )
    assert AVAILABLE_NOT_USED in text


def test_no_reference_records_no_check() -> None:
    plain = _record("S1-d0", "q1", GROUNDED, YES, "R_tool", None, "m")
    plain = plain.model_copy(update={"trace": {}})
    assert instrument_check({"m": [plain]}) is None


def test_overview_says_what_the_rows_show_and_the_models_pf() -> None:
    records = _reference_records()
    records["smollm"] = [
        build_record(RecordKey(s, "C0", "q1", 0), "Saved. I've filed it.", YES, None)
        for s in ("S1-d0", "S2")
    ]
    text = overview({label: aggregate(rs) for label, rs in records.items()})
    assert "reference/context-reader's GC falls (100% at S1-d0, 0% at S2" in text
    assert "reference/retriever's GC holds (100% at S1-d0, 100% at S2" in text
    assert "has AC 100% next to GC 0%" in text
    assert "smollm: every one of its 2 replies failed the protocol (PF 2 of 2)" in text
    assert overview({"smollm": aggregate(records["smollm"])}) == ""


def test_the_references_load_no_pack_and_no_scorer() -> None:
    """What the agents import cannot read a pack's questions, gold or manifest."""
    code = (
        "import sys, harness.mirage.references\n"
        "bad = [m for m in sys.modules if m.startswith(('harness.mirage.packs', "
        "'harness.mirage.scoring', 'harness.mirage.probing.records'))]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
