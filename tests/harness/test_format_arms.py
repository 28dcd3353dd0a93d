"""Summary-format arms are independent of each other (issue 44, item 1): every arm starts from
the pre-compaction state's workspace version, never from what another arm wrote, so permuting
the arms, or running one alone, gives byte-identical records for each arm, and two arms of the
same format and summarizer give identical records.

Each run is a real ``mirage run`` process (scripted trunk, the reference summarizers writing the
trunk's and the arms' memory flushes, the three reference agents answering through the real
memory server, index and checkpoints). The arms cover both kinds of branch: ``free-form``
shares the trunk's flush (same summarizer), the others write their own in its place."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.mirage.checkpoints import read_checkpoint
from harness.mirage.config import RunConfig
from harness.mirage.run import MirageRun
from memory_server.workspace import Workspace

pytestmark = pytest.mark.slow

ANSWERERS = ("reference_retriever", "reference_context-reader", "reference_confabulator")
ARMS = ("free-form", "per-fact-citations~reference/names-only", "verbatim~reference/keep-nothing")
WALL_CLOCK = {"latency_s"}


def _options(formats: list[str]) -> list[str]:
    return [
        "--model",
        "reference/retriever",
        "--references",
        "--no-calibration",
        "--trunk-model",
        "scripted",
        "--summarizer",
        "reference/keep-charts",
        "--limit",
        "2",
        "--summary-format",
        ",".join(formats),
    ]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled pack's workspace, materialised and indexed once (each run copies it, so
    no run embeds the pack again)."""
    out = tmp_path_factory.mktemp("prepared")
    config = RunConfig(**_config_fields(["verbatim"]), out=out)
    MirageRun(config).prepare_workspace().close()
    return out / "workspace"


def _config_fields(formats: list[str]) -> dict[str, Any]:
    return {
        "models": ["reference/retriever"],
        "references": True,
        "trunk_model": "scripted",
        "summarizer_model": "reference/keep-charts",
        "limit": 2,
        "summary_formats": formats,
    }


def _run(out: Path, formats: list[str], workspace: Path) -> Path:
    shutil.copytree(workspace, out / "workspace")
    command = [sys.executable, "-m", "mirage", "run", *_options(formats), "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def _records(out: Path) -> dict[str, dict[str, list[str]]]:
    """answerer → record state → its records as JSON, wall-clock fields left out."""
    found: dict[str, dict[str, list[str]]] = {}
    for answerer in ANSWERERS:
        by_state: dict[str, list[str]] = {}
        for line in (out / answerer / "results.jsonl").read_text().splitlines():
            record = {k: v for k, v in json.loads(line).items() if k not in WALL_CLOCK}
            by_state.setdefault(record["state"], []).append(json.dumps(record, sort_keys=True))
        found[answerer] = {state: sorted(lines) for state, lines in by_state.items()}
    return found


def _arm_versions(out: Path) -> dict[str, str | None]:
    """Each checkpoint's workspace version by folder name (``S2@free-form``, …)."""
    [family] = [p for p in (out / "checkpoints").iterdir() if p.is_dir()]
    return {
        folder.name: read_checkpoint(folder).workspace_version
        for folder in family.iterdir()
        if (folder / "manifest.json").is_file()
    }


def test_permuted_and_lone_arms_give_identical_records(workspace: Path, tmp_path: Path) -> None:
    forward = _run(tmp_path / "forward", ["verbatim", *ARMS], workspace)
    backward = _run(tmp_path / "backward", ["verbatim", *reversed(ARMS)], workspace)
    alone = _run(tmp_path / "alone", ["verbatim", ARMS[1]], workspace)

    assert _records(forward) == _records(backward)
    lone, every = _records(alone), _records(forward)
    for answerer in ANSWERERS:
        assert lone[answerer] == {state: every[answerer][state] for state in lone[answerer]}
    assert _arm_versions(forward) == _arm_versions(backward)

    notes = Workspace.open(forward / "workspace")
    versions = _arm_versions(forward)
    note_path = next(p for p in notes.version(versions["pre-compaction"]).files if "memory/" in p)
    trunk_notes = notes.read_bytes(note_path, versions["pre-compaction"]).decode()
    # the trunk's flush (keep-charts) noted each UI screenshot once; the arm that shares the
    # flush sees exactly that, the arms with their own flush see theirs only
    assert trunk_notes.count("# Phone lock-screen notification list (ui_9bd5e7db)") == 1
    assert versions["S2@free-form"] == versions["pre-compaction"] == versions["S2@verbatim"]
    assert versions["S2@verbatim.reference-keep-nothing"] == versions["S1-d80k"]
    own = notes.version(versions["S2@per-fact-citations.reference-names-only"]).files
    assert note_path not in own or notes.read_bytes(
        note_path, versions["S2@per-fact-citations.reference-names-only"]
    ) != trunk_notes.encode()
    # the working tree is the trunk's, whatever arm was branched last
    assert (forward / "workspace" / note_path).read_text() == trunk_notes
    assert (backward / "workspace" / note_path).read_text() == trunk_notes


def test_two_arms_of_one_format_and_summarizer_give_identical_records(
    workspace: Path, tmp_path: Path
) -> None:
    """``free-form`` under ``--summarizer reference/keep-charts`` and
    ``free-form~reference/keep-charts`` are one arm: the same records under two names."""
    plain = _records(_run(tmp_path / "plain", ["verbatim", "free-form"], workspace))
    named = _records(
        _run(tmp_path / "named", ["verbatim", "free-form~reference/keep-charts"], workspace)
    )
    renamed = "S2@free-form.reference-keep-charts"
    for answerer in ANSWERERS:
        mine = [
            line.replace(renamed, "S2@free-form").replace(
                '"summary_format": "free-form~reference/keep-charts"',
                '"summary_format": "free-form"',
            )
            for line in named[answerer][renamed]
        ]
        assert sorted(mine) == plain[answerer]["S2@free-form"]
