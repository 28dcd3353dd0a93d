"""Summary formats as an axis (issue 17 part 2, the paper's appendix A.2): one trunk, shared S1
states, one S2 per format branched from the same pre-compaction state; records, report,
report.html and the comparison show the formats side by side.

The end-to-end tests run the real harness (workspace, index, memory server over HTTP, trunk,
checkpoints, restores) with a scripted trunk, a summarizer whose summary names the format it was
asked for, and the oracle answerer."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.kit.results import read_records
from harness.mirage.config import RunConfig
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.report.compare import write_comparison
from harness.mirage.run import MirageRun, ResumeError, RunInputError
from harness.mirage.trunk.checkpoints import BRANCH_POINT, base_state, format_slug, read_checkpoint
from runtime.backbones.scripted import FunctionBackbone
from runtime.messages import Message, SystemMessage
from runtime.snapshot import load_snapshot
from tests.harness.test_run_e2e import oracle

FORMATS = "verbatim,free-form,per-fact-citations"


def test_formats_are_a_comma_list_checked_before_any_work(tmp_path: Path) -> None:
    config = RunConfig(summary_formats=" verbatim, free-form ")
    assert config.summary_formats == ["verbatim", "free-form"]
    assert config.primary_format == "verbatim"
    with pytest.raises(ValidationError, match="names verbatim more than once"):
        RunConfig(summary_formats="verbatim,free-form,verbatim")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "mine.txt").write_text("Keep every number. {focus}\n{transcript}")
    with pytest.raises(ValidationError, match="template-mine more than once"):
        RunConfig(summary_formats=f"template:{tmp_path}/a/mine.txt,template:{tmp_path}/b/mine.txt")
    with pytest.raises(ValidationError, match="unknown summary format 'terse'"):
        RunConfig(summary_formats="verbatim,terse")
    with pytest.raises(ValidationError, match="OpenClaw compacts with its own format"):
        RunConfig(agent="openclaw", summary_formats="free-form")


def test_format_names_in_state_keys() -> None:
    assert format_slug("free-form") == "free-form"
    assert format_slug("template:some/dir/my notes.txt") == "template-my_notes"
    assert base_state("S2@free-form") == "S2" and base_state("S1-d50k") == "S1-d50k"


def _profile(tmp_path: Path, states: list[dict[str, object]]) -> str:
    path = tmp_path / "profile.yaml"
    path.write_text(json.dumps({"name": "mine", "window": 8192, "states": states}))
    return str(path)


def test_profiles_the_axis_cannot_branch_are_refused(tmp_path: Path) -> None:
    depth_only = _profile(tmp_path, [{"name": "d0", "kind": "plant_end"}])
    config = RunConfig(
        trunk_model="scripted", profile=depth_only, summary_formats=FORMATS, out=tmp_path / "r"
    )
    with pytest.raises(RunInputError, match="no compaction state"):
        MirageRun(config)
    second = _profile(
        tmp_path,
        [
            {"name": "d0", "kind": "plant_end"},
            {"name": "S2", "kind": "compaction"},
            {"name": "S3", "kind": "compaction", "compactions": 2},
        ],
    )
    config = config.model_copy(update={"profile": second})
    with pytest.raises(RunInputError, match="S3 come after a later compaction"):
        MirageRun(config)


class Summarizer:
    """Names the format it was asked for (the first line of the format's system prompt) and
    counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: Sequence[Message]) -> str:
        self.calls += 1
        system = next(m for m in messages if isinstance(m, SystemMessage)).content
        return f"Summary under: {system.split(chr(10))[2][:48]}"


def _run(out: Path, formats: str, summarizer: Summarizer) -> MirageRun:
    config = RunConfig(
        models=["oracle"],
        trunk_model="scripted",
        summarizer_model="summarizer",
        limit=2,
        conditions=["C0"],
        out=out,
        summary_formats=formats,
    )
    backbones = {
        "oracle": FunctionBackbone(oracle, model="oracle", context_window=8192),
        "summarizer": FunctionBackbone(summarizer, model="summarizer"),
    }
    return MirageRun(config, backbones=backbones)


