"""``mirage run --shard K/N`` and ``mirage merge`` end to end: the bundled pack, a scripted
trunk rebuilt in every shard's own folder (proved byte-identical by hash), the oracle answerer
of ``test_run_e2e``, and a merge whose report equals the unsharded run's."""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.kit.results import RESULTS_FILE, read_records
from harness.mirage.config import RunConfig
from harness.mirage.probing.records import ProbeRecord
from harness.mirage.run import MirageRun, ResumeError
from harness.mirage.run.shards import STUDY_FILE, MergeError, Shard, merge_shards
from mirage.cli import app
from runtime.backbones.scripted import FunctionBackbone
from tests.harness.test_run_e2e import oracle, summary

pytestmark = pytest.mark.slow

PROBES = 4 * 4 * 2  # questions x states x conditions


def _config(out: Path, shard: str | None = None) -> RunConfig:
    return RunConfig(
        models=["oracle"],
        trunk_model="scripted",
        summarizer_model="summarizer",
        limit=4,
        out=out,
        shard=shard,
    )


async def _run(out: Path, shard: str | None = None) -> Path:
    backbones = {
        "oracle": FunctionBackbone(oracle, model="oracle", context_window=8192),
        "summarizer": FunctionBackbone(summary, model="summarizer"),
    }
    [folder] = await MirageRun(_config(out, shard), backbones=backbones).execute()
    return folder


def _tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (lock files aside), by relative path."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def _numbers(folder: Path) -> dict[str, object]:
    summary_json = json.loads((folder / "summary.json").read_text())
    summary_json.pop("usage")  # latency-free token counts, but compared separately below
    summary_json["provenance"].pop("recorded_at")  # when each run started; all else must agree
    return summary_json


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import asyncio

    root = tmp_path_factory.mktemp("shards")
    folders = {
        "whole": root / "whole",
        "1/2": root / "shard-1",
        "2/2": root / "shard-2",
    }

    async def all_runs() -> None:
        await _run(folders["whole"])
        await _run(folders["1/2"], "1/2")
        await _run(folders["2/2"], "2/2")

    asyncio.run(all_runs())
    return folders


def test_shards_split_the_plan_and_rebuild_identical_checkpoints(runs: dict[str, Path]) -> None:
    whole = {r.key for r in read_records(runs["whole"] / "oracle", ProbeRecord)}
    first = {r.key for r in read_records(runs["1/2"] / "oracle", ProbeRecord)}
    second = {r.key for r in read_records(runs["2/2"] / "oracle", ProbeRecord)}
    assert len(whole) == PROBES and len(first) == len(second) == PROBES // 2
    assert first | second == whole and not first & second
    families = {name: _tree_hashes(folder / "checkpoints") for name, folder in runs.items()}
    assert families["whole"] and families["whole"] == families["1/2"] == families["2/2"]
    snapshots = [h for path, h in families["whole"].items() if "manifest" not in path]
    assert len(snapshots) >= 4  # every state's snapshot, compared byte for byte above
    studies = {json.loads((f / STUDY_FILE).read_text())["shard"] for f in runs.values()}
    assert studies == {None, "1/2", "2/2"}


def test_merged_report_equals_the_unsharded_one(runs: dict[str, Path], tmp_path: Path) -> None:
    merged = tmp_path / "merged"
    result = CliRunner().invoke(
        app, ["merge", str(runs["2/2"]), str(runs["1/2"]), "--out", str(merged)]
    )
    assert result.exit_code == 0, result.output
    whole, joined = runs["whole"] / "oracle", merged / "oracle"
    assert _numbers(joined) == _numbers(whole)
    usage = [json.loads((f / "summary.json").read_text())["usage"] for f in (whole, joined)]
    assert usage[0] == usage[1]
    assert json.loads((joined / "details.json").read_text()) == json.loads(
        (whole / "details.json").read_text()
    )
    keys = [r.key for r in read_records(whole, ProbeRecord)]
    assert [r.key for r in read_records(joined, ProbeRecord)] == keys  # plan order too
    assert _tree_hashes(merged / "checkpoints") == _tree_hashes(runs["whole"] / "checkpoints")
    # the merged folder describes the whole study, not a shard
    assert json.loads((merged / "run.json").read_text())["shard"] is None
    assert json.loads((merged / STUDY_FILE).read_text())["shard"] is None
    merged_study = tomllib.loads((merged / "study.toml").read_text())
    whole_study = tomllib.loads((runs["whole"] / "study.toml").read_text())
    assert merged_study.pop("out") == str(merged.resolve())
    assert merged_study == {key: value for key, value in whole_study.items() if key != "out"}


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


def _edit_study(folder: Path, **changes: object) -> None:
    path = folder / STUDY_FILE
    study = json.loads(path.read_text())
    for key, value in changes.items():
        if key in study:
            study[key] = value
        else:
            study["study"][key] = value
    path.write_text(json.dumps(study))


def test_merge_refuses_shards_of_other_studies(runs: dict[str, Path], tmp_path: Path) -> None:
    one, two = runs["1/2"], runs["2/2"]
    other = _copy(two, tmp_path / "lenient")
    _edit_study(other, scoring="lenient")
    with pytest.raises(MergeError, match=r"different studies: scoring is 'paper' vs 'lenient'"):
        merge_shards([one, other], tmp_path / "m1")
    other = _copy(two, tmp_path / "pack")
    _edit_study(other, pack_digest="0" * 16)
    with pytest.raises(MergeError, match="pack digest"):
        merge_shards([one, other], tmp_path / "m2")
    other = _copy(two, tmp_path / "trunk")
    results = other / "oracle" / RESULTS_FILE
    lines = results.read_text().splitlines()
    record = json.loads(lines[0])
    record["checkpoint_sha256"] = "f" * 64
    results.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    with pytest.raises(MergeError, match=r"different .* checkpoints"):
        merge_shards([one, other], tmp_path / "m3")
    with pytest.raises(MergeError, match=r"both shard 1/2"):
        merge_shards([one, one], tmp_path / "m4")
    with pytest.raises(MergeError, match=r"not a shard"):
        merge_shards([one, runs["whole"]], tmp_path / "m5")
    three = _copy(two, tmp_path / "three")
    _edit_study(three, shard="3/3")
    with pytest.raises(MergeError, match="split the study differently"):
        merge_shards([one, two, three], tmp_path / "m6")
    for name in ("m1", "m2", "m3", "m4", "m5", "m6"):
        assert not (tmp_path / name).exists()  # refused before writing anything
    result = CliRunner().invoke(app, ["merge", str(one), str(one), "--out", str(tmp_path / "m")])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error: ") and len(result.output.splitlines()) == 1


async def test_a_shard_folder_refuses_another_shard(runs: dict[str, Path]) -> None:
    with pytest.raises(ResumeError, match=r"holds shard 1/2; shard 2/2 needs its own --out"):
        await _run(runs["1/2"], "2/2")
    with pytest.raises(ResumeError, match="holds shard 1/2; an unsharded run"):
        await _run(runs["1/2"])


def test_shard_option_is_checked() -> None:
    assert Shard.parse("2/3") == Shard(index=2, count=3) and str(Shard.parse(" 1 / 4 ")) == "1/4"
    for bad in ("0/2", "3/2", "1", "a/b", "1/0"):
        with pytest.raises(ValueError, match="--shard"):
            Shard.parse(bad)
