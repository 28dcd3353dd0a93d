"""Every path a ``mirage`` command takes, given a path that cannot be what the command makes of
it — a file where it writes a folder (``--out``), a folder where it appends to a file
(``--log``), a file or nothing where it reads a folder, a folder where it reads a file — is one
``error:`` line naming the path and exit 2, before any work starts (issue 47: ``mirage run --out
FILE`` printed a 129-line traceback). The table below must name every path option and argument
of every command, so a new one cannot be added without its case."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from harness.kit.paths import file_problem, folder_problem
from mirage.cli import app
from tests.cli_errors import assert_one_line_error

ROOT = Path(__file__).resolve().parent.parent

# (command, parameter) → the arguments, with {file} an existing file, {folder} an existing
# folder, {new} a path that does not exist yet, {bank} a question bank; in capitals, the path
# the case is about.
CASES: dict[tuple[str, str], tuple[str, ...]] = {
    ("chat", "workspace"): ("chat", "-w", "{FILE}"),
    ("serve-model", "log_path"): ("serve-model", "--log", "{FOLDER}"),
    ("parse", "tools"): ("parse", "--tools", "{FOLDER}"),
    ("compliance", "out"): ("compliance", "-o", "{FILE}"),
    ("compact", "session"): ("compact", "{FOLDER}", "-o", "{new}"),
    ("compact", "out"): ("compact", "{folder}", "-o", "{FILE}"),
    ("rescore", "directory"): ("rescore", "{FILE}"),
    ("rescore", "workspace"): ("rescore", "{folder}", "-w", "{FILE}"),
    ("report", "directories"): ("report", "{FILE}"),
    ("report", "workspace"): ("report", "{folder}", "-w", "{FILE}"),
    ("report", "compare_out"): ("report", "{folder}", "--compare-out", "{FILE}"),
    ("view", "directory"): ("view", "{FILE}"),
    ("run", "study"): ("run", "--study", "{FOLDER}"),
    ("run", "openclaw_config"): ("run", "--openclaw-config", "{FOLDER}"),
    ("run", "out"): ("run", "--out", "{FILE}"),
    ("merge", "shards"): ("merge", "{FILE}", "{file}", "-o", "{new}"),
    ("merge", "out"): ("merge", "{folder}", "{folder}", "-o", "{FILE}"),
    ("memory index", "workspace"): ("memory", "index", "-w", "{FILE}"),
    ("memory search", "workspace"): ("memory", "search", "-w", "{FILE}", "rent"),
    ("memory snapshot", "workspace"): ("memory", "snapshot", "-w", "{FILE}"),
    ("memory resolve", "workspace"): ("memory", "resolve", "-w", "{FILE}", "a"),
    ("memory calls", "workspace"): ("memory", "calls", "-w", "{FILE}"),
    ("memory calls", "call_log"): ("memory", "calls", "-w", "{folder}", "--call-log", "{FOLDER}"),
    ("memory serve", "workspace"): ("memory", "serve", "-w", "{FILE}"),
    ("memory serve", "call_log"): ("memory", "serve", "-w", "{folder}", "--call-log", "{FOLDER}"),
    ("memory serve", "log_file"): ("memory", "serve", "-w", "{folder}", "--log-file", "{FOLDER}"),
    ("pack build", "out"): ("pack", "build", "-o", "{FILE}"),
    ("pack import", "bank"): (
        "pack", "import", "{FOLDER}", "--artifacts", "{folder}", "-o", "{new}"
    ),
    ("pack import", "artifacts"): (
        "pack", "import", "{bank}", "--artifacts", "{FILE}", "-o", "{new}"
    ),
    ("pack import", "out"): ("pack", "import", "{new}", "--artifacts", "{folder}", "-o", "{FILE}"),
    ("pack lock", "pack"): ("pack", "lock", "{FILE}"),
    ("export inspect", "runs"): ("export", "inspect", "{FILE}", "--to", "{new}"),
    ("export inspect", "to"): ("export", "inspect", "{folder}", "--to", "{FILE}"),
    ("cue run", "out"): ("cue", "run", "-o", "{FILE}"),
    ("cue run", "config"): ("cue", "run", "--config", "{FOLDER}"),
    ("cue run", "study"): ("cue", "run", "--study", "{FOLDER}"),
    ("cue report", "directory"): ("cue", "report", "{FILE}"),
    ("cue build", "out"): ("cue", "build", "-o", "{FILE}"),
    ("cue import", "source"): ("cue", "import", "{NEW}", "-o", "{new}"),
    ("cue import", "out"): ("cue", "import", "{folder}", "-o", "{FILE}"),
}  # fmt: skip


def _path_parameters(command: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(command, parameter) of every visible parameter typed as a path (typer's own click: its
    classes are not ``click``'s, so the walk goes by attributes)."""
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _path_parameters(sub, f"{path} {name}".strip())
        return
    for param in command.params:
        annotation = str(getattr(getattr(param, "type_descriptor", None), "annotation", ""))
        if "Path" in annotation and not getattr(param, "hidden", False):
            yield path, str(param.name)


def test_every_path_parameter_has_a_case() -> None:
    found = set(_path_parameters(typer.main.get_command(app)))
    assert found == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES), ids=" ".join)
def test_a_path_that_cannot_be_used_is_one_line_and_exit_2(
    case: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = {"file": tmp_path / "a-file", "folder": tmp_path / "a-folder", "new": tmp_path / "new"}
    paths["bank"] = tmp_path / "bank.json"
    paths["file"].write_text("not a folder\n")
    question = {"id": "q", "question": "Q?", "gold_answerable": "NO", "artifact": "x"}
    paths["bank"].write_text(json.dumps({"base_questions": [question]}))
    paths["folder"].mkdir()
    monkeypatch.chdir(tmp_path)
    names = {key: str(value) for key, value in paths.items()}
    names |= {key.upper(): value for key, value in names.items()}
    args = [arg.format(**names) for arg in CASES[case]]
    [bad] = [names[arg.strip("{}")] for arg in CASES[case] if arg.isupper()]
    result = CliRunner().invoke(app, args)
    assert_one_line_error(result, "error: ", bad, exit_code=2)
    assert not paths["new"].exists(), "nothing is written"


def test_mirage_run_out_naming_a_file_is_one_line(tmp_path: Path) -> None:
    """The issue's case as a user meets it: a real process."""
    taken = tmp_path / "results.txt"
    taken.write_text("mine\n")
    argv = [sys.executable, "-m", "mirage", "run", "--trunk-model", "scripted", "--out", str(taken)]
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert (finished.returncode, finished.stdout) == (2, "")
    assert finished.stderr.splitlines() == [f"error: --out: {taken} is a file, not a folder"]
    assert taken.read_text() == "mine\n"


def test_what_is_in_the_way_is_named(tmp_path: Path) -> None:
    file, folder = tmp_path / "file", tmp_path / "folder"
    file.write_text("x")
    folder.mkdir()
    assert folder_problem(file) == f"{file} is a file, not a folder"
    assert (
        folder_problem(file / "a" / "b")
        == f"{file} is a file, so {file}/a/b cannot be created in it"
    )
    assert folder_problem(folder) is None
    assert folder_problem(folder / "new" / "deeper") is None
    assert file_problem(folder) == f"{folder} is a folder, not a file"
    assert file_problem(file) is None
    assert file_problem(folder / "log.jsonl") is None
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    assert (
        folder_problem(dangling)
        == f"{dangling} is a symbolic link to {tmp_path / 'gone'}, which does not exist"
    )
