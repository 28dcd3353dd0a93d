"""OpenClaw's configuration for a ``mirage run``: generated, merged with the user's, validated.

Above: the OpenClaw run (``harness.mirage.openclaw.run``), which writes the result as the
gateway's ``openclaw.json`` before every start. Below: OpenClaw's own ``openclaw config
validate --json`` (the pinned version's schema is the only judge of which keys exist).

The generated config runs OpenClaw headless and offline on loopback (docs/openclaw.md says why
each key is there): token auth, its OpenAI-compatible chat endpoint on, one provider ``mirage``
(mirage's model endpoint) with three model ids routed by name — ``trunk`` (the replayed trunk),
``answer`` (probes) and ``housekeeping`` (compaction summaries and the memory flush, both on the
answering model with the summarizer's reply budget) —, mirage's memory server as MCP server
``mirage`` cut to its retrieval tools, and a tool list cut to what the protocol needs. The
compaction budgets OpenClaw lets us set are scaled by ``window / budget_window`` (MIRAGE passes
its paper window, so they scale as its ``scaled`` profile scales mirage's own; OpenClaw's
reserve, min(20 000, W/4), is built in).

A user's file (``--openclaw-config``, JSON or JSON5, as OpenClaw's own config) is merged over
the generated one: objects merge key by key, anything else replaces. Keys that wire OpenClaw to
mirage (ports, token, providers, models, MCP server, workspace) are refused, naming the key.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from harness.kit.agents.openclaw.errors import OpenClawError
from harness.kit.agents.openclaw.install import OpenClawInstall
from harness.kit.agents.openclaw.timeouts import ModelTimeouts

log = structlog.get_logger(__name__)

PROVIDER = "mirage"
MCP_SERVER = "mirage"
TRUNK_MODEL = "trunk"
ANSWER_MODEL = "answer"
HOUSEKEEPING_MODEL = "housekeeping"
MEMORY_TOOLS = ("memory_search", "memory_get")
MCP_TOOLS = ("artifact_recall", "artifact_get")
FILE_TOOLS = ("read", "write", "edit")
"""``write`` (with ``read``/``edit``) is what OpenClaw's memory flush needs to write notes."""
DENIED_TOOLS = ("session_status", "gateway", "apply_patch")
"""In the ``minimal`` profile but of no use to a probe; each costs prompt tokens."""
DEFAULT_SOFT_THRESHOLD = 4_000
DEFAULT_KEEP_RECENT = 20_000
VALIDATE_TIMEOUT_S = 300.0

OWNED_KEYS: tuple[tuple[str, ...], ...] = (
    ("gateway", "mode"),
    ("gateway", "bind"),
    ("gateway", "port"),
    ("gateway", "auth"),
    ("gateway", "http", "endpoints", "chatCompletions"),
    ("models", "providers", PROVIDER),
    ("models", "mode"),
    ("agents", "defaults", "workspace"),
    ("agents", "defaults", "model"),
    ("agents", "defaults", "compaction", "model"),
    ("agents", "defaults", "compaction", "memoryFlush", "model"),
    ("mcp", "servers", MCP_SERVER),
    ("logging", "file"),
)
"""Keys mirage sets to wire OpenClaw to its endpoint, memory server and state folder."""


class OpenClawConfigError(OpenClawError, ValueError):
    """The user's OpenClaw config cannot be used; one line naming the file, key and fix."""


class GatewaySettings(BaseModel):
    """What mirage decides for one gateway start."""

    model_config = ConfigDict(frozen=True)

    gateway_port: int = Field(ge=1, le=65535)
    token: str = Field(min_length=16)
    model_base_url: str
    memory_url: str
    workspace: Path
    log_file: Path
    window: int = Field(ge=1024)
    budget_window: int = Field(
        ge=1024, description="the window at which OpenClaw's default budgets stay as they are"
    )
    answer_max_tokens: int = Field(ge=8)
    housekeeping_max_tokens: int = Field(ge=8)
    timeouts: ModelTimeouts


def _model_entry(model_id: str, window: int, max_tokens: int) -> dict[str, Any]:
    return {
        "id": model_id,
        "name": model_id,
        "input": ["text"],
        "contextWindow": window,
        "maxTokens": max_tokens,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    }


def scaled_budget(default: int, window: int, budget_window: int) -> int:
    """An OpenClaw token budget scaled by ``window / budget_window`` (never above its
    default)."""
    return min(default, max(1, round(default * window / budget_window)))


def generate_config(settings: GatewaySettings) -> dict[str, Any]:
    """The OpenClaw config for one gateway start (a JSON-compatible dict)."""
    return {
        "gateway": {
            "mode": "local",
            "bind": "loopback",
            "port": settings.gateway_port,
            "auth": {"mode": "token", "token": settings.token},
            "http": {"endpoints": {"chatCompletions": {"enabled": True}}},
        },
        "update": {"checkOnStart": False},
        "discovery": {"mdns": {"mode": "off"}},
        "logging": {"file": str(settings.log_file)},
        "plugins": {
            "allow": ["memory-core"],
            "entries": {"memory-core": {"config": {"dreaming": {"enabled": False}}}},
        },
        "tools": {
            "toolSearch": False,
            "profile": "minimal",
            "alsoAllow": ["bundle-mcp", *MEMORY_TOOLS, *FILE_TOOLS],
            "deny": list(DENIED_TOOLS),
        },
        "memory": {
            "search": {
                "provider": "none",
                "sources": ["memory"],
                "rememberAcrossConversations": False,
            }
        },
        "agents": {"defaults": _agent_defaults(settings)},
        "models": _models_section(settings),
        "mcp": {
            "servers": {
                MCP_SERVER: {
                    "url": settings.memory_url,
                    "transport": "streamable-http",
                    "toolFilter": {"include": list(MCP_TOOLS)},
                }
            }
        },
    }


