"""``mirage memory …`` commands through the real root CLI."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memory_server.embedding import Embedder
from mirage.cli import app
from mirage.cli.memory import client_config_text
from tests.memory_server.conftest import write_workspace

runner = CliRunner()


def test_resolve_snapshot_and_calls(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    resolved = runner.invoke(app, ["memory", "resolve", "-w", str(root), "rent chart", "nothing"])
    assert resolved.exit_code == 0, resolved.output
    assert "rent chart\tchart_3f9a1c20" in resolved.output
    assert "nothing\tNONE" in resolved.output
    snap = runner.invoke(app, ["memory", "snapshot", "-w", str(root)])
    assert snap.exit_code == 0 and snap.stdout.strip().startswith("v_")
    calls = runner.invoke(app, ["memory", "calls", "--workspace", str(root)])
    assert calls.exit_code == 0 and calls.stdout == ""


def test_the_old_positional_workspace_still_works_with_a_warning(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    resolved = runner.invoke(app, ["memory", "resolve", str(root), "rent chart"])
    assert resolved.exit_code == 0, resolved.output
    assert "rent chart\tchart_3f9a1c20" in resolved.stdout
    assert "'mirage memory resolve W' is deprecated; use 'mirage memory resolve -w W'" in (
        resolved.stderr
    )
    snap = runner.invoke(app, ["memory", "snapshot", str(root)])
    assert snap.exit_code == 0 and snap.stdout.strip().startswith("v_")
    assert "is deprecated" in snap.stderr
    both = runner.invoke(app, ["memory", "calls", str(root), "-w", str(root)])
    assert both.exit_code == 2 and "give the workspace once" in both.output
    missing = runner.invoke(app, ["memory", "snapshot"])
    assert missing.exit_code == 2 and "missing the workspace" in missing.output
    not_a_folder = runner.invoke(app, ["memory", "search", "-w", str(root / "MEMORY.md"), "q"])
    assert not_a_folder.exit_code == 2


def test_memory_commands_log_progress_only_with_verbose(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    quiet = runner.invoke(app, ["memory", "snapshot", "-w", str(root)])
    assert quiet.exit_code == 0 and "workspace.snapshot" not in quiet.stderr
    verbose = runner.invoke(app, ["-v", "memory", "snapshot", "-w", str(root)])
    assert verbose.exit_code == 0 and "workspace.snapshot" in verbose.stderr


def test_index_then_search_json(tmp_path: Path, embedder: Embedder) -> None:
    root = write_workspace(tmp_path / "ws")
    indexed = runner.invoke(app, ["memory", "index", "-w", str(root)])
    assert indexed.exit_code == 0, indexed.output
    # 7 files and 2 artifact cards, the dated note counted as its 3 chunks (a unit each)
    assert "+11 units" in indexed.output
    assert "indexing units: 11/11 (100%)" in indexed.output  # plain progress lines on stderr
    found = runner.invoke(
        app, ["memory", "search", "-w", str(root), "INV-2023-0042", "-k", "1", "--json"]
    )
    assert found.exit_code == 0, found.output
    payload = json.loads(found.stdout)
    assert payload["hits"][0]["artifact_id"] == "invoice_2023_0042"
    assert not (root / ".mirage" / "calls.jsonl").exists()


def test_serve_refuses_public_binding_without_token(tmp_path: Path) -> None:
    root = write_workspace(tmp_path / "ws")
    result = runner.invoke(
        app, ["memory", "serve", "--workspace", str(root), "--http", "0.0.0.0:8765"]
    )
    assert result.exit_code == 2
    assert "without a bearer token" in result.output


def test_client_config_snippets(tmp_path: Path) -> None:
    stdio = client_config_text(tmp_path, None, None, None, "probe-1")
    block = json.loads(stdio.split("\n", 1)[1])
    server = block["mcpServers"]["mirage-memory"]
    assert server["args"][:3] == ["memory", "serve", "--workspace"]
    assert server["args"][-2:] == ["--tag", "probe-1"]
    assert server["env"]["HF_HUB_OFFLINE"] == "1"
    http = client_config_text(tmp_path, "127.0.0.1", 8765, "secret", None)
    assert "http://127.0.0.1:8765/mcp" in http
    assert "/t/<tag>/mcp" in http
    assert "secret" not in http
