"""The corruption corpus (issue 37): every file kind a run reads back — checkpoint snapshots and
manifests, family.json, study.json, run.json, results.jsonl, and the visibility.json and
summaries.json the report reads — each × {truncated, wrong type, unknown field, edited with any
hash recomputed}, on a copy of one finished run (a real ``mirage run`` process).

Each case is read back by the command that reads it (a resume with ``mirage run``, or ``mirage
report``) and gives exactly one ``error:`` line naming the file, exit 1 or 2, and not one byte of
the folder written over; or, for ``family.json`` alone, an exact rebuild from the checkpoints that
the run announces (the file byte for byte as the trunk wrote it)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mirage.cli import app
from runtime.session import Session
from runtime.snapshot import session_hash
from tests.harness.run_driver import LIMIT

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RUN = ["run", "--model", "oracle", "--trunk-model", "scripted", "--summarizer", "summarizer"]
RUN += ["--limit", str(LIMIT)]
STATE = "S1-d50k"


def _driver(out: Path) -> subprocess.CompletedProcess[str]:
    """``mirage run`` on ``out`` in a process of its own, its models those of the driver."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "tests.harness.run_driver", str(out), "--cli"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "run"
    done = _driver(out)
    assert done.returncode == 0, done.stderr
    return out


def _family(run: Path) -> Path:
    (family,) = (p for p in (run / "checkpoints").iterdir() if p.is_dir())
    return family


def _json_edit(path: Path, edit: Callable[[Any], None]) -> None:
    data = json.loads(path.read_bytes())
    edit(data)
    path.write_text(json.dumps(data, indent=2))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# --- the file kinds: where each is in a run folder -------------------------------------------


def _snapshot(run: Path) -> Path:
    (snapshot,) = (_family(run) / STATE).glob("*.session")
    return snapshot


def _manifest(run: Path) -> Path:
    return _family(run) / STATE / "manifest.json"


def _rewrite_snapshot(path: Path, edit: Callable[[Any], None], *, rename: bool = False) -> Path:
    """Edit the session in a snapshot and recompute the header's byte hash and length; with
    ``rename`` also its name — the header's, the file's and the manifest's — as a forger would."""
    head, _, payload = path.read_bytes().partition(b"\n")
    session = json.loads(payload)
    edit(session)
    body = json.dumps(session).encode()
    header = json.loads(head)
    header.update(length=len(body), payload_sha256=hashlib.sha256(body).hexdigest())
    target = path
    if rename:
        name = session_hash(Session.model_validate_json(body, strict=True))
        header["sha256"] = name
        target = path.with_name(f"{name}.session")
        path.unlink()

        def renamed(manifest: Any) -> None:
            manifest.update(snapshot=target.name, snapshot_sha256=name)

        _json_edit(path.parent / "manifest.json", renamed)
    target.write_bytes(json.dumps(header).encode() + b"\n" + body)
    return target


def _snapshot_damage(damage: str, path: Path) -> Path:
    if damage == "truncated":
        _truncate(path)
        return path

    def wrong_type(session: Any) -> None:  # the case: once coerced back and probed
        session["config"]["context_window"] = "8192"

    def unknown_field(session: Any) -> None:
        session["ledger"]["calls"][0]["host"] = "box-2"

    def edited(session: Any) -> None:
        session["config"]["context_window"] = 4096

    edits = {"wrong type": wrong_type, "unknown field": unknown_field, "edited": edited}
    return _rewrite_snapshot(path, edits[damage], rename=damage == "edited")


def _unknown_field(data: Any) -> None:
    (data[0] if isinstance(data, list) else data)["host"] = "box-2"


def _damage_json(
    wrong_type: Callable[[Any], None], edited: Callable[[Any], None]
) -> Callable[[str, Path], Path]:
    """The four damages of a JSON file, its ``wrong_type`` and ``edited`` edits given (an
    unknown field goes into the object, or the first object of a list)."""

    def damage(kind: str, path: Path) -> Path:
        if kind == "truncated":
            _truncate(path)
        else:
            edits = {"wrong type": wrong_type, "unknown field": _unknown_field, "edited": edited}
            _json_edit(path, edits[kind])
        return path

    return damage


def _set(*keys: str | int, value: object) -> Callable[[Any], None]:
    def edit(data: Any) -> None:
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value

    return edit


def _add(*keys: str, amount: int) -> Callable[[Any], None]:
    def edit(data: Any) -> None:
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] += amount

    return edit


def _rename_state(old: str, new: str) -> Callable[[Any], None]:
    def edit(data: Any) -> None:
        state = data["states"].pop(old)
        state["state"] = new
        data["states"][new] = state

    return edit


