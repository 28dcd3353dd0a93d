"""The write path of ``memory_append``: logged before it is written, durable, and idempotent.

Above: the memory service (``MemoryService.append``), which then brings the index up to date
and acknowledges. Below: the workspace's note primitives (``notes_lock``, ``plan_note``,
``write_note``), the call log, and a one-entry journal ``.mirage/notes.pending``.

Order, all under the notes lock (shared with other processes):

1. plan: where the text lands (path, lines) and the bytes it adds to the note;
2. journal: the plan and the call's log record, fsynced;
3. log: the record (with the landing and the text's sha256) to the call log, fsynced;
4. write: the note (temporary file, fsync, rename, fsync of ``memory/``);
5. clear the journal.

So after a kill -9 at any moment an append is in the call log or not in the note, never in the
note without being logged. Recovery runs whenever the lock is taken (and when a service starts):
a journal left behind means its writer died between 2 and 5. If the note holds the bytes,
nothing is missing. If the record reached the log but the note did not get the bytes, the write
is completed (the log promised it; the client, unanswered, may retry with its key). If the
record never reached the log, the append never happened and the journal is dropped. If the note
changed in between (a checkout), a second record with the same ``call_id`` says it was not
written.

Idempotency: ``memory_append`` takes an optional ``idempotency_key``. A key already used for
the same text returns where that text landed, without writing it again, as long as the note
still holds it there (after a checkout to an earlier version it is written anew); the same key
with another text is refused. Keys are found in the call log, so they survive restarts and are
shared by every server writing the same log. Without a key every call appends.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from memory_server.calllog import CallDraft, CallLog, CallRecord
from memory_server.errors import CorruptStateError, InvalidInputError, MemoryServerError
from memory_server.lines import split_lines
from memory_server.search import citation_for
from memory_server.store import atomic_write_bytes
from memory_server.workspace import NoteAppend, PlannedNote, Workspace, validated_note

log = structlog.get_logger(__name__)

JOURNAL_NAME = "notes.pending"
MAX_KEY_CHARS = 200
TOOL = "memory_append"


class PendingAppend(BaseModel):
    """What the journal holds while an append is being logged and written."""

    model_config = ConfigDict(frozen=True)

    plan: PlannedNote
    record: CallRecord
    call_log: str | None
    log_offset: int


class Landed(BaseModel):
    """Where an append's text is: written by this call, or by the call ``replay_of``."""

    model_config = ConfigDict(frozen=True)

    landing: NoteAppend
    text_sha256: str
    replay_of: str | None = None

    def result(self) -> dict[str, Any]:
        """The ``result`` of the call's log record."""
        fields: dict[str, Any] = {
            **self.landing.model_dump(),
            "citation": citation_for(
                self.landing.path, self.landing.start_line, self.landing.end_line
            ),
            "text_sha256": self.text_sha256,
        }
        if self.replay_of is not None:
            fields["replay_of"] = self.replay_of
        return fields


def validated_key(key: Any) -> str | None:
    """An idempotency key: printable ASCII without spaces, 1 to ``MAX_KEY_CHARS`` characters."""
    if key is None:
        return None
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS:
        raise InvalidInputError(
            f"idempotency_key must be a string of 1 to {MAX_KEY_CHARS} characters or omitted"
        )
    if not all("!" <= char <= "~" for char in key):
        raise InvalidInputError(
            "idempotency_key may hold printable ASCII characters only, without spaces (e.g. a UUID)"
        )
    return key


