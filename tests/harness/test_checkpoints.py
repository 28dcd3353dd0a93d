"""Checkpoint families: an unfinished family is rebuilt, a finished one with a bad checkpoint is
refused in one line naming the file and the fix, and a kill while checkpoints are being written
never leaves a half checkpoint that a resume trusts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.mirage.trunk.checkpoints import (
    FAMILY_FILE,
    MANIFEST,
    Checkpoint,
    CheckpointError,
    discard_unfinished_family,
    family_lock,
    load_family,
    mark_family_complete,
    read_checkpoint,
    write_checkpoint,
)
from tests.harness.agents_support import TRUNK as ONE_STATE_TRUNK
from tests.harness.agents_support import compacted_session

STATES = ["S1-d0", "S2"]
TRUNK = ONE_STATE_TRUNK.model_copy(
    update={"states": (("S1-d0", "plant_end", None, 1), ("S2", "compaction", None, 1))}
)


def make_checkpoint(family: Path, state: str) -> Checkpoint:
    return write_checkpoint(
        family,
        compacted_session(),
        state=state,
        trunk=TRUNK,
        trunk_position=3,
        trunk_turns_total=3,
        workspace_version=None,
    )


def _family(tmp_path: Path, finished: bool = True) -> Path:
    family = tmp_path / "checkpoints" / TRUNK.family_id()
    for state in STATES:
        make_checkpoint(family, state)
    if finished:
        mark_family_complete(family, TRUNK, turns=3, states=dict.fromkeys(STATES, 0))
    return family


def test_unfinished_family_is_discarded_and_a_finished_one_loads(tmp_path: Path) -> None:
    family = _family(tmp_path, finished=False)
    assert load_family(family, STATES) is None
    discard_unfinished_family(family)
    assert not family.exists()
    family = _family(tmp_path)
    discard_unfinished_family(family)  # never touches a finished family
    loaded = load_family(family, STATES)
    assert loaded is not None and list(loaded) == STATES


def _flip_snapshot_byte(family: Path) -> Path:
    (snapshot,) = (family / "S2").glob("*.session")
    data = bytearray(snapshot.read_bytes())
    data[-5] ^= 0x20
    snapshot.write_bytes(bytes(data))
    return snapshot


def _truncate_snapshot(family: Path) -> Path:
    (snapshot,) = (family / "S2").glob("*.session")
    snapshot.write_bytes(snapshot.read_bytes()[:100])
    return snapshot


def _garble_manifest(family: Path) -> Path:
    manifest = family / "S2" / MANIFEST
    manifest.write_bytes(b"\xff\xfe{not json")
    return manifest


def _drop_state(family: Path) -> Path:
    for path in (family / "S1-d0").iterdir():
        path.unlink()
    (family / "S1-d0").rmdir()
    return family / "S1-d0" / MANIFEST


def _wrong_snapshot_header(family: Path) -> Path:
    (snapshot,) = (family / "S2").glob("*.session")
    snapshot.write_bytes(b'{"format": 3}\n{}')
    return snapshot


CORRUPTIONS: list[Callable[[Path], Path]] = [
    _flip_snapshot_byte,
    _truncate_snapshot,
    _garble_manifest,
    _drop_state,
    _wrong_snapshot_header,
]


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=[c.__name__.strip("_") for c in CORRUPTIONS])
def test_a_bad_checkpoint_of_a_finished_family_is_refused_in_one_line(
    tmp_path: Path, corrupt: Callable[[Path], Path]
) -> None:
    family = _family(tmp_path)
    bad_file = corrupt(family)
    with pytest.raises(CheckpointError) as caught:
        load_family(family, STATES)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600, message
    assert message.startswith("corrupt checkpoint: ") and str(bad_file) in message
    assert message.endswith(
        f"delete {family} to rebuild this trunk on the next run "
        "(records already in results.jsonl are kept)"
    )


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from runtime.messages import UserMessage
    from tests.harness.agents_support import TRUNK, compacted_session
    from harness.mirage.trunk.checkpoints import write_checkpoint

    session = compacted_session()
    for i in range(3000):
        session.append(UserMessage.text(f"filler turn {i} " + "lorem ipsum " * 40))
    for n in range(10_000):
        session.append(UserMessage.text(f"turn {n}"))
        write_checkpoint(Path(sys.argv[1]), session, state=f"S{n}", trunk=TRUNK,
                         trunk_position=n, trunk_turns_total=n, workspace_version=None)
        print(n, flush=True)
    """
)


def test_a_kill_while_writing_checkpoints_leaves_none_half_trusted(tmp_path: Path) -> None:
    family = tmp_path / "family"
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(family)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=root,
    )
    assert child.stdout is not None
    acknowledged = [int(child.stdout.readline()) for _ in range(3)]
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert not (family / FAMILY_FILE).exists()
    assert load_family(family, [f"S{n}" for n in acknowledged]) is None  # never trusted
    written = [state.parent for state in family.glob(f"*/{MANIFEST}")]
    assert {family / f"S{n}" for n in acknowledged} <= set(written)
    for directory in written:  # every checkpoint with a manifest is whole
        read_checkpoint(directory)
    for directory in family.iterdir():
        if directory not in written:  # the one being written when the kill came
            with pytest.raises(CheckpointError):
                read_checkpoint(directory)
    discard_unfinished_family(family)
    assert not family.exists()


def test_a_second_run_waits_for_the_family_being_built_then_reuses_it(tmp_path: Path) -> None:
    family = tmp_path / "checkpoints" / TRUNK.family_id()
    seen: list[object] = []
    with family_lock(family):
        make_checkpoint(family, "S1-d0")  # the first run is half-way through its trunk

        def second_run() -> None:
            with family_lock(family):
                seen.append(load_family(family, STATES))

        waiter = threading.Thread(target=second_run)
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive() and seen == []  # it waits instead of discarding our work
        make_checkpoint(family, "S2")
        mark_family_complete(family, TRUNK, turns=3, states=dict.fromkeys(STATES, 0))
    waiter.join(timeout=10)
    (loaded,) = seen
    assert isinstance(loaded, dict) and list(loaded) == STATES
