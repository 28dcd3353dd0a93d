"""Bad model, summarizer and format names of ``mirage run``: one line, exit 2, nothing written,
before any heavy work (issue 34)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BAD = [
    (["--model", "nosuch/x"], "unknown model 'nosuch/x'"),
    (["--summarizer", "scripted"], "unknown model 'scripted'"),
    (["--summarizer", "reference/nope"], "unknown reference summarizer 'reference/nope'"),
    (["--model", "reference/keep-charts"], "is a summarizer"),
    (["--summary-format", "verbatim~reference/nope"], "unknown reference summarizer"),
    (["--summary-format", "bogus"], "unknown summary format 'bogus'"),
    (["--summary-format", "template:/no/such/file.md"], "does not exist"),
]


@pytest.mark.parametrize(("args", "said"), BAD)
def test_a_bad_name_is_one_line_and_nothing_is_written(
    tmp_path: Path, args: list[str], said: str
) -> None:
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "mirage", "run", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0]
    assert not out.exists()
