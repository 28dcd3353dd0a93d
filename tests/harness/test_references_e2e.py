"""The reference agents through the real pipeline (docs/references.md): ``mirage run`` with no
model given on a scripted trunk summarized by the embedded model — real workspace, index, memory
server over HTTP, checkpoints, fresh restores, scorer and four-way path labels — with the
embedded model's place taken by a scripted stand-in that replies as SmolLM2 does (it parrots the
previous assistant turn), so the run takes seconds; and a canary: gold answers replaced by
markers no reference output may hold."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from harness.kit.packsums import write_sums
from harness.kit.results import read_records
from harness.mirage.config import RunConfig
from harness.mirage.packs import load_pack
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.references import REFERENCE_MODELS
from harness.mirage.run import MirageRun
from mirage.cli import app
from runtime.backbones import DEFAULT_MODEL
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message, ToolSpec, UserMessage
from tests.harness.test_run_e2e import summary

pytestmark = pytest.mark.slow

LIMIT = 4
PARROT = "Saved. I've filed it in your workspace as ui_9bd5e7db."
MARKER = "CANARY7Q"


def smollm_like(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    """A probe gets the parrot reply (no protocol fields: a PF); a compaction gets a summary."""
    users = [m for m in messages if isinstance(m, UserMessage)]
    if users and "ANSWERABLE=" in users[-1].plain_text:
        return PARROT
    return summary(messages)


def _all_folders(out: Path) -> dict[str, list[ProbeRecord]]:
    return {
        model: read_records(out / model.replace("/", "_"), ProbeRecord)
        for model in [DEFAULT_MODEL, *REFERENCE_MODELS]
    }


def _folders(out: Path) -> dict[str, list[ProbeRecord]]:
    """The records of the run's own states (the calibration arms, ``S2@…``, left out)."""
    return {
        model: [r for r in records if "@" not in r.state]
        for model, records in _all_folders(out).items()
    }


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, float]]:
    """``mirage run --trunk-model scripted --summarizer local/smollm2-135m --limit 4`` (no
    --model): its folder, its output and its seconds."""
    out = tmp_path_factory.mktemp("default") / "run"
    stand_in = FunctionBackbone(smollm_like, model=DEFAULT_MODEL, context_window=8192)

    def make_backbone(model: str, **options: Any) -> FunctionBackbone:
        assert model == DEFAULT_MODEL, f"only the embedded model is stood in for, not {model}"
        return stand_in

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("runtime.backbones.make_backbone", make_backbone)
        started = time.perf_counter()
        args = ["run", "--trunk-model", "scripted", "--summarizer", DEFAULT_MODEL]
        result = CliRunner().invoke(app, [*args, "--limit", str(LIMIT), "--out", str(out)])
        seconds = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    yield out, result.output, seconds


def test_default_run_has_the_model_and_the_references(default_run: tuple[Path, str, float]) -> None:
    out, _, _ = default_run
    records = _folders(out)
    assert all(len(rs) == LIMIT * 4 * 2 for rs in records.values())  # questions x states x conds
    assert all(r.pf for r in records[DEFAULT_MODEL])
    for model in REFERENCE_MODELS:  # every probe from an untouched restore of its checkpoint
        assert all(r.restored_sha256 == r.checkpoint_sha256 for r in records[model])  # type: ignore[attr-defined]


def test_references_behave_as_declared(default_run: tuple[Path, str, float]) -> None:
    out, _, _ = default_run
    records = _folders(out)
    retriever = records["reference/retriever"]
    assert {r.path for r in retriever} == {"R_tool"} == {r.declared_path for r in retriever}
    assert all(r.GC == 1 for r in retriever if r.gold_answerable == "YES")  # charts: cell rule
    assert all(r.HR == 0 for r in retriever if r.gold_answerable == "NO")
    calls = (out / "reference_retriever" / "calls.jsonl").read_text().splitlines()
    all_probes = _all_folders(out)["reference/retriever"]
    assert len(calls) == len(all_probes)  # one real artifact_recall per probe, seen by the server
    reader = records["reference/context-reader"]
    before = [r for r in reader if r.state != "S2" and r.gold_answerable == "YES"]
    after = [r for r in reader if r.state == "S2"]
    assert all(r.GC == 1 and r.declared_path == r.path == "R_context" for r in before)
    assert all(r.parsed.answerable == "NO" and r.declared_path is None for r in after)
    confabulator = records["reference/confabulator"]
    assert all(r.parsed.answerable == "YES" and r.declared_path == "R_none" for r in confabulator)
    assert all(r.GC != 1 for r in confabulator if r.gold_answerable == "YES")
    # the summary keeps no evidence: with the four-way paths the confabulator is R_none there
    assert {r.path for r in confabulator if r.state == "S2"} == {"R_none"}


