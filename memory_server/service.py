"""The memory service: what the MCP tools do, independent of the MCP transport.

Above: the MCP server (``server.py``), the CLI and the harness, which may also call it
directly. Below: the workspace (files, manifest, notes), the note write path (``appends``), the
hybrid index and the call log. Every entry point validates its input and raises
``MemoryServerError`` subclasses with messages written for the caller; every call, failed or
not, lands in the call log.

An append is logged (fsynced) and written by ``appends.NoteWriter``, then indexed by a sync
round of the index (shared with appends that arrive meanwhile) before it is acknowledged;
searches during that round serve the index as it was. A failed index update does not fail the
append (its note is written and logged): the next round indexes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from memory_server.appends import NoteWriter, validated_key
from memory_server.calllog import CallDraft, CallLog
from memory_server.chunking import extract_text
from memory_server.errors import InvalidInputError, MemoryServerError, UnknownReferenceError
from memory_server.generations import SEARCH_LOCK_WAIT_S
from memory_server.index import HybridIndex, IndexConfig
from memory_server.lines import split_lines
from memory_server.manifest import FileEntry
from memory_server.search import Hit, citation_for
from memory_server.workspace import Workspace, validated_date

log = structlog.get_logger(__name__)

MAX_QUERY_CHARS = 2000
MAX_K = 50
MAX_GET_CHARS = 200_000
_TEXTLESS = frozenset({"image", "binary"})

T = TypeVar("T")


class RecallResult(BaseModel):
    """What ``artifact_recall`` returns."""

    query: str
    hits: list[Hit]
    version: str | None = Field(default=None, description="workspace version searched; None = live")


class FileContent(BaseModel):
    """What ``artifact_get`` returns: the text of one file (or of a line range of it)."""

    artifact_id: str
    path: str
    kind: str
    start_line: int
    end_line: int
    total_lines: int
    truncated: bool
    citation: str
    content: str


class AppendResult(BaseModel):
    path: str
    start_line: int
    end_line: int
    citation: str


class CallerInfo(BaseModel):
    """Who made a call, as far as the transport can tell."""

    model_config = ConfigDict(frozen=True)

    tag: str | None = None
    session: str | None = None
    transport: str = "direct"


class MemoryService:
    def __init__(
        self,
        workspace: Workspace,
        index: HybridIndex | None = None,
        *,
        index_config: IndexConfig | None = None,
        call_log: Path | None = None,
        version: str | None = None,
        log_calls: bool = True,
        note_date: str | None = None,
    ) -> None:
        """``note_date`` (ISO ``YYYY-MM-DD``) fixes the dated note ``memory_append`` writes to,
        so notes do not depend on the day the service runs; None: today's note."""
        self.workspace = workspace
        self.note_date = None if note_date is None else validated_date(note_date)
        self._index = index
        self._index_config = index_config
        self._index_lock = threading.Lock()
        self.call_log = CallLog(call_log or workspace.state_dir / "calls.jsonl")
        self.log_calls = log_calls
        self._notes = NoteWriter(workspace, self.call_log if log_calls else None)
        self._version: str | None = None
        self.pin(version)
        if version is None:
            self._notes.recover()

    @property
    def version(self) -> str | None:
        """The workspace version every tool reads (``None``: the live workspace)."""
        return self._version

    def pin(self, version: str | None) -> None:
        """Serve ``version`` from now on (``None``: the live workspace); raises
        ``WorkspaceError`` for a version the workspace does not have."""
        if version is not None:
            self.workspace.version(version)
        self._version = version

    @property
    def index(self) -> HybridIndex:
        """The hybrid index, opened on first use (opening imports chromadb; searching loads the
        embedding model), so a server that is only asked for files starts fast."""
        with self._index_lock:
            if self._index is None:
                self._index = HybridIndex(self.workspace, self._index_config)
            return self._index

    def warm_up(self) -> None:
        """Open the index, bring it up to date and load the model before the first call. A
        failure is logged, not raised: the first call then reports it to its caller."""
        try:
            self.index.sync(self.version)
            self.index.embedder.embed(["warm up"])
        except Exception as exc:
            log.warning("memory.warm_up_failed", error=f"{type(exc).__name__}: {exc}")

    # -- tools ------------------------------------------------------------------------------

    def recall(
        self,
        query: str,
        k: int = 5,
        artifact_id: str | None = None,
        caller: CallerInfo | None = None,
    ) -> RecallResult:
        arguments = {"query": query, "k": k, "artifact_id": artifact_id}

        def run() -> RecallResult:
            text = _validated_query(query)
            count = _validated_k(k)
            canonical = self._canonical_artifact(artifact_id) if artifact_id is not None else None
            hits = self.index.search(text, count, artifact_id=canonical, version=self.version)
            return RecallResult(query=text, hits=hits, version=self.version)

        return self._logged("artifact_recall", arguments, caller, run, _recall_ids)

    def get(
        self,
        ref: str,
        start_line: int | None = None,
        end_line: int | None = None,
        caller: CallerInfo | None = None,
    ) -> FileContent:
        arguments = {"ref": ref, "start_line": start_line, "end_line": end_line}

        def run() -> FileContent:
            entry = self._file_for(ref)
            return self._content(entry, start_line, end_line)

        return self._logged("artifact_get", arguments, caller, run, lambda r: [r.artifact_id])

    def append(
        self,
        text: str,
        caller: CallerInfo | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        arguments: dict[str, Any] = {"text": text}
        if idempotency_key is not None:
            arguments["idempotency_key"] = idempotency_key
        with self._record("memory_append", arguments, caller or CallerInfo()) as call:
            if self.version is not None:
                raise InvalidInputError(
                    "this server is pinned to a read-only workspace version; notes cannot be added"
                )
            key = validated_key(idempotency_key)
            index = self._index  # an index nobody opened yet syncs on its first search
            if index is None:
                landed = self._notes.append(text, key, call, self.note_date)
            else:
                with index.writing_notes():
                    landed = self._notes.append(text, key, call, self.note_date)
                    _index_note(index)
            if landed.replay_of is not None:
                call.result = landed.result()
            return AppendResult(**landed.result())

    # -- helpers ----------------------------------------------------------------------------

    def _logged(
        self,
        tool: str,
        arguments: dict[str, Any],
        caller: CallerInfo | None,
        run: Callable[[], T],
        hit_ids: Callable[[T], list[str]],
    ) -> T:
        with self._record(tool, arguments, caller or CallerInfo()) as call:
            result = run()
            call.hits = hit_ids(result)
            return result

    @contextmanager
    def _record(self, tool: str, arguments: dict[str, Any], caller: CallerInfo) -> Iterator[_Call]:
        """The call in progress; its record is logged when it ends, unless a write logged it
        already (``appends``)."""
        call = _Call(
            self.call_log if self.log_calls else None,
            tool,
            _loggable(arguments),
            tag=caller.tag,
            session=caller.session,
            transport=caller.transport,
        )
        error: str | None = None
        try:
            yield call
        except MemoryServerError as exc:
            error = str(exc)
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if not call.logged:
                call.log(call.record(hits=call.hits, error=error, result=call.result))

    def _canonical_artifact(self, artifact_id: str) -> str:
        if not isinstance(artifact_id, str) or not artifact_id.strip():
            raise InvalidInputError("artifact_id must be a non-empty string or omitted")
        canonical = self.workspace.resolve(artifact_id)
        if canonical is None:
            raise UnknownReferenceError(
                f"unknown artifact_id {artifact_id!r}; call artifact_recall without artifact_id "
                "to discover ids"
            )
        return canonical

    def _file_for(self, ref: str) -> FileEntry:
        if not isinstance(ref, str) or not ref.strip():
            raise InvalidInputError("ref must be a non-empty artifact id or workspace path")
        if len(ref) > MAX_QUERY_CHARS:
            raise InvalidInputError(f"ref is longer than {MAX_QUERY_CHARS} characters")
        if self.version is None:
            self.workspace.refresh()
        entry = self.workspace.file_entry(ref, self.version)
        if entry.kind not in _TEXTLESS:
            return entry
        manifest = (
            self.workspace.manifest
            if self.version is None
            else self.workspace.version(self.version)
        )
        record = manifest.artifacts[entry.artifact_id]
        for path in record.files:
            if manifest.files[path].kind not in _TEXTLESS:
                return manifest.files[path]
        raise UnknownReferenceError(
            f"{entry.path!r} is a {entry.kind} file with no text and artifact "
            f"{entry.artifact_id!r} has no derived text file"
        )

    def _content(
        self, entry: FileEntry, start_line: int | None, end_line: int | None
    ) -> FileContent:
        text = extract_text(self.workspace.read_bytes(entry.path, self.version), entry.kind) or ""
        lines = split_lines(text)
        first, last = _line_range(start_line, end_line, len(lines))
        body = "\n".join(lines[first - 1 : last])
        truncated = len(body) > MAX_GET_CHARS
        return FileContent(
            artifact_id=entry.artifact_id,
            path=entry.path,
            kind=entry.kind,
            start_line=first,
            end_line=last,
            total_lines=len(lines),
            truncated=truncated,
            citation=citation_for(entry.path, first, last),
            content=body[:MAX_GET_CHARS],
        )


class _Call(CallDraft):
    """A call in progress, with what the service learns about it before it is logged."""

    hits: list[str] | None = None
    result: dict[str, Any] | None = None


def _index_note(index: HybridIndex) -> None:
    """Bring the index up to the note just written. It is written and logged already, so a
    failure here is logged, not raised: the next sync round indexes it."""
    try:
        index.sync(lock_timeout=SEARCH_LOCK_WAIT_S)
    except Exception as exc:
        log.warning("memory.append_index_deferred", error=f"{type(exc).__name__}: {exc}")


def _recall_ids(result: RecallResult) -> list[str]:
    return [hit.artifact_id for hit in result.hits]


def _validated_query(query: str) -> str:
    if not isinstance(query, str):
        raise InvalidInputError("query must be a string")
    text = query.strip()
    if not text:
        raise InvalidInputError("query is empty; describe the evidence you need in a few words")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInputError(
            f"query has {len(text)} characters; the limit is {MAX_QUERY_CHARS}: use key words, "
            "ids or numbers instead of pasting documents"
        )
    return text


def _validated_k(k: Any) -> int:
    count = _json_integer(k)
    if count is None or not 1 <= count <= MAX_K:
        raise InvalidInputError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    return count


def _json_integer(value: Any) -> int | None:
    """``value`` as an int when it is a JSON integer (``5`` or ``5.0``), else None: booleans,
    strings such as ``"5"`` and fractions are not integers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _line_range(start: Any, end: Any, total: int) -> tuple[int, int]:
    bounds: list[int | None] = []
    for name, value in (("start_line", start), ("end_line", end)):
        number = None if value is None else _json_integer(value)
        if value is not None and (number is None or number < 1):
            raise InvalidInputError(
                f"{name} must be a positive integer (lines count from 1), got {value!r}"
            )
        bounds.append(number)
    first = bounds[0] or 1
    last = min(bounds[1] or total, total)
    if total == 0:
        return 1, 0
    if first > total:
        raise InvalidInputError(f"start_line {first} is past the end of the file ({total} lines)")
    if last < first:
        raise InvalidInputError(f"end_line {bounds[1]} is before start_line {first}")
    return first, last


def _loggable(arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments as logged: long strings are cut so a huge rejected input cannot bloat the log."""
    return {
        key: (value[:500] + "…" if isinstance(value, str) and len(value) > 500 else value)
        for key, value in arguments.items()
    }
