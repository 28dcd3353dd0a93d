"""The run's two kinds of refusal, each one line: a bad file it reads or writes
(``RunInputError``) and an output folder this configuration cannot resume (``ResumeError``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class RunInputError(RuntimeError):
    """A file the run reads or writes is bad (pack, checkpoint, results log); the message is
    one line naming the file and what to do."""


class ResumeError(ValueError):
    """An existing output folder cannot be resumed with this configuration."""


@contextmanager
def bad_files_reported() -> Iterator[None]:
    """Turns the errors of bad pack, checkpoint and results files into ``RunInputError``."""
    from harness.kit.outlock import OutLockedError
    from harness.kit.packfiles import PackFormatError
    from harness.kit.results import ResultsLogError
    from harness.kit.rundir import RunFileError
    from harness.mirage.packs.schema import PackPathError
    from harness.mirage.trunk.checkpoints import CheckpointError

    try:
        yield
    except PackFormatError as exc:
        raise RunInputError(exc.summary()) from exc
    except (PackPathError, CheckpointError, ResultsLogError, OutLockedError, RunFileError) as exc:
        raise RunInputError(str(exc)) from exc