def _results_damage(kind: str, path: Path) -> Path:
    lines = path.read_bytes().split(b"\n")
    record = json.loads(lines[2])
    if kind == "truncated":  # a line cut short in the middle of the file, not a torn last one
        lines[2] = lines[2][: len(lines[2]) // 2]
    elif kind == "wrong type":
        record["repeat"] = "0"
    elif kind == "unknown field":
        record["host"] = "box-2"
    else:  # a record that names another checkpoint than the one its state has
        record["checkpoint_sha256"] = "0" * 64
    if kind != "truncated":
        lines[2] = json.dumps(record).encode()
    path.write_bytes(b"\n".join(lines))
    return path


@dataclass(frozen=True)
class Kind:
    name: str
    locate: Callable[[Path], Path]
    damage: Callable[[str, Path], Path]
    says: dict[str, str]
    """What the one line says, per damage."""
    command: str = "run"


KINDS = [
    Kind(
        "snapshot",
        _snapshot,
        _snapshot_damage,
        {
            "truncated": "is corrupted: its content does not match its sha256",
            "wrong type": "config.context_window: Input should be a valid integer",
            "unknown field": "ledger.calls.0.host: Extra inputs are not permitted",
            "edited": f"its {STATE} records were probed on checkpoint",
        },
    ),
    Kind(
        "manifest",
        _manifest,
        _damage_json(_set("eit", value="3528"), _add("eit", amount=1)),
        {
            "truncated": "not a valid manifest (top level: Invalid JSON",
            "wrong type": "not a valid manifest (eit: Input should be a valid integer",
            "unknown field": "not a valid manifest (host: Extra inputs are not permitted",
            "edited": "says eit",
        },
    ),
    Kind(
        "study.json",
        lambda run: run / "study.json",
        _damage_json(_set("shard", value=12), _set("shard", value="1/2")),
        {
            "truncated": "not a valid study file (top level: Invalid JSON",
            "wrong type": "not a valid study file (shard: Input should be a valid string",
            "unknown field": "not a valid study file (host: Extra inputs are not permitted",
            "edited": "holds shard 1/2; an unsharded run needs its own --out",
        },
    ),
    Kind(
        "run.json",
        lambda run: run / "run.json",
        _damage_json(
            _set("provenance", "questions", value="4"),
            _set("provenance", "pack_digest", value="0" * 16),
        ),
        {
            "truncated": "not JSON",
            "wrong type": "provenance.questions: Input should be a valid integer",
            "unknown field": "not a valid run configuration (host: Extra inputs",
            "edited": "used pack digest 0000000000000000",
        },
    ),
    Kind(
        "results.jsonl",
        lambda run: run / "oracle" / "results.jsonl",
        _results_damage,
        {
            "truncated": ":3: corrupt probe record",
            "wrong type": ":3: corrupt probe record (repeat: Input should be a valid integer",
            "unknown field": ":3: corrupt probe record (host: Extra inputs are not permitted",
            "edited": "records were probed on checkpoint 000000000000",
        },
    ),
    Kind(
        "visibility.json",
        lambda run: run / "oracle" / "visibility.json",
        _damage_json(
            _set("states", "S1-d0", "messages", value="14"), _rename_state("S1-d0", "S1-d1")
        ),
        {
            "truncated": "not a visibility map (top level: Invalid JSON",
            "wrong type": "states.S1-d0.messages: Input should be a valid integer",
            "unknown field": "not a visibility map (host: Extra inputs are not permitted",
            "edited": "has no state S1-d0 of the records",
        },
        command="report",
    ),
    Kind(
        "summaries.json",
        lambda run: run / "oracle" / "summaries.json",
        _damage_json(_set(0, "tokens", value="27"), _set(0, "summary_format", value="free-form")),
        {
            "truncated": "not a summaries file (top level: Invalid JSON",
            "wrong type": "not a summaries file (0.tokens: Input should be a valid integer",
            "unknown field": "not a summaries file (0.host: Extra inputs are not permitted",
            "edited": "says S2 was compacted by free-form, its records say verbatim",
        },
        command="report",
    ),
]
DAMAGES = ("truncated", "wrong type", "unknown field", "edited")
CASES = [(kind, damage) for kind in KINDS for damage in DAMAGES]


def _tree(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (lock files aside), by relative path."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and not p.name.endswith(".lock")
    }


def _copy(finished: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished, copy, symlinks=True)
    return copy


def _read_back(kind: Kind, copy: Path) -> Any:
    args = [*RUN, "--out", str(copy)] if kind.command == "run" else ["report", str(copy / "oracle")]
    return CliRunner().invoke(app, args)


@pytest.mark.parametrize(
    ("kind", "damage"), CASES, ids=[f"{k.name}-{d.replace(' ', '-')}" for k, d in CASES]
)
def test_a_damaged_file_is_one_line_and_nothing_is_written_over(
    finished: Path, tmp_path: Path, kind: Kind, damage: str
) -> None:
    copy = _copy(finished, tmp_path)
    path = kind.damage(damage, kind.locate(copy))
    before = _tree(copy)
    result = _read_back(kind, copy)
    assert result.exit_code in (1, 2), result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    (line,) = lines
    assert line.startswith("error: ") and "Traceback" not in result.output
    assert kind.says[damage] in line, line
    assert str(path) in line or str(path.parent) in line, line  # the file, or its folder
    assert _tree(copy) == before  # not one byte written over


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_family_record_is_rebuilt_exactly_and_announced(
    finished: Path, tmp_path: Path, damage: str
) -> None:
    """family.json alone is rebuilt: from the checkpoints, every field, byte for byte as the
    trunk wrote it, with a line saying so; the records are not touched."""
    copy = _copy(finished, tmp_path)
    record = _family(copy) / "family.json"
    original = record.read_bytes()
    edits = {"wrong type": _set("states", value="oops"), "edited": _set("turns", value=37)}
    _damage_json(edits["wrong type"], edits["edited"])(damage, record)
    results = (copy / "oracle" / "results.jsonl").read_bytes()
    resumed = _driver(copy)  # a resume, with the run's models (it reports again)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    (said,) = [line for line in resumed.stderr.splitlines() if "family_record_rebuilt" in line]
    assert str(record) in said and f"turns={json.loads(original)['turns']}" in said
    assert record.read_bytes() == original
    assert (copy / "oracle" / "results.jsonl").read_bytes() == results  # nothing re-ran
