"""The keyword side of hybrid retrieval, and the record of what is indexed: SQLite FTS5 (BM25).

Above: the hybrid index. Below: ``keyword.sqlite`` of one index generation, three tables:
``units`` (one row per indexed file or artifact card, keyed by a key that changes whenever the
content or its artifact context changes), ``chunks`` (text, path, line range) and the FTS5
table over chunk headers and texts. Exact ids and numbers are found because FTS5 matches
tokens literally (``chart_3f9a1c20`` is the tokens ``chart`` ``3f9a1c20``).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)
_MAX_KEYWORD_TERMS = 32
_SCHEMA = """
CREATE TABLE IF NOT EXISTS units (
    unit_key TEXT PRIMARY KEY, path TEXT NOT NULL, n_chunks INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY, chunk_id TEXT UNIQUE NOT NULL, unit_key TEXT NOT NULL,
    path TEXT NOT NULL, ordinal INTEGER NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, locator TEXT NOT NULL, header TEXT NOT NULL, text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_unit ON chunks(unit_key);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    header, text, content='chunks', content_rowid='rowid', tokenize='unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, 'row');
"""
_COMMON_SHARE = 0.05
_COMMON_FLOOR = 500


class StoredChunk(BaseModel):
    model_config = ConfigDict(frozen=True)

    chunk_id: str
    unit_key: str
    path: str
    ordinal: int
    start_line: int
    end_line: int
    locator: str
    header: str
    text: str


def keyword_terms(query: str) -> list[str]:
    """The query's tokens for an OR match, stopwords dropped unless nothing else remains."""
    tokens = list(dict.fromkeys(token.lower() for token in _TOKEN.findall(query)))
    content = [token for token in tokens if token not in _STOPWORDS]
    return (content or tokens)[:_MAX_KEYWORD_TERMS]


class KeywordStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        with self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)

    def unit_keys(self) -> set[str]:
        with self._lock:
            return {row[0] for row in self._db.execute("SELECT unit_key FROM units")}

    def known_units(self, unit_keys: Sequence[str]) -> set[str]:
        """Which of ``unit_keys`` are indexed (cost proportional to the question, not to the
        index)."""
        found: set[str] = set()
        with self._lock:
            for start in range(0, len(unit_keys), 500):
                batch = list(unit_keys[start : start + 500])
                marks = ",".join("?" * len(batch))
                rows = self._db.execute(
                    f"SELECT unit_key FROM units WHERE unit_key IN ({marks})", batch
                )
                found.update(row[0] for row in rows)
        return found

    def chunk_count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def add_units(self, units: Sequence[tuple[str, str, Sequence[StoredChunk]]]) -> None:
        """Units (key, path, chunks) in one transaction."""
        with self._lock, self._db:
            for unit_key, path, chunks in units:
                self._db.execute(
                    "INSERT OR REPLACE INTO units VALUES (?, ?, ?)", (unit_key, path, len(chunks))
                )
                for chunk in chunks:
                    self._insert_chunk(chunk)

    def _insert_chunk(self, chunk: StoredChunk) -> None:
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO chunks (chunk_id, unit_key, path, ordinal, start_line, "
            "end_line, locator, header, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                chunk.chunk_id,
                chunk.unit_key,
                chunk.path,
                chunk.ordinal,
                chunk.start_line,
                chunk.end_line,
                chunk.locator,
                chunk.header,
                chunk.text,
            ),
        )
        if cursor.rowcount:
            self._db.execute(
                "INSERT INTO chunks_fts (rowid, header, text) VALUES (?, ?, ?)",
                (cursor.lastrowid, chunk.header, chunk.text),
            )

    def remove_units(self, unit_keys: Iterable[str]) -> list[str]:
        """Delete units and their chunks; returns the removed chunk ids."""
        removed: list[str] = []
        with self._lock, self._db:
            for unit_key in unit_keys:
                rows = self._db.execute(
                    "SELECT rowid, chunk_id, header, text FROM chunks WHERE unit_key = ?",
                    (unit_key,),
                ).fetchall()
                for rowid, chunk_id, header, text in rows:
                    self._db.execute(
                        "INSERT INTO chunks_fts (chunks_fts, rowid, header, text) "
                        "VALUES ('delete', ?, ?, ?)",
                        (rowid, header, text),
                    )
                    removed.append(chunk_id)
                self._db.execute("DELETE FROM chunks WHERE unit_key = ?", (unit_key,))
                self._db.execute("DELETE FROM units WHERE unit_key = ?", (unit_key,))
        return removed

    def search(self, query: str, limit: int, unit_keys: Sequence[str] | None) -> list[str]:
        """Chunk ids ranked by BM25 (headers weigh half as much as text)."""
        terms = self._selective(keyword_terms(query))
        if not terms:
            return []
        match = " OR ".join(f'"{term}"' for term in terms)
        sql = (
            "SELECT c.chunk_id FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
            "WHERE chunks_fts MATCH ?"
        )
        params: list[object] = [match]
        if unit_keys is not None:
            if not unit_keys:
                return []
            sql += f" AND c.unit_key IN ({','.join('?' * len(unit_keys))})"
            params.extend(unit_keys)
        sql += " ORDER BY bm25(chunks_fts, 0.5, 1.0), c.chunk_id LIMIT ?"
        params.append(limit)
        with self._lock:
            return [row[0] for row in self._db.execute(sql, params)]

    def _selective(self, terms: list[str]) -> list[str]:
        """Drop terms found in more than 5% of chunks (at least 500): they barely move BM25
        but make FTS5 score every row that contains them. The rarest terms always stay."""
        if len(terms) <= 1:
            return terms
        with self._lock:
            total = int(self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
            limit = max(_COMMON_FLOOR, int(total * _COMMON_SHARE))
            marks = ",".join("?" * len(terms))
            counts = dict(
                self._db.execute(
                    f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", terms
                ).fetchall()
            )
        rare = [term for term in terms if counts.get(term, 0) <= limit]
        return rare or sorted(terms, key=lambda term: counts.get(term, 0))[:2]

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, StoredChunk]:
        if not chunk_ids:
            return {}
        marks = ",".join("?" * len(chunk_ids))
        with self._lock:
            rows = self._db.execute(
                "SELECT chunk_id, unit_key, path, ordinal, start_line, end_line, locator, header, "
                f"text FROM chunks WHERE chunk_id IN ({marks})",
                list(chunk_ids),
            ).fetchall()
        fields = list(StoredChunk.model_fields)
        return {row[0]: StoredChunk(**dict(zip(fields, row, strict=True))) for row in rows}

    def all_chunks(self) -> list[StoredChunk]:
        fields = list(StoredChunk.model_fields)
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(fields)} FROM chunks ORDER BY chunk_id"
            ).fetchall()
        return [StoredChunk(**dict(zip(fields, row, strict=True))) for row in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
