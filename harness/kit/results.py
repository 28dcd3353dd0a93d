"""The append-only, keyed, resumable results log (``results.jsonl``), generic over the record.

Above: the protocols' runners (one record appended per probe or question), MIRAGE's
``mirage rescore`` (rewrites a file) and every report (reads one). Below: one JSON object per
line on disk. A record is keyed (``KeyedRecord.key``); a key is never written twice.

Durability: every append is one ``write`` of a whole line followed by ``fsync`` (a few ms,
against ≥ 50 ms of harness work per probe and seconds of model time:
``benchmarks/bench_results_log.py``), so an acknowledged probe survives a ``kill -9``, a native
crash in the model or a power cut. Such a stop can at worst leave a torn last line (no final
newline, or not JSON): reading leaves it out with a warning, opening the log for writing cuts it
off so its probe runs again. A bad line anywhere else is never dropped: it is an error naming
the file and line.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import structlog
from pydantic import ValidationError

from harness.kit.diskfull import DiskFullError

log = structlog.get_logger(__name__)

RESULTS_FILE = "results.jsonl"
STORED = "stored"  # validation context flag: the data comes from a results file


class ResultsLogError(RuntimeError):
    """The results file is corrupt (not merely torn at the end) or already in use."""


class KeyedRecord(Protocol):
    """A results-file record: pydantic, keyed (MIRAGE's ``ProbeRecord``, CUE's ``CueRecord``).
    Lines are validated with the context ``{STORED: True}``, so a record type can migrate what
    an older schema version wrote."""

    @property
    def key(self) -> tuple[Any, ...]: ...

    def model_dump_json(self) -> str: ...


RecordT = TypeVar("RecordT", bound=KeyedRecord)


class _Scan(NamedTuple, Generic[RecordT]):
    records: list[RecordT]
    intact: int  # bytes up to the end of the last line kept
    torn_line: int | None  # number of the torn last line that was left out


def _parse_line(line: bytes, number: int, path: Path, record_type: type[RecordT]) -> RecordT:
    try:
        parsed: RecordT = record_type.model_validate_json(  # type: ignore[attr-defined]
            line, context={STORED: True}, strict=True
        )
        return parsed
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        reason = f"{where}: {first['msg']}" if where else str(first["msg"])
        more = f"; {exc.error_count() - 1} more problem(s)" if exc.error_count() > 1 else ""
        raise ResultsLogError(
            f"{path}:{number}: corrupt probe record ({reason}{more}); mirage never writes such "
            "a line: repair or delete it (a deleted probe is re-run on resume)"
        ) from exc


def _is_torn(line: bytes, terminated: bool) -> bool:
    """A last line cut short by a kill: no final newline, or not JSON at all."""
    if not terminated:
        return True
    try:
        json.loads(line)
    except ValueError:
        return True
    return False


def _scan(path: Path, record_type: type[RecordT]) -> _Scan[RecordT]:
    """Records of every line; only the last non-blank line may be torn, and is left out."""
    data = path.read_bytes() if path.exists() else b""
    lines = data.split(b"\n")  # the final item is whatever follows the last newline
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records: list[RecordT] = []
    offset = 0
    for index, line in enumerate(lines):
        terminated = index < len(lines) - 1
        if index == last and _is_torn(line, terminated):
            return _Scan(records, offset, index + 1)
        if line.strip():
            records.append(_parse_line(line, index + 1, path, record_type))
        offset += len(line) + terminated
    return _Scan(records, offset, None)


def read_records(path: str | os.PathLike[str], record_type: type[RecordT]) -> list[RecordT]:
    """All records of a results file (a torn last line is left out with a warning; duplicates
    keep the first; a corrupt line anywhere else raises ``ResultsLogError``)."""
    file = Path(path)
    if file.is_dir():
        file = file / RESULTS_FILE
    if not file.exists():
        raise FileNotFoundError(f"no results file at {file}")
    scan = _scan(file, record_type)
    if scan.torn_line is not None:
        log.warning("results.torn_last_line_ignored", path=str(file), line=scan.torn_line)
    return list(_unique(scan.records, file))


def _unique(records: Iterable[RecordT], path: Path) -> Iterator[RecordT]:
    seen: set[tuple[Any, ...]] = set()
    for record in records:
        if record.key in seen:
            log.warning("results.duplicate_key_ignored", path=str(path), key=tuple(record.key))
            continue
        seen.add(record.key)
        yield record


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ResultsLog(Generic[RecordT]):
    """Append-only writer of ``results.jsonl`` that resumes where a previous run stopped.

    Holds an exclusive lock on the file while open, so two runs cannot interleave. Every
    record is a ``record_type`` (pydantic, keyed).
    """

    def __init__(self, path: str | os.PathLike[str], record_type: type[RecordT]) -> None:
        self.path = Path(path)
        self.record_type = record_type
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise ResultsLogError(f"{self.path} is being written by another run") from exc
            if created:
                _fsync_directory(self.path.parent)  # the new file's name is durable too
            self._records = self._load_and_repair()
        except BaseException:
            self.close()
            raise
        self._keys = {r.key for r in self._records}

    def _load_and_repair(self) -> list[RecordT]:
        """The records so far; a torn last line (a kill mid-write) is cut off, so its probe
        runs again."""
        scan = _scan(self.path, self.record_type)
        size = os.fstat(self._fd).st_size
        if scan.intact < size:
            log.warning(
                "results.torn_last_line_dropped",
                path=str(self.path),
                line=scan.torn_line,
                bytes=size - scan.intact,
            )
            os.ftruncate(self._fd, scan.intact)
            os.fsync(self._fd)
        return list(_unique(scan.records, self.path))

    def __enter__(self) -> ResultsLog[RecordT]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    @property
    def keys(self) -> frozenset[Any]:
        return frozenset(self._keys)

    @property
    def records(self) -> list[RecordT]:
        return list(self._records)

    def append(self, record: RecordT) -> bool:
        """Write ``record`` durably; ``False`` (nothing written) when its key is already there."""
        line = (record.model_dump_json() + "\n").encode()
        with self._lock:
            if self._fd < 0:
                raise ResultsLogError(f"{self.path} is closed")
            if record.key in self._keys:
                return False
            self._write_whole(line)
            self._keys.add(record.key)
            self._records.append(record)
            return True

    def _write_whole(self, line: bytes) -> None:
        """Append and fsync ``line``, or leave the file as it was: a failed or short write (a
        full disk) is cut back off, so no torn line is left for the resume to repair."""
        start = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                raise DiskFullError(self.path, f"short write: {written}/{len(line)} bytes")
            os.fsync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, start)
            except OSError:
                log.warning("results.cut_back_failed", path=str(self.path), offset=start)
            if exc.errno == errno.ENOSPC and not exc.filename:
                raise DiskFullError(self.path) from exc
            raise

    def replace(self, updates: Iterable[RecordT]) -> int:
        """Swap in ``updates`` for the records with the same keys, atomically (other records
        keep their place; a key not yet in the log is appended); returns how many records were
        swapped or added.

        The whole new file is written to ``<name>.tmp``, fsynced and locked, then renamed over
        the log and the directory fsynced: a reader, or a kill at any moment, sees the old file
        or the new one, never a torn line, and the lock never lapses (the new file is locked
        before its name appears)."""
        with self._lock:
            if self._fd < 0:
                raise ResultsLogError(f"{self.path} is closed")
            pending = {record.key: record for record in updates}
            changed = len(pending)
            merged = [pending.pop(record.key, record) for record in self._records]
            merged += pending.values()
            self._fd = self._swap_in(merged)
            self._records, self._keys = merged, {record.key for record in merged}
            return changed

    def _swap_in(self, records: list[RecordT]) -> int:
        """Write ``records`` as the new log file; returns its open, locked descriptor (the old
        one is closed)."""
        temp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            data = b"".join((record.model_dump_json() + "\n").encode() for record in records)
            _write_all(fd, data, temp)
            os.fsync(fd)
            os.replace(temp, self.path)
            _fsync_directory(self.path.parent)
        except BaseException:
            os.close(fd)
            raise
        os.close(self._fd)
        return fd


def _write_all(fd: int, data: bytes, path: Path) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise ResultsLogError(f"short write to {path}")
        view = view[written:]


def rewrite_records(path: str | os.PathLike[str], records: Iterable[RecordT]) -> None:
    """Atomically replace a results file (used by rescore): temp file, fsync, rename.

    Refused while a run holds the file open for writing.
    """
    target = Path(path)
    guard = os.open(target, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise ResultsLogError(f"{target} is being written by a run; rescore later") from exc
        temp = target.with_name(target.name + ".tmp")
        with open(temp, "wb") as handle:
            for record in _unique(records, target):
                handle.write((record.model_dump_json() + "\n").encode())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    finally:
        os.close(guard)
