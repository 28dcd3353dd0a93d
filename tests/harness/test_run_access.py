"""A ``mirage run`` whose model cannot be called is refused before any work (issue 45, item 4):
an ``--api-base`` nothing listens on, or a hosted model without its key, is one ``error:`` line
naming the model and what is missing, exit 2, in seconds, and ``--out`` is never created."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import unused_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = ["--trunk-model", "scripted", "--no-references", "--limit", "2"]
REFUSAL_S = 15.0
"""Generous for a loaded CI machine: the refusal took 1.9 s at load 4.7 on 2 cores (the
interpreter's start and mirage's imports; the check itself milliseconds)."""


def _run(out: Path, *arguments: str, drop: tuple[str, ...] = ()) -> tuple[int, list[str], float]:
    env = {key: value for key, value in os.environ.items() if key not in drop}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mirage", "run", *SCRIPTED, *arguments, "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, lines, time.perf_counter() - started


def test_an_endpoint_nothing_listens_on_is_refused_before_any_work(tmp_path: Path) -> None:
    api_base = f"http://127.0.0.1:{unused_port()}/v1"
    out = tmp_path / "run"
    code, lines, seconds = _run(out, "--model", "openai/gpt-4o-mini", "--api-base", api_base)
    assert code == 2
    assert lines == [
        f"error: --api-base {api_base} does not answer (connection refused) for openai/gpt-4o-mini"
    ]
    assert not out.exists()
    assert seconds < REFUSAL_S


@pytest.mark.parametrize(
    ("model", "key"),
    [("openai/gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic/claude-haiku-4-5", "ANTHROPIC_API_KEY")],
)
def test_a_hosted_model_without_its_key_is_refused_naming_the_key(
    tmp_path: Path, model: str, key: str
) -> None:
    out = tmp_path / "run"
    drop = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    code, lines, seconds = _run(out, "--model", model, drop=drop)
    assert code == 2
    assert lines == [f"error: {model} needs {key} (not set)"]
    assert not out.exists()
    assert seconds < REFUSAL_S


def test_the_summarizer_and_the_format_summarizers_are_checked_too(tmp_path: Path) -> None:
    out = tmp_path / "run"
    drop = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY")
    code, lines, _ = _run(
        out, "--model", "reference/retriever", "--summary-format",
        "verbatim,free-form~anthropic/claude-haiku-4-5", drop=drop,
    )  # fmt: skip
    assert code == 2
    assert lines == ["error: anthropic/claude-haiku-4-5 needs ANTHROPIC_API_KEY (not set)"]
    assert not out.exists()
