"""A run folder holds one study (issue 44, item 2): resuming it with any option that defines its
checkpoints or records changed is refused in one line naming the option and both values (exit 2,
nothing written); a resume may add probes (formats, conditions, repeats, questions, answerers)
but never leave out what is recorded there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.kit.options import StudyRole
from harness.mirage.config import RUN_OPTIONS, RunConfig
from harness.mirage.run import MirageRun, ResumeError
from harness.mirage.run.resume import FIXED_KEYS, check_same_study
from harness.mirage.run.shards import write_study

BASE: dict[str, Any] = {
    "models": ["reference/retriever"],
    "references": False,
    "trunk_model": "scripted",
    "summarizer_model": "reference/keep-charts",
    "limit": 4,
    "summary_formats": ["verbatim", "free-form"],
}


def _study(out: Path, **changes: Any) -> MirageRun:
    """The run of ``BASE`` with ``changes``, in ``out``."""
    return MirageRun(RunConfig(**{**BASE, **changes, "out": out}))


def _recorded(out: Path) -> None:
    """``out`` as a finished run of ``BASE`` leaves it (its study file)."""
    run = _study(out)
    out.mkdir(parents=True, exist_ok=True)
    write_study(run.config, run.pack.root, run.family_id())


def _check(run: MirageRun) -> None:
    check_same_study(run, run.family_id())


CHANGED = [
    ({"seed": 1}, "--seed 0, this run has --seed 1"),
    ({"profile": "paper"}, "--profile scaled, this run has --profile paper"),
    ({"pack": "mirage-ext"}, "--pack mirage-core, this run has --pack mirage-ext"),
    ({"summarizer_model": "reference/names-only"}, "--summarizer reference/keep-charts, this"),
    ({"memory_flush": False}, "--memory-flush, this run has --no-memory-flush"),
    ({"scoring": "lenient"}, "--scoring paper, this run has --scoring lenient"),
    ({"window": 16384}, "window = (default), this run has window = 16384"),
    ({"trunk_max_output_tokens": 64}, "trunk_max_output_tokens = (default), this run has"),
    ({"probe_max_output_tokens": 64}, "probe_max_output_tokens = (default), this run has"),
    ({"adapters": True}, "--no-adapters, this run has --adapters"),
    ({"trunk_model": "openai/gpt-4o-mini"}, "--trunk-model scripted, this run has --trunk-model"),
    (
        {"agent": "openclaw", "models": ["ollama/qwen3:4b"], "summary_formats": ["verbatim"]},
        "--agent (default), this run has --agent openclaw",
    ),
    ({"summary_formats": ["free-form", "verbatim"]}, "--summary-format verbatim,free-form, this"),
]


@pytest.mark.parametrize(("changes", "said"), CHANGED)
def test_a_changed_study_is_refused_naming_the_option(
    tmp_path: Path, changes: dict[str, Any], said: str
) -> None:
    _recorded(tmp_path / "run")
    with pytest.raises(ResumeError, match="use a new --out") as refused:
        _check(_study(tmp_path / "run", **changes))
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_every_fixed_key_is_tried() -> None:
    tried = {
        {"summarizer_model": "summarizer", "summary_formats": "summary_formats"}.get(key, key)
        for changes, _ in CHANGED
        for key in changes
    }
    assert set(FIXED_KEYS) - tried == set()


LEFT_OUT = [
    ({"conditions": ["C0"]}, "leaves out probes already recorded there (Cm)"),
    ({"limit": 2}, "--limit 4, this run has --limit 2, which leaves out"),
    ({"summary_formats": ["verbatim"]}, "(free-form)"),
    ({"repeats": 1, "limit": 4}, None),  # as it was
]


@pytest.mark.parametrize(("changes", "said"), LEFT_OUT)
def test_a_resume_may_not_leave_out_recorded_probes(
    tmp_path: Path, changes: dict[str, Any], said: str | None
) -> None:
    _recorded(tmp_path / "run")
    run = _study(tmp_path / "run", **changes)
    if said is None:
        _check(run)
        return
    with pytest.raises(ResumeError, match="a resume may only add probes") as refused:
        _check(run)
    assert said in str(refused.value)


def test_a_resume_may_not_leave_out_the_calibration_arms(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run = _study(out, references=True)  # the calibration arms run with the reference agents
    out.mkdir(parents=True)
    write_study(run.config, run.pack.root, run.family_id())
    with pytest.raises(ResumeError, match="a resume may only add probes") as refused:
        _check(_study(out, references=True, calibration=False))
    assert "verbatim~reference/keep-nothing" in str(refused.value)


def test_every_option_that_grows_has_its_check_and_a_case() -> None:
    """The options ``RunConfig`` declares ``GROWS`` are the ones ``_check_only_grows`` checks
    (each its own way) and this file shrinks (``LEFT_OUT``, fewer repeats below, the calibration
    arms above): declaring another one needs its check there and a case here."""
    grows = {name for name, o in RUN_OPTIONS.items() if o.option.study is StudyRole.GROWS}
    assert grows == {"conditions", "repeats", "limit", "summary_formats", "calibration"}


def test_a_resume_may_add_probes_and_change_answerers(tmp_path: Path) -> None:
    _recorded(tmp_path / "run")
    grown = _study(
        tmp_path / "run",
        limit=12,
        repeats=2,
        summary_formats=["verbatim", "free-form", "per-fact-citations"],
        models=["reference/context-reader"],
    )
    _check(grown)
    own_agent = {"agent": "openai:http://127.0.0.1:9/v1", "models": []}
    with_agent = _study(tmp_path / "run", agent_model="m", **own_agent)
    _check(with_agent)
    write_study(with_agent.config, grown.pack.root, None)
    _check(_study(tmp_path / "run", agent_model="another", **own_agent))
    fewer_repeats = tmp_path / "again"
    _recorded(fewer_repeats)
    write_study(grown.config.model_copy(update={"out": fewer_repeats}), grown.pack.root, None)
    with pytest.raises(ResumeError, match="--repeats 2, this run has --repeats 1"):
        formats = grown.config.summary_formats
        _check(_study(fewer_repeats, limit=12, summary_formats=formats))


def test_the_command_refuses_a_changed_seed_fast_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _recorded(out)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    options = [
        "--model", "reference/retriever", "--no-references", "--trunk-model", "scripted",
        "--summarizer", "reference/keep-charts", "--limit", "4",
        "--summary-format", "verbatim,free-form",
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "mirage", "run", *options, "--seed", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "--seed 0, this run has --seed 1" in lines[0], lines
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_a_scripted_trunk_folder_of_the_old_default_summarizer_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    """Its study holds the summarizer it ran with (the embedded SmolLM2, the scripted trunk's
    default until issue 45): resumed without ``--summarizer`` it would mix two S2 states."""
    out = tmp_path / "run"
    old = _study(out, summarizer_model="local/smollm2-135m")
    out.mkdir(parents=True)
    write_study(old.config, old.pack.root, old.family_id())
    with pytest.raises(ResumeError) as refused:
        _check(_study(out, summarizer_model=None))
    assert "--summarizer local/smollm2-135m, this run has --summarizer reference/keep-charts" in (
        str(refused.value)
    )
    _check(_study(out, summarizer_model="local/smollm2-135m"))  # given outright: it resumes