def _agent_defaults(settings: GatewaySettings) -> dict[str, Any]:
    """The agent's workspace, turn timeout, model, and its compaction and memory flush (on the
    housekeeping model, their token budgets scaled to the window)."""
    scale = (settings.window, settings.budget_window)
    housekeeping = f"{PROVIDER}/{HOUSEKEEPING_MODEL}"
    return {
        "workspace": str(settings.workspace),
        "skipBootstrap": True,
        "skills": [],
        "heartbeat": {"every": "0m"},
        "timeoutSeconds": settings.timeouts.turn_s,  # see timeouts.py
        "model": {"primary": f"{PROVIDER}/{TRUNK_MODEL}"},
        "compaction": {
            "mode": "default",
            "model": housekeeping,
            "timeoutSeconds": settings.timeouts.call_s,  # default 180 s
            "keepRecentTokens": scaled_budget(DEFAULT_KEEP_RECENT, *scale),
            "memoryFlush": {
                "enabled": True,
                "model": housekeeping,
                "softThresholdTokens": scaled_budget(DEFAULT_SOFT_THRESHOLD, *scale),
            },
        },
    }


def _models_section(settings: GatewaySettings) -> dict[str, Any]:
    """mirage's model server as OpenClaw's only provider, with its three model names."""
    window = settings.window
    models = [
        _model_entry(TRUNK_MODEL, window, settings.answer_max_tokens),
        _model_entry(ANSWER_MODEL, window, settings.answer_max_tokens),
        _model_entry(HOUSEKEEPING_MODEL, window, settings.housekeeping_max_tokens),
    ]
    return {
        "mode": "replace",
        "catalogRefresh": {"enabled": False},
        "providers": {
            PROVIDER: {
                "baseUrl": settings.model_base_url,
                "apiKey": "unused",
                "api": "openai-completions",
                "timeoutSeconds": settings.timeouts.call_s,
                "models": models,
            }
        },
    }


def load_user_config(path: Path) -> dict[str, Any]:
    """A user's OpenClaw config (JSON or JSON5, like OpenClaw's own ``openclaw.json``)."""
    import json5

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise OpenClawConfigError(
            f"--openclaw-config {path}: cannot read ({exc.strerror})"
        ) from exc
    try:
        data = json5.loads(text)
    except ValueError as exc:
        raise OpenClawConfigError(f"--openclaw-config {path}: not JSON5 ({exc})") from exc
    if not isinstance(data, dict):
        raise OpenClawConfigError(f"--openclaw-config {path}: the top level must be an object")
    refused = [".".join(key) for key in owned_keys_in(data)]
    if refused:
        raise OpenClawConfigError(
            f"--openclaw-config {path}: {', '.join(refused)} is set by mirage run (it wires "
            "OpenClaw to mirage's model endpoint, memory server and state folder); remove it"
        )
    return data


def owned_keys_in(data: Mapping[str, Any]) -> Iterator[tuple[str, ...]]:
    for key in OWNED_KEYS:
        node: Any = data
        for part in key:
            if not isinstance(node, Mapping) or part not in node:
                break
            node = node[part]
        else:
            yield key


def merge_config(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``: objects merge key by key, other values replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_config(merged[key], value)
        else:
            merged[key] = value
    return merged


def config_digest(user: Mapping[str, Any] | None) -> str:
    """A short hash of the user's settings (part of the checkpoint family's identity)."""
    payload = json.dumps(user or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def write_config(path: Path, config: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


class ConfigIssue(BaseModel):
    path: str = ""
    message: str = ""


class ValidationReport(BaseModel):
    valid: bool
    issues: list[ConfigIssue] = Field(default_factory=list)


def validate_config(
    install: OpenClawInstall,
    env: Mapping[str, str],
    source: Path | None,
    timeout_s: float = VALIDATE_TIMEOUT_S,
) -> None:
    """Ask the pinned OpenClaw whether the config at ``env['OPENCLAW_CONFIG_PATH']`` is valid;
    a rejected key raises ``OpenClawConfigError`` naming it (and ``source``, the user's file)."""
    try:
        done = subprocess.run(
            install.command("config", "validate", "--json"),
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as exc:
        raise OpenClawConfigError(
            f"`openclaw config validate` did not answer within {timeout_s:.0f} s"
        ) from exc
    report = _validation_report(done.stdout)
    if report is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise OpenClawConfigError(
            f"`openclaw config validate` failed (exit {done.returncode}): {tail[0][:300]}"
        )
    if not report.valid:
        raise OpenClawConfigError(rejection_message(report.issues, source, install.version))
    log.info("openclaw.config_valid", version=install.version)


def _validation_report(stdout: str) -> ValidationReport | None:
    start = stdout.find("{")
    if start < 0:
        return None
    try:
        return ValidationReport.model_validate_json(stdout[start:])
    except ValueError:
        return None


def rejection_message(issues: list[ConfigIssue], source: Path | None, version: str) -> str:
    shown = "; ".join(f"{i.path or '(top level)'}: {i.message}" for i in issues[:5])
    more = f" (and {len(issues) - 5} more)" if len(issues) > 5 else ""
    where = f"--openclaw-config {source}" if source else "the generated OpenClaw config"
    return (
        f"OpenClaw {version} rejects {where}: {shown}{more}; fix or remove the key "
        "(OpenClaw's bundled docs list the keys this version knows)"
    )