@pytest.mark.slow
async def test_one_trunk_one_s2_per_format_and_the_report_shows_them(tmp_path: Path) -> None:
    summarizer = Summarizer()
    run = _run(tmp_path / "run", FORMATS, summarizer)
    [folder] = await run.execute()

    family = run.family.directory
    assert list((tmp_path / "run" / "checkpoints").glob("*/")) == [family]  # one family
    folders = sorted(p.name for p in family.iterdir() if p.is_dir())
    assert folders == [
        "S1-d0", "S1-d50k", "S1-d80k",
        "S2@free-form", "S2@per-fact-citations", "S2@verbatim",
        BRANCH_POINT,
    ]  # fmt: skip
    assert summarizer.calls == 3  # the trunk ran once: one compaction per format, no replay
    checkpoints = run.family.existing()
    assert checkpoints is not None and list(checkpoints) == [
        "S1-d0", "S1-d50k", "S1-d80k", "S2", "S2@free-form", "S2@per-fact-citations",
    ]  # fmt: skip
    branch_point = load_snapshot(read_checkpoint(family / BRANCH_POINT).snapshot_path)
    kept = [m.model_dump() for m in branch_point.messages]
    for state in ("S2", "S2@free-form", "S2@per-fact-citations"):
        session = load_snapshot(checkpoints[state].snapshot_path)
        assert session.compaction_count == 1
        # each S2 is the branch point's session with its head replaced by one summary
        tail = [m.model_dump() for m in session.messages[1:]]
        assert tail == kept[len(kept) - len(tail) :]
    assert len({checkpoints[s].manifest.workspace_version for s in checkpoints}) == 1

    records = read_records(folder, ProbeRecord)
    formats = {r.state: r.summary_format for r in records}
    assert formats == {
        "S1-d0": None, "S1-d50k": None, "S1-d80k": None,
        "S2": "verbatim", "S2@free-form": "free-form",
        "S2@per-fact-citations": "per-fact-citations",
    }  # fmt: skip

    report = (folder / "report.md").read_text()
    assert "## Summary formats at the compaction state" in report
    assert "| C0 | per-fact-citations | S2@per-fact-citations | 100.0 [" in report
    assert "Summary under: Write the summary as plain prose" in report
    html = (folder / "report.html").read_text()
    assert html.count('<div class="summary">') == 3
    summary = json.loads((folder / "summary.json").read_text())
    assert [r["summary_format"] for r in summary["summary_formats"]] == FORMATS.split(",")

    compared = write_comparison({folder: records}, tmp_path / "cmp")
    text = compared.markdown.read_text()
    assert "## Summary formats at the compaction state" in text
    assert "- S2·a: free-form by summarizer (`S2@free-form`)" in text  # the state key
    assert "| oracle | C0 | free-form | S2@free-form |" in compared.appendix.read_text()
    assert compared.comparison.comparable


@pytest.mark.slow
async def test_a_format_added_later_branches_and_equals_the_inline_one(tmp_path: Path) -> None:
    summarizer = Summarizer()
    out = tmp_path / "run"
    await _run(out, "verbatim", summarizer).execute()
    assert summarizer.calls == 1
    first = _run(out, "verbatim", summarizer)
    inline = first.family.existing()
    assert inline is not None
    inline_s2 = load_snapshot(inline["S2"].snapshot_path)

    run = _run(out, "verbatim,free-form", summarizer)
    [folder] = await run.execute()
    assert summarizer.calls == 2  # only the new format compacted; trunk and S1 reused
    records = read_records(folder, ProbeRecord)
    assert len([r for r in records if r.state == "S2@free-form"]) == 2
    assert len(records) == 2 * 5

    shutil.rmtree(run.family.directory / "S2@verbatim")  # rebuild it as a branch
    await _run(out, "verbatim,free-form", summarizer).execute()
    assert summarizer.calls == 3
    rebuilt = run.family.existing()
    assert rebuilt is not None
    branched_s2 = load_snapshot(rebuilt["S2"].snapshot_path)
    assert [m.model_dump() for m in branched_s2.messages] == [
        m.model_dump() for m in inline_s2.messages
    ]
    assert branched_s2.message_tokens == inline_s2.message_tokens

    with pytest.raises(ResumeError, match="the first format is the trunk's own S2"):
        await _run(out, "free-form,verbatim", summarizer).execute()
