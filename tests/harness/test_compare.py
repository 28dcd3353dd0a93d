"""Several answerers side by side: comparison.md / comparison.json from real records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.kit.results import ResultsLog, read_records
from harness.mirage.probing.records import ProbeRecord, RecordKey, build_record
from harness.mirage.report.compare import (
    ComparisonInputError,
    NotComparableError,
    result_dirs,
    write_comparison,
)
from harness.mirage.scoring import Gold, KnownIdResolver
from mirage.cli.report import register
from mirage.wiring import artifact_recall_tool
from runtime.backbones.scripted import FunctionBackbone
from runtime.compliance import run_compliance, write_report

RESOLVER = KnownIdResolver(["chart_1", "ui_2"])
GOLDS = {
    "a1": Gold(answerable="YES", source="chart_1", answer="42", answer_type="numeric"),
    "a2": Gold(answerable="YES", source="ui_2", answer="leelin", answer_type="string"),
    "u1": Gold(answerable="NO", artifact="chart_1"),
}
STATES = {"S1-d0": 2900, "S1-d50k": 3500, "S1-d80k": 5500, "S2": 6900}
GOOD = {
    "a1": "ANSWERABLE=YES\nSOURCE=chart_1\nANSWER=42",
    "a2": "ANSWERABLE=YES\nSOURCE=ui_2\nANSWER=LeeLin",
    "u1": "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE",
}
MIRAGE = "ANSWERABLE=YES\nSOURCE=NONE\nANSWER=7"


def _reply(model: str, state: str, question: str) -> str:
    decays = model == "decaying" and state in ("S1-d80k", "S2") and question != "u1"
    return MIRAGE if decays else GOOD[question]


def _write_run(out: Path, models: tuple[str, ...], pack: str = "mirage-core") -> Path:
    config = {"pack": pack, "profile": "scaled", "scoring": "paper", "summary_format": "verbatim"}
    out.mkdir(parents=True)
    (out / "run.json").write_text(json.dumps(config))
    for model in models:
        with ResultsLog(out / model / "results.jsonl", ProbeRecord) as results:
            for state, eit in STATES.items():
                for cond in ("C0", "Cm"):
                    for question, gold in GOLDS.items():
                        key = RecordKey(state, cond, question, 0)
                        reply = _reply(model, state, question)
                        record = build_record(
                            key, reply, gold, RESOLVER, model=model, state_eit=eit
                        )
                        results.append(record)
    return out


def _answerers(*paths: Path) -> dict[Path, list]:
    return {d: read_records(d, ProbeRecord) for d in result_dirs(list(paths))}


def test_one_block_per_model_and_a_ranking(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "run", ("steady", "decaying"))
    files = write_comparison(_answerers(run), run)
    text = files.markdown.read_text()
    assert "All answerers ran the same pack" in text
    appendix = files.appendix.read_text()  # Table 1's blocks: the full tables, linked
    assert "[comparison-appendix.md](comparison-appendix.md)" in text
    assert "| steady | S1-d0 |" in appendix and "|  | S1-d50k |" in appendix
    assert "| decaying | S1-d0 |" in appendix
    assert "| steady | C0 | 100 | 100 | 100 | 100 | 0 | 0 | 0/12 | none 100 |" in text
    ranked = files.comparison.ranking["C0"]
    assert [r.label for r in ranked["DS"]] == ["steady", "decaying"]
    assert ranked["DS"][1].value == 100.0
    assert (ranked["DS"][1].low, ranked["DS"][1].high) == (100.0, 100.0)  # every resample
    assert [r.label for r in ranked["MI_d80k"]] == ["steady", "decaying"]
    mi = ranked["MI_d80k"][1]
    assert mi.low is not None and mi.high is not None and mi.low < 100.0 <= mi.high + 1e-9
    data = json.loads(files.data.read_text())
    assert set(data["summaries"]) == {"steady", "decaying"}
    assert {p.name for p in files.figures} >= {"mi_by_state.png", "path_composition.png"}


def test_runs_of_another_pack_are_refused_or_marked(tmp_path: Path) -> None:
    first = _write_run(tmp_path / "a", ("steady",))
    second = _write_run(tmp_path / "b", ("decaying",), pack="other-pack")
    answerers = _answerers(first, second)
    with pytest.raises(NotComparableError, match="pack differs"):
        write_comparison(answerers, tmp_path)
    files = write_comparison(answerers, tmp_path, allow_incomparable=True)
    assert "**NOT COMPARABLE**" in files.markdown.read_text()
    assert files.comparison.comparable is False


def test_the_same_model_in_two_runs_gets_two_labels(tmp_path: Path) -> None:
    first = _write_run(tmp_path / "a", ("steady",))
    second = _write_run(tmp_path / "b", ("steady",))
    files = write_comparison(_answerers(first, second), tmp_path)
    assert list(files.comparison.summaries) == ["a/steady", "b/steady"]


async def test_compliance_rows_of_several_models_appear_on_the_page(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "run", ("steady", "decaying"))
    call = '<tool_call>{"name": "artifact_recall", "arguments": {"query": "chart"}}</tool_call>'
    backbones = [
        FunctionBackbone(lambda m, t: call, model="caller"),
        FunctionBackbone(lambda m, t: "I cannot look that up.", model="talker"),
    ]
    study = await run_compliance(backbones, tools=[artifact_recall_tool()], n=2)
    write_report(study, run / "compliance")
    text = write_comparison(_answerers(run), run).markdown.read_text()
    section = text.split("## Tool compliance")[1]
    assert "| caller |" in section and "| talker |" in section


def test_cli_report_of_a_multi_answerer_run_writes_the_comparison(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "run", ("steady", "decaying"))
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert (run / "comparison.md").is_file() and (run / "steady" / "report.md").is_file()
    other = _write_run(tmp_path / "other", ("decaying",), pack="other-pack")
    refused = CliRunner().invoke(app, ["report", str(run / "steady"), str(other)])
    assert refused.exit_code == 2 and "pack differs" in refused.output


def test_a_corrupt_run_json_is_a_clear_error(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "run", ("steady", "decaying"))
    (run / "run.json").write_text("{not json")
    with pytest.raises(ComparisonInputError, match=r"run.json: not valid JSON"):
        write_comparison(_answerers(run), run)