class NoteWriter:
    """Appends notes to one workspace in the order above."""

    def __init__(self, workspace: Workspace, call_log: CallLog | None) -> None:
        self._workspace = workspace
        self._journal = workspace.state_dir / JOURNAL_NAME
        self._keys = _KeyIndex(call_log)

    def append(
        self, text: str, key: str | None, call: CallDraft, date: str | None = None
    ) -> Landed:
        """Append ``text`` to the note of ``date`` (None: today), or find it landed under
        ``key``; logs ``call`` durably first."""
        body = validated_note(text)
        digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
        with self._workspace.notes_lock():
            self._recover_locked()
            earlier = self._keys.find(key, digest, self._workspace) if key else None
            if earlier is not None:
                return earlier
            plan = self._workspace.plan_note(body, date)
            landed = Landed(landing=plan.landing, text_sha256=digest)
            record = call.record(result=landed.result())
            log_offset = call.call_log.size() if call.call_log is not None else 0
            path = str(call.call_log.path) if call.call_log is not None else None
            self._write_journal(
                PendingAppend(plan=plan, record=record, call_log=path, log_offset=log_offset)
            )
            try:
                call.log(record, durable=True)
                self._write_logged(plan, call)
            finally:
                self._journal.unlink(missing_ok=True)
            if key:
                self._keys.remember(key, landed.model_copy(update={"replay_of": call.call_id}))
        return landed

    def _write_logged(self, plan: PlannedNote, call: CallDraft) -> None:
        """Write a logged append; if that fails, log that it was not written, and raise."""
        try:
            self._workspace.write_note(plan)
        except BaseException as exc:
            call.log(call.record(error=f"not written: {type(exc).__name__}: {exc}"), durable=True)
            raise

    def recover(self) -> None:
        """Finish or drop an append a writer that died left in the journal (see above)."""
        with self._workspace.notes_lock():
            self._recover_locked()

    def _recover_locked(self) -> None:
        pending = self._read_journal()
        if pending is None:
            return
        if pending.call_log is not None:
            CallLog(Path(pending.call_log)).seal()
        if self._workspace.note_holds(pending.plan):
            outcome = "written"
        elif not _was_logged(pending):
            outcome = "never logged: dropped"
        else:
            outcome = self._complete(pending)
        log.warning("memory.append_recovered", call_id=pending.record.call_id, outcome=outcome)
        self._journal.unlink(missing_ok=True)

    def _complete(self, pending: PendingAppend) -> str:
        try:
            self._workspace.write_note(pending.plan)
            return "logged but not written: written now"
        except CorruptStateError as exc:
            if pending.call_log is not None:
                correction = pending.record.model_copy(
                    update={
                        "error": f"not written: the server stopped before writing it ({exc})",
                        "result": None,
                    }
                )
                CallLog(Path(pending.call_log)).append(correction, durable=True)
            return "logged but not written: the note changed since, recorded as not written"

    def _write_journal(self, pending: PendingAppend) -> None:
        atomic_write_bytes(self._journal, pending.model_dump_json().encode("utf-8"))

    def _read_journal(self) -> PendingAppend | None:
        try:
            data = self._journal.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return PendingAppend.model_validate_json(data)
        except (ValidationError, ValueError):
            log.warning("memory.append_journal_unreadable", path=str(self._journal))
            self._journal.unlink(missing_ok=True)
            return None


def _was_logged(pending: PendingAppend) -> bool:
    if pending.call_log is None:
        return True  # calls are not logged: the journal is the only promise
    records, _ = CallLog(Path(pending.call_log)).records_from(pending.log_offset)
    return any(record.call_id == pending.record.call_id for record in records)


class _KeyIndex:
    """Idempotency keys of appends that landed, read from the call log as it grows."""

    def __init__(self, call_log: CallLog | None) -> None:
        self._log = call_log
        self._offset = 0
        self._landed: dict[str, Landed] = {}

    def find(self, key: str, digest: str, workspace: Workspace) -> Landed | None:
        """The landing of an earlier append with ``key`` that the note still holds; raises
        when the key was used for another text."""
        self._catch_up()
        earlier = self._landed.get(key)
        if earlier is None:
            return None
        if earlier.text_sha256 != digest:
            raise InvalidInputError(
                f"idempotency_key {key!r} was already used for a different note; a retry must "
                "send the same text, a new note needs a new key"
            )
        return earlier if _still_there(workspace, earlier) else None

    def remember(self, key: str, landed: Landed) -> None:
        self._landed[key] = landed

    def _catch_up(self) -> None:
        if self._log is None:
            return
        records, self._offset = self._log.records_from(self._offset)
        for record in records:
            key = record.arguments.get("idempotency_key")
            if record.tool != TOOL or not isinstance(key, str):
                continue
            known = self._landed.get(key)
            if record.error is not None:
                if known is not None and known.replay_of == record.call_id:
                    del self._landed[key]  # a correction: that call did not write after all
            elif record.result is not None and "replay_of" not in record.result:
                self._landed[key] = _landed_from(record)


def _landed_from(record: CallRecord) -> Landed:
    assert record.result is not None
    landing = NoteAppend.model_validate(
        {name: record.result[name] for name in ("path", "start_line", "end_line")}
    )
    return Landed(
        landing=landing, text_sha256=record.result["text_sha256"], replay_of=record.call_id
    )


def _still_there(workspace: Workspace, landed: Landed) -> bool:
    """Whether the note still holds the text at the lines it landed on."""
    try:
        data = workspace.read_bytes(landed.landing.path)
    except (OSError, MemoryServerError):
        return False
    lines = split_lines(data.decode("utf-8", errors="replace"))
    text = "\n".join(lines[landed.landing.start_line - 1 : landed.landing.end_line])
    return hashlib.sha256(text.encode("utf-8")).hexdigest() == landed.text_sha256
