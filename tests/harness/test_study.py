"""Study files (``mirage run --study FILE``): keys and types read strictly, flags given on the
command line override the file, a bad file is one line and exit 2 before any heavy import, and
the resolved ``study.toml`` a run writes plans the same run again."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.mirage.config import RunConfig
from harness.mirage.study import StudyError, read_study, resolved_study, study_keys, study_text
from mirage.cli import app
from mirage.cli import run as run_command
from tests.cli_errors import assert_one_line_error

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "studies").glob("*.toml"))


def _effective(config: RunConfig) -> dict[str, Any]:
    """What a run does with ``config``: every option, the defaults that depend on others
    resolved (answerers, summary formats with the calibration arms, summarizer), and the
    output folder as an absolute path."""
    dump = config.model_dump(mode="json", exclude={"references", "calibration", "out"})
    return {
        **dump,
        "out": str(config.out.resolve()),
        "answerers": config.answerers,
        "formats": [*config.summary_formats, *config.calibration_formats],
        "summarizer": config.summarizer,
    }


@pytest.fixture
def configs(monkeypatch: pytest.MonkeyPatch) -> list[RunConfig]:
    """The configuration each ``mirage run --dry-run`` resolved (the plan itself not made)."""
    seen: list[RunConfig] = []

    def plan(config: RunConfig) -> str:
        seen.append(config)
        return "planned"

    monkeypatch.setattr(run_command, "_plan", plan)
    return seen


def _dry(*args: str) -> Any:
    return CliRunner().invoke(app, ["run", *args, "--dry-run"])


def _study(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(text, encoding="utf-8")
    return path


OPTION_SETS = [
    [],
    ["--profile", "paper"],
    ["--summary-format", "verbatim,free-form"],
    ["--agent", "cmd:/bin/cat", "--limit", "4", "--out", "elsewhere"],
    ["--model", "reference/retriever", "--trunk-model", "scripted", "--limit", "0"],
    ["--model", "local/smollm2-135m", "--references", "--no-calibration", "--repeats", "2"],
    ["--no-memory-flush", "--scoring", "lenient", "--conditions", "Cm", "--shard", "2/3"],
]


@pytest.mark.parametrize("args", OPTION_SETS, ids=lambda args: " ".join(args) or "default")
def test_the_resolved_study_resolves_to_the_same_run(
    args: list[str], configs: list[RunConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _dry(*args).exit_code == 0
    study = _study(tmp_path, study_text(configs[0]))
    result = _dry("--study", str(study))
    assert result.exit_code == 0, result.output
    assert _effective(configs[1]) == _effective(configs[0])


def test_flags_given_override_the_file_and_defaults_do_not(
    configs: list[RunConfig], tmp_path: Path
) -> None:
    study = _study(tmp_path, 'limit = 4\nseed = 7\nsummary_formats = ["free-form"]\n')
    assert _dry("--study", str(study), "--limit", "6").exit_code == 0
    assert _dry("--study", str(study), "--limit", "12").exit_code == 0  # the default, but given
    assert _dry("--study", str(study)).exit_code == 0
    assert [c.limit for c in configs] == [6, 12, 4]
    assert {c.seed for c in configs} == {7}  # never overridden by --seed's default
    assert {tuple(c.summary_formats) for c in configs} == {("free-form",)}


def test_summary_format_accumulates_in_order_from_repeats_and_comma_lists(
    configs: list[RunConfig],
) -> None:
    result = _dry(
        "--summary-format", "free-form", "--summary-format", "verbatim,per-fact-citations"
    )
    assert result.exit_code == 0, result.output
    assert configs[0].summary_formats == ["free-form", "verbatim", "per-fact-citations"]


def test_a_repeated_summary_format_is_refused_in_one_line() -> None:
    result = _dry("--summary-format", "free-form", "--summary-format", "free-form")
    assert_one_line_error(result, "--summary-format", "free-form", "more than once", exit_code=2)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("limt = 4\n", ["unknown key 'limt'", "did you mean 'limit'?"]),
        ('summary_format = ["verbatim"]\n', ["unknown key 'summary_format'", "'summary_formats'"]),
        ('limit = "12"\n', ["limit:", "valid integer", "'12'"]),
        ('memory_flush = "yes"\n', ["memory_flush:", "valid boolean"]),
        ('summary_formats = "verbatim"\n', ["summary_formats:", "valid list"]),
        ('conditions = ["C0", "C9"]\n', ["conditions.1:", "'C9'"]),
        ('pack = "no-such-pack"\n', ["pack:", "'no-such-pack' is not a pack"]),
        ('agent_api_key = "sk-1"\n', ["agent_api_key:", "MIRAGE_AGENT_API_KEY"]),
        ("limit = [\n", ["not a TOML file"]),
        ("repeats = 0\n", ["repeats:", "greater than or equal to 1"]),
    ],
)
def test_a_bad_study_file_is_one_line_naming_the_key_and_exit_2(
    text: str, fragments: list[str], tmp_path: Path
) -> None:
    study = _study(tmp_path, text)
    result = _dry("--study", str(study))
    assert_one_line_error(result, str(study), *fragments, exit_code=2)


def test_a_missing_study_file_is_a_usage_error() -> None:
    result = _dry("--study", "/nonexistent/study.toml")
    assert result.exit_code == 2 and "study.toml" in result.output


def test_a_bad_study_is_refused_before_any_heavy_import(tmp_path: Path) -> None:
    study = _study(tmp_path, 'limit = "12"\n')
    script = (
        "import sys\n"
        "from mirage.cli import app\n"
        "try:\n"
        f"    app(['run', '--study', {str(study)!r}])\n"
        "except SystemExit as exit:\n"
        "    heavy = sorted(m for m in ('litellm', 'torch', 'llama_cpp', 'chromadb') "
        "if m in sys.modules)\n"
        "    print(exit.code, heavy)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert done.stdout.strip() == "2 []", done.stdout + done.stderr
    assert "limit:" in done.stderr


def test_every_key_is_a_run_option_and_the_secrets_are_not_keys() -> None:
    assert set(study_keys()) == set(RunConfig.model_fields) - {"agent_api_key", "memory_token"}
    written = resolved_study(RunConfig(agent="cmd:/bin/cat", agent_api_key="sk-1"))
    assert "agent_api_key" not in written and "retry_errors" not in written


def test_the_resolved_study_says_outright_what_depends_on_other_options(tmp_path: Path) -> None:
    default = tomllib.loads(study_text(RunConfig(out=tmp_path / "run")))
    assert default["references"] is True and default["calibration"] is True
    assert default["limit"] == 12 and default["out"] == str((tmp_path / "run").resolve())
    every = tomllib.loads(study_text(RunConfig(models=["openai/gpt-4o-mini"], limit=None)))
    assert every["references"] is False and every["calibration"] is False
    assert every["limit"] == 0


def test_every_path_option_is_text_in_a_file_and_absolute_when_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paths (``out``, an agent's settings file) come from ``RunConfig``'s types, not a list."""
    monkeypatch.chdir(tmp_path)
    settings = tmp_path / "mine.json5"
    settings.write_text("{}")
    config = RunConfig(agent="openclaw", openclaw_config=Path("mine.json5"), out=Path("o"))
    written = tomllib.loads(study_text(config))
    assert written["openclaw_config"] == str(settings) and written["out"] == str(tmp_path / "o")
    study = tmp_path / "study.toml"
    study.write_text(study_text(config))
    assert RunConfig(**read_study(study)).openclaw_config == settings


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_every_example_study_is_valid(path: Path) -> None:
    config = RunConfig(**read_study(path))
    assert config.out.parts[0] == "mirage-runs"


