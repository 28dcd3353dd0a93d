"""Provenance: what produced a run's numbers, recorded beside them.

A ``Provenance`` block goes into ``run.json`` and ``summary.json`` and heads every report: the
mirage version and source commit, the pack and question set with their digests, every model
string with its file digest (an embedded GGUF) or its provider, the scoring, depth profile and
summary formats, the versions of the libraries that shape a result, Python, and the CPU. The
protocol packages fill in the study fields (``harness.mirage.run.provenance``); this module knows
the machine and the files. ``differences`` lists the fields where two blocks disagree
(``mirage report DIR1 DIR2``; a resume that runs on other software).

A model file's SHA-256 is cached in ``<cache>/file-digests.json`` keyed by path, size and
modification time, so a GGUF is hashed once, not per run.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.kit.rundir import RunFileError
from memory_server.store import HashCache
from runtime.backbones import LOCAL_PREFIX
from runtime.snapshot import validation_problem

log = structlog.get_logger(__name__)

UNKNOWN = "unknown"
DISTRIBUTION = "mirage-eval"
NOT_INSTALLED = "not installed"
LIBRARIES = (
    "llama_cpp_python",
    "litellm",
    "chromadb",
    "sentence-transformers",
    "mcp",
    "torch",
    "pydantic",
)
"""Distributions whose version can change a result (import names differ: llama_cpp_python is
``llama_cpp``)."""
DIGEST_CACHE = "file-digests.json"
GIT_TIMEOUT_S = 5.0
SOURCE_ROOT = Path(__file__).resolve().parents[2]
EMBEDDER_WEIGHTS = "model.safetensors"


class ModelProvenance(BaseModel):
    """One model string of the run and where its weights come from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: str
    """answerer, trunk, summarizer, agent, embedder."""
    model: str
    provider: str | None = None
    """For a served model: litellm's provider (and the API base when one was given)."""
    file: str | None = None
    sha256: str | None = None
    """The weights file's SHA-256 (an embedded model)."""


class Provenance(BaseModel):
    """What produced a run; read back strictly (``read_provenance``)."""

    model_config = ConfigDict(extra="forbid")

    mirage_version: str
    commit: str
    """The source checkout's ``git`` commit (``+dirty`` with uncommitted changes), or unknown."""
    pack: str | None = None
    pack_digest: str | None = None
    questions: int | None = None
    questions_digest: str | None = None
    models: list[ModelProvenance] = Field(default_factory=list)
    scoring: str | None = None
    depth_profile: str | None = None
    summary_formats: list[str] = Field(default_factory=list)
    conditions: list[str] = Field(default_factory=list)
    libraries: dict[str, str] = Field(default_factory=dict)
    agent_software: str | None = None
    """The agent under test's own software and version (its run strategy's), when it is not
    mirage's runtime."""
    python: str
    platform: str
    cpu: str
    recorded_at: str
    resumed: list[str] = Field(default_factory=list)
    """One line per resume whose provenance differed from this (the first run's) block."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_names(cls, data: Any) -> Any:
        """Blocks written before ``agent_software`` named the one agent it then covered."""
        if isinstance(data, dict) and "openclaw" in data and "agent_software" not in data:
            data = dict(data)
            version = data.pop("openclaw")
            data["agent_software"] = None if version is None else f"OpenClaw {version}"
        return data


def mirage_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN


def source_commit(root: Path = SOURCE_ROOT) -> str:
    """The commit of the checkout mirage runs from, ``+dirty`` when it has uncommitted
    changes to tracked files; unknown outside a checkout or without git."""
    if not (root / ".git").exists():
        return UNKNOWN
    try:
        head = _git(root, "rev-parse", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return head + ("+dirty" if dirty else "") if head else UNKNOWN


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_S,
        check=True,
    )
    return done.stdout.strip()


def library_versions(names: Iterable[str] = LIBRARIES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = NOT_INSTALLED
    return versions


def cpu_description() -> str:
    """The CPU model and logical core count (``/proc/cpuinfo`` on Linux)."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                name = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    return f"{name} ({os.cpu_count() or '?'} logical cores)"