def test_the_comparison_opens_with_what_the_rows_show(
    default_run: tuple[Path, str, float],
) -> None:
    out, output, _ = default_run
    comparison = (out / "comparison.md").read_text()
    opening = comparison.split("All answerers ran", 1)[0]
    assert "reference/context-reader's GC falls (100% at S1-d0, 0% at S2" in opening
    assert "reference/retriever's GC holds (100% at S1-d0, 100% at S2" in opening
    assert "reference/confabulator, which always answers YES" in opening
    assert "has AC 50% next to GC 0%" in opening
    pf = f"{DEFAULT_MODEL}: every one of its 32 replies failed the protocol (PF 32 of 32)"
    assert pf in opening and pf in output
    check = json.loads((out / "comparison.json").read_text())["instrument"]
    by_label = {row["label"]: row for row in check["labels"]}
    assert by_label["R_tool"]["agreed"] == by_label["R_tool"]["declared"] == 64  # + the arms
    assert by_label["R_context"]["agreed"] == by_label["R_context"]["declared"]
    listed = sum(len(d["question_ids"]) for d in check["disagreements"])
    assert listed == check["declared"] - check["agreed"] > 0  # S1's available-not-used
    assert "## Instrument check" in comparison
    assert "## Instrument check" in (out / "reference_confabulator" / "report.md").read_text()


def test_the_calibration_arms_show_what_each_format_kept(
    default_run: tuple[Path, str, float],
) -> None:
    out, _, _ = default_run
    records = _all_folders(out)
    arms = {r.state for r in records["reference/context-reader"] if "@" in r.state}
    assert len(arms) == 4
    assert all(len(rs) == LIMIT * 8 * 2 for m, rs in records.items() if m != DEFAULT_MODEL)
    assert not [r for r in records[DEFAULT_MODEL] if "@" in r.state]  # arms: references only
    reader = records["reference/context-reader"]

    def gc(state: str) -> set[float | None]:
        return {r.GC for r in reader if r.state == state and r.gold_answerable == "YES"}

    assert gc("S2@verbatim.reference-keep-charts") == {1}  # kept with their ids: GC holds
    assert gc("S2@per-fact-citations.reference-keep-charts") == {1}
    assert 1 not in gc("S2@free-form.reference-keep-charts")  # prose drops the ids: GC falls
    assert 1 not in gc("S2@verbatim.reference-keep-nothing")
    comparison = json.loads((out / "comparison.json").read_text())
    checks = comparison["retention_checks"]
    assert checks and all(c["agreed"] == c["artifacts"] for c in checks)
    visibility = json.loads((out / "reference_context-reader" / "visibility.json").read_text())
    seen = {
        a["visibility"]
        for state in visibility["states"].values()
        for a in state["artifacts"].values()
    }
    assert seen == {"verbatim", "summary_only", "notes_only", "nowhere"}
    assert "## The compaction axis" in (out / "comparison.md").read_text()


def test_the_html_pages_carry_the_overview_and_the_instrument_check(
    default_run: tuple[Path, str, float],
) -> None:
    out, _, _ = default_run
    page = (out / "comparison.html").read_text()
    check = json.loads((out / "comparison.json").read_text())["instrument"]
    assert "reference/confabulator, which always answers YES" in page
    assert "<h2>Instrument check — path labels against the reference agents</h2>" in page
    agreed = f"<strong>{check['agreed']} of {check['declared']}</strong>"
    assert agreed in page
    assert page.index(agreed) < page.index("<h2>Table 1 — metrics per model, state and")
    assert "<th>VC∧R_none %</th>" in page
    shown = re.sub(r"<script.*?</script>|<pre>.*?</pre>", "", page, flags=re.S)
    assert "**" not in shown and "\n- " not in shown  # no raw Markdown on the page
    reference_page = (out / "reference_confabulator" / "report.html").read_text()
    assert "<h2>Instrument check" in reference_page
    assert "| VC∧R_none % |" in (out / "comparison-appendix.md").read_text()  # Table 1


def _canary_pack(tmp_path: Path) -> Path:
    """A copy of the bundled pack whose every gold answer is a marker."""
    pack = tmp_path / "canary-pack"
    shutil.copytree(load_pack("mirage-core").root, pack)
    questions = yaml.safe_load((pack / "questions.yaml").read_text())
    for index, question in enumerate(questions["questions"]):
        if question["gold_answerable"] == "YES":
            question.update(gold_answer=f"{MARKER}{index:03d}", answer_type="string")
            question.pop("tolerance", None)
    (pack / "questions.yaml").write_text(yaml.safe_dump(questions, sort_keys=False))
    write_sums(pack)  # as `mirage pack lock` does after an edit
    return pack


async def test_canary_no_reference_output_holds_a_gold_answer(
    tmp_path: Path, default_run: tuple[Path, str, float]
) -> None:
    config = RunConfig(
        pack=str(_canary_pack(tmp_path)),
        models=list(REFERENCE_MODELS),
        trunk_model="scripted",
        summarizer_model="summarizer",
        limit=LIMIT,
        out=tmp_path / "run",
    )
    backbones = {"summarizer": FunctionBackbone(summary, model="summarizer")}
    folders = await MirageRun(config, backbones=backbones).execute()
    plain = _folders(default_run[0])
    for folder in folders:
        records = read_records(folder, ProbeRecord)
        assert any(MARKER in (r.gold.answer or "") for r in records if r.gold)  # planted
        produced = [json.dumps([r.raw_output, (r.trace or {}).get("reference")]) for r in records]
        produced.append(
            (folder / "calls.jsonl").read_text() if (folder / "calls.jsonl").exists() else ""
        )
        assert not [text for text in produced if MARKER in text]
        # and the replies are the ones given on the unmarked pack: gold plays no part
        same = {r.key: r.raw_output for r in plain[records[0].model or ""]}
        assert {r.key: r.raw_output for r in records} == same