def test_the_examples_cover_each_use() -> None:
    assert {path.stem for path in EXAMPLES} >= {
        "own-agent-mcp",
        "summary-formats",
        "tool-compliance-per-backbone",
        "paper-profile",
    }


def test_an_example_study_dry_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's plan, its models swapped by flags for ones that need no embedded model."""
    monkeypatch.chdir(tmp_path)
    example = ROOT / "examples" / "studies" / "summary-formats.toml"
    swapped = ["--model", "reference/retriever", "--trunk-model", "scripted"]
    result = _dry("--study", str(example), *swapped, "--summarizer", "openai/gpt-4o-mini")
    assert result.exit_code == 0, result.output
    assert "compaction summary (openai/gpt-4o-mini): 3 calls" in result.output  # one per format
    assert not (tmp_path / "mirage-runs").exists()  # a dry run writes nothing


def test_a_study_error_names_the_file() -> None:
    with pytest.raises(StudyError, match="cannot read it"):
        read_study(Path("/nonexistent/study.toml"))


def test_run_help_groups_its_options_in_panels() -> None:
    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for panel in ("Model", "Pack and depth", "Compaction", "Agent", "Output"):
        assert f"─ {panel} ─" in result.output, panel
    assert "--study" in result.output


@pytest.mark.slow
def test_a_run_reruns_from_its_study_toml_on_the_same_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real run (scripted trunk, reference summarizer, the retriever reference agent), then
    ``mirage run --study OUT/study.toml``: the same plan, the same checkpoint family reused and
    no probe run again."""
    monkeypatch.chdir(tmp_path)
    args = ["--trunk-model", "scripted", "--model", "reference/retriever", "--limit", "2"]
    args += ["--no-memory-flush", "--summary-format", "verbatim~reference/keep-charts"]
    args += ["--out", "run"]
    runner = CliRunner()
    assert runner.invoke(app, ["run", *args]).exit_code == 0
    study = tmp_path / "run" / "study.toml"
    results = tmp_path / "run" / "reference_retriever" / "results.jsonl"
    families = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir() if p.is_dir())
    recorded = results.read_bytes()
    planned = runner.invoke(app, ["run", *args, "--dry-run"])
    replanned = runner.invoke(app, ["run", "--study", str(study), "--dry-run"])
    assert planned.exit_code == replanned.exit_code == 0
    assert replanned.output == planned.output
    [family] = families
    assert f"checkpoints of family {family} exist; reused" in replanned.output
    rerun = runner.invoke(app, ["run", "--study", str(study)])
    assert rerun.exit_code == 0, rerun.output
    assert (
        sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir() if p.is_dir())
        == families
    )
    assert results.read_bytes() == recorded  # nothing probed again
