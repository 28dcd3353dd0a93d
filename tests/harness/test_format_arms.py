"""Summary-format arms are independent of each other (issue 44, item 1): every arm starts from
the pre-compaction state's workspace version, never from what another arm wrote, so permuting
the arms, or running one alone, gives byte-identical records for each arm, and two arms of the
same format and summarizer give identical records.

Each run is a real ``mirage run`` process (scripted trunk, the reference summarizers writing the
trunk's and the arms' memory flushes, the three reference agents answering through the real
memory server, index and checkpoints). Of the reference summarizers only ``keep-charts`` writes
notes (its UI screenshots): under a ``names-only`` trunk the two ``~reference/keep-charts`` arms
each write their own flush (once, on the workspace from before the trunk's), ``free-form``
shares the trunk's; under a ``keep-charts`` trunk a ``free-form`` arm shares the trunk's notes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.mirage.config import RunConfig
from harness.mirage.run import MirageRun
from harness.mirage.trunk.checkpoints import read_checkpoint
from memory_server.workspace import Workspace

pytestmark = pytest.mark.slow

ANSWERERS = ("reference_retriever", "reference_context-reader", "reference_confabulator")
ARMS = (
    "free-form",
    "free-form~reference/keep-charts",
    "per-fact-citations~reference/keep-charts",
    "verbatim~reference/keep-nothing",
)
UI_NOTE = "# Phone lock-screen notification list (ui_9bd5e7db)"
WALL_CLOCK = {"latency_s"}


def _options(formats: list[str], summarizer: str) -> list[str]:
    return [
        "--model",
        "reference/retriever",
        "--references",
        "--no-calibration",
        "--trunk-model",
        "scripted",
        "--summarizer",
        summarizer,
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


def _run(
    out: Path, formats: list[str], workspace: Path, summarizer: str = "reference/names-only"
) -> Path:
    shutil.copytree(workspace, out / "workspace")
    options = _options(formats, summarizer)
    command = [sys.executable, "-m", "mirage", "run", *options, "--out", str(out)]
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


def _notes(out: Path, version: str | None) -> str:
    """The dated notes of the run's workspace at ``version``, joined ("" when it has none)."""
    workspace = Workspace.open(out / "workspace")
    assert version is not None
    files = sorted(p for p in workspace.version(version).files if p.startswith("memory/"))
    return "".join(workspace.read_bytes(p, version).decode() for p in files)


def test_permuted_and_lone_arms_give_identical_records(workspace: Path, tmp_path: Path) -> None:
    forward = _run(tmp_path / "forward", ["verbatim", *ARMS], workspace)
    backward = _run(tmp_path / "backward", ["verbatim", *reversed(ARMS)], workspace)
    alone = _run(tmp_path / "alone", ["verbatim", ARMS[2]], workspace)

    assert _records(forward) == _records(backward)
    lone, every = _records(alone), _records(forward)
    for answerer in ANSWERERS:
        assert lone[answerer] == {state: every[answerer][state] for state in lone[answerer]}
    versions = _arm_versions(forward)
    assert versions == _arm_versions(backward)
    assert _arm_versions(alone).items() <= versions.items()

    # the trunk's flush (names-only) wrote nothing: the arms that share it, and keep-nothing's
    # own, see the workspace as it was; each keep-charts arm wrote its notes once, on that
    trunk = versions["pre-compaction"]
    assert trunk == versions["S1-d80k"] == versions["S2@free-form"]
    assert versions["S2@verbatim.reference-keep-nothing"] == trunk
    charts = versions["S2@free-form.reference-keep-charts"]
    assert charts == versions["S2@per-fact-citations.reference-keep-charts"] != trunk
    assert _notes(forward, charts).count(UI_NOTE) == 1
    assert UI_NOTE not in _notes(forward, trunk)
    # the working tree is the trunk's, whatever arm was branched last
    for out in (forward, backward):
        assert Workspace.open(out / "workspace").snapshot() == trunk


def test_two_arms_of_one_format_and_summarizer_give_identical_records(
    workspace: Path, tmp_path: Path
) -> None:
    """``free-form`` under ``--summarizer reference/keep-charts`` and
    ``free-form~reference/keep-charts`` are one arm: the same records under two names, on the
    trunk's own notes (each UI screenshot noted once)."""
    summarizer = "reference/keep-charts"
    plain_out = _run(tmp_path / "plain", ["verbatim", "free-form"], workspace, summarizer)
    named_out = _run(
        tmp_path / "named", ["verbatim", "free-form~reference/keep-charts"], workspace, summarizer
    )
    plain, named = _records(plain_out), _records(named_out)
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
    versions = _arm_versions(plain_out)
    assert versions["S2@free-form"] == versions["pre-compaction"] == versions["S2@verbatim"]
    assert _notes(plain_out, versions["S2@free-form"]).count(UI_NOTE) == 1