def _cache_path() -> Path:
    from harness.kit.cache import cache_root

    return cache_root() / DIGEST_CACHE


def cached_file_sha256(path: Path) -> str:
    """``path``'s SHA-256, from the digest cache when its size and mtime have not changed."""
    resolved = path.resolve()
    cache = HashCache(_cache_path())
    digest, _ = cache.digest(str(resolved), resolved)
    try:
        cache.save(keep=cache.keys())
    except OSError as exc:  # a read-only cache costs a re-hash next time, nothing more
        log.warning("provenance.digest_cache_unwritable", path=str(_cache_path()), error=str(exc))
    return digest


def json_digest(payload: object) -> str:
    """A short digest of a JSON-able value (keys sorted)."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def questions_digest(questions: Sequence[BaseModel]) -> str:
    """A digest of the questions a run asks (ids, wording, golds), in the run's order."""
    return json_digest([json.loads(q.model_dump_json()) for q in questions])


def model_provenance(
    role: str, model: str, api_base: str | None, given: set[str]
) -> ModelProvenance:
    """Where ``model``'s answers come from: its GGUF's digest (embedded), its provider (served),
    or a backbone the caller built (tests, the scripted trunk)."""
    if model in given:
        return ModelProvenance(role=role, model=model, provider="backbone given by the caller")
    if model.startswith(LOCAL_PREFIX):
        from runtime.backbones.base import ProviderError
        from runtime.backbones.llama.backbone import smollm2_gguf_path

        try:
            path = smollm2_gguf_path()
        except ProviderError as exc:
            return ModelProvenance(role=role, model=model, provider=f"embedded ({exc.detail})")
        digest = cached_file_sha256(path)
        return ModelProvenance(role=role, model=model, file=path.name, sha256=digest)
    return ModelProvenance(role=role, model=model, provider=_provider(model, api_base))


def _provider(model: str, api_base: str | None) -> str:
    from runtime.offline import quiet_litellm

    try:
        _, provider, _, _ = quiet_litellm().get_llm_provider(model, api_base=api_base)
    except Exception:  # litellm raises a BadRequestError subclass; _check_models said why
        provider = "unknown provider"
    return f"{provider} at {api_base}" if api_base else str(provider)


def embedder_provenance() -> ModelProvenance:
    """The memory server's embedding model (the bundled MiniLM) and its weights' digest."""
    from memory_server.embedding import DEFAULT_MODEL_NAME, default_model_path

    weights = Path(default_model_path()) / EMBEDDER_WEIGHTS
    if not weights.is_file():
        return ModelProvenance(role="embedder", model=DEFAULT_MODEL_NAME, provider="missing")
    return ModelProvenance(
        role="embedder",
        model=DEFAULT_MODEL_NAME,
        file=weights.name,
        sha256=cached_file_sha256(weights),
    )


def machine_fields() -> dict[str, object]:
    """The fields of a ``Provenance`` that describe the software and the machine."""
    return {
        "mirage_version": mirage_version(),
        "commit": source_commit(),
        "libraries": library_versions(),
        "python": platform.python_version() + f" ({sys.implementation.name})",
        "platform": platform.platform(),
        "cpu": cpu_description(),
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


IGNORED_IN_DIFFERENCES = frozenset({"recorded_at", "resumed"})


def _flat(value: object, prefix: str) -> dict[str, str]:
    if isinstance(value, dict):
        flat: dict[str, str] = {}
        for key, item in value.items():
            flat.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        flat = {}
        for item in value:
            label = f"{item.get('role', '?')}:{item.get('model', '?')}"
            rest = {k: v for k, v in item.items() if k not in ("role", "model")}
            flat.update(_flat(rest, f"{prefix}[{label}]"))
        return flat
    if isinstance(value, list):
        return {prefix: ", ".join(str(v) for v in value)}
    return {prefix: "—" if value is None else str(value)}


def differing_fields(blocks: Mapping[str, Provenance | None]) -> dict[str, dict[str, str]]:
    """field -> (label -> value) for every field where the labelled blocks disagree,
    ``recorded_at`` and the resume notes left out; a field a block lacks (or a run that
    recorded no provenance) shows as ``absent``."""
    flat = {
        label: _flat(block.model_dump(mode="json", exclude=set(IGNORED_IN_DIFFERENCES)), "")
        if block is not None
        else {}
        for label, block in blocks.items()
    }
    keys = sorted({key for values in flat.values() for key in values})
    table = {
        key: {label: values.get(key, "absent") for label, values in flat.items()} for key in keys
    }
    return {key: row for key, row in table.items() if len(set(row.values())) > 1}


def differences(first: Provenance, second: Provenance) -> list[tuple[str, str, str]]:
    """(field, first value, second value) wherever the two blocks disagree."""
    rows = differing_fields({"first": first, "second": second})
    return [(key, row["first"], row["second"]) for key, row in rows.items()]


class ProvenanceError(RunFileError):
    """A ``provenance`` block that cannot be read back as written (one line, the file)."""


def read_provenance(path: Path) -> Provenance | None:
    """The ``provenance`` block of a JSON file (``run.json``, ``summary.json``), read strictly;
    None when the file has no such block (runs from before provenance was recorded). A file or
    block that does not parse raises ``ProvenanceError``: a resume never replaces the first
    run's provenance with its own silently."""
    try:
        payload = json.loads(path.read_bytes())
    except OSError as exc:
        raise ProvenanceError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise ProvenanceError(
            f"{path}: not JSON ({_first_line(exc)}); it holds the run's options and provenance: "
            "restore it, or use a new --out"
        ) from exc
    if not isinstance(payload, dict):
        raise ProvenanceError(f"{path}: not a JSON object; restore it, or use a new --out")
    block = payload.get("provenance")
    if block is None:
        return None
    try:
        return Provenance.model_validate_json(json.dumps(block), strict=True)
    except ValidationError as exc:
        raise ProvenanceError(
            f"{path}: not a valid provenance block (provenance.{validation_problem(exc)}); "
            "restore it, or use a new --out"
        ) from exc


def _first_line(error: object) -> str:
    return (str(error).strip().splitlines() or [""])[0]


def on_resume(earlier: Provenance | None, now: Provenance) -> Provenance:
    """The block a resumed run keeps: the first run's, with a note when this run differs."""
    if earlier is None:
        return now
    changed = differences(earlier, now)
    if not changed:
        return earlier
    shown = "; ".join(f"{key}: {old} -> {new}" for key, old, new in changed)
    note = f"resumed {now.recorded_at} with {shown}"
    log.warning("provenance.resumed_with_differences", differences=shown)
    return earlier.model_copy(update={"resumed": [*earlier.resumed, note]})


def provenance_lines(block: Provenance) -> list[str]:
    """The block as short markdown lines for a report's head."""
    models = "; ".join(
        f"{m.role} {m.model}"
        + (f" (sha256 {m.sha256[:16]})" if m.sha256 else f" ({m.provider})" if m.provider else "")
        for m in block.models
    )
    libraries = ", ".join(f"{k} {v}" for k, v in block.libraries.items())
    lines = [
        f"mirage {block.mirage_version}, commit {block.commit}",
        f"pack {block.pack} (digest {block.pack_digest}), {block.questions} questions "
        f"(digest {block.questions_digest})",
        f"models: {models or 'none'}",
        f"scoring {block.scoring}, depth profile {block.depth_profile}, summary formats "
        f"{', '.join(block.summary_formats) or '—'}, conditions "
        f"{', '.join(block.conditions) or '—'}"
        + (f", {block.agent_software}" if block.agent_software else ""),
        f"libraries: {libraries}",
        f"Python {block.python} on {block.platform}; CPU {block.cpu}",
    ]
    return lines + [f"note: {note}" for note in block.resumed]


def provenance_markdown(block: Provenance | None) -> str:
    """The report's provenance paragraph (a line saying so when the run recorded none)."""
    if block is None:
        return "**Provenance:** not recorded (a run from before mirage recorded it)."
    return "**Provenance:** " + " · ".join(provenance_lines(block))
