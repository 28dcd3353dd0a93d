"""``mirage memory …``: index, search, serve, snapshot and resolve a workspace.

Above: the ``mirage`` root (``mirage.cli``), which calls ``register(app)``. Below: the memory
server package. Heavy libraries (chromadb, sentence-transformers, mcp, uvicorn) are imported
inside the commands so ``mirage --help`` stays fast.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mirage.cli.options import WORKSPACE, aliased, fail, file_to_write, workspace_given

if TYPE_CHECKING:
    from memory_server.server import MemoryMCPServer

memory_app = typer.Typer(
    name="memory",
    help="The persistent workspace and its MCP memory server (artifact_recall).",
    no_args_is_help=True,
)

WorkspaceOpt = Annotated[
    Path | None, typer.Option(*WORKSPACE, help="The workspace folder (required).", file_okay=False)
]
OldWorkspaceArg = Annotated[Path | None, typer.Argument(hidden=True, metavar="[W]")]
EmbeddingModelOpt = Annotated[
    str | None,
    typer.Option(
        "--embedding-model",
        help="sentence-transformers model directory (default: bundled MiniLM).",
    ),
]
OldEmbeddingModelOpt = Annotated[str | None, typer.Option("--model", hidden=True)]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        help="torch threads for embedding (default: 1 for serve/search, every core for index).",
    ),
]
ChromaOpt = Annotated[
    str | None,
    typer.Option(
        "--chroma-url", help="Use a Chroma server (http://host:port) instead of the embedded store."
    ),
]


def _stderr_to_file(path: Path) -> None:
    """From now on everything this process writes to stderr (logs, library warnings, a crash)
    is appended to ``path`` instead."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, sys.stderr.fileno())
    os.close(fd)


def _set_threads(threads: int) -> None:
    from memory_server.embedding import set_torch_threads

    set_torch_threads(threads)


def _index_config(
    model: str | None, old_model: str | None, chroma_url: str | None, lock_timeout: float = 60.0
) -> Any:
    from memory_server.index import IndexConfig

    chosen = aliased(model, old_model, "--model", "--embedding-model")
    return IndexConfig(model_path=chosen, chroma_url=chroma_url, lock_timeout_s=lock_timeout)


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """A request the workspace cannot serve ends the command with its one-line reason."""
    from memory_server.errors import MemoryServerError

    try:
        yield
    except MemoryServerError as exc:
        raise fail(str(exc)) from exc


@memory_app.command("index")
def index_command(
    old_workspace: OldWorkspaceArg = None,
    workspace: WorkspaceOpt = None,
    rebuild: Annotated[
        bool,
        typer.Option(
            help="Build a fresh index from the files (servers keep searching the current one "
            "until it is ready)."
        ),
    ] = False,
    lock_timeout: Annotated[
        float,
        typer.Option(
            min=0,
            help="Seconds to wait while another process writes this index (a server adding "
            "new files, another index run); then fail naming that process.",
        ),
    ] = 60.0,
    model: EmbeddingModelOpt = None,
    old_model: OldEmbeddingModelOpt = None,
    chroma_url: ChromaOpt = None,
    threads: ThreadsOpt = None,
) -> None:
    """Build or update the manifest and the hybrid index of a workspace. One process writes
    an index at a time: searches and servers go on meanwhile, other writers wait. Embeds with
    every core unless --threads says otherwise; shows progress on stderr (bars on a terminal,
    plain lines in a log)."""
    from memory_server.index import HybridIndex
    from memory_server.workspace import Workspace
    from mirage.cli.run import progress_display

    workspace = workspace_given(workspace, old_workspace, "mirage memory index")
    if threads is not None:
        _set_threads(threads)
    with _one_line_errors(), progress_display() as display:
        config = _index_config(model, old_model, chroma_url, lock_timeout)
        index = HybridIndex(Workspace.open(workspace), config)
        progress = _units_progress(display)
        report = (
            index.rebuild(progress)
            if rebuild
            else index.sync(collect_garbage=True, progress=progress)
        )
    typer.echo(
        f"indexed {workspace}: +{report.units_added} units (+{report.chunks_added} chunks), "
        f"-{report.units_removed} units (-{report.chunks_removed} chunks), "
        f"{report.texts_embedded} texts embedded, {index.chunk_count()} chunks total"
    )
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)


def _units_progress(display: Any) -> Callable[[int, int], None]:
    """An ``IndexProgress`` drawing "indexing units" on ``display`` from its first report."""
    task: list[int] = []

    def update(done: int, total: int) -> None:
        if not task:
            task.append(display.add_task("indexing units", total=total))
        display.update(task[0], completed=done)

    return update


@memory_app.command("search")
def search_command(
    words: Annotated[
        list[str], typer.Argument(metavar="QUERY", help="What to look for (quote several words).")
    ],
    workspace: WorkspaceOpt = None,
    k: Annotated[int, typer.Option("-k", help="Number of hits.")] = 5,
    artifact: Annotated[str | None, typer.Option(help="Restrict to one artifact.")] = None,
    version: Annotated[str | None, typer.Option(help="Search a stored workspace version.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print hits as JSON.")] = False,
    model: EmbeddingModelOpt = None,
    old_model: OldEmbeddingModelOpt = None,
    chroma_url: ChromaOpt = None,
    threads: ThreadsOpt = None,
) -> None:
    """Print the ranked hits artifact_recall would return (for debugging a workspace)."""
    workspace, query = _workspace_and_query(workspace, words)
    _set_threads(threads or 1)
    from memory_server.service import MemoryService
    from memory_server.workspace import Workspace

    with _one_line_errors():
        service = MemoryService(
            Workspace.open(workspace),
            index_config=_index_config(model, old_model, chroma_url),
            version=version,
            log_calls=False,
        )
        result = service.recall(query, k, artifact)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    _print_hits(result.hits)


def _workspace_and_query(workspace: Path | None, words: list[str]) -> tuple[Path, str]:
    """``-w W QUERY``, or the old ``W QUERY``."""
    old = Path(words[0]) if workspace is None and len(words) == 2 else None
    query = words[1:] if old is not None else words
    if len(query) != 1:
        raise fail("give one QUERY (quote a query of several words): mirage memory search -w W Q")
    return workspace_given(workspace, old, "mirage memory search"), query[0]


def _print_hits(hits: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("#", "score", "artifact", "citation", "snippet", show_lines=True)
    for rank, hit in enumerate(hits, start=1):
        table.add_row(str(rank), f"{hit.score:.4f}", hit.artifact_id, hit.citation, hit.snippet)
    Console().print(table if hits else "no hits")


@memory_app.command("snapshot")
def snapshot_command(old_workspace: OldWorkspaceArg = None, workspace: WorkspaceOpt = None) -> None:
    """Store an immutable version of the workspace and print its id."""
    from memory_server.workspace import Workspace

    workspace = workspace_given(workspace, old_workspace, "mirage memory snapshot")
    with _one_line_errors():
        typer.echo(Workspace.open(workspace).snapshot())


@memory_app.command("resolve")
def resolve_command(
    refs: Annotated[list[str], typer.Argument(help="References to canonicalise.")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Print the canonical artifact id of each reference (or NONE)."""
    from memory_server.workspace import Workspace

    old = Path(refs[0]) if workspace is None and len(refs) > 1 and Path(refs[0]).is_dir() else None
    refs = refs[1:] if old is not None else refs
    workspace = workspace_given(workspace, old, "mirage memory resolve")
    with _one_line_errors():
        opened = Workspace.open(workspace)
    for ref in refs:
        typer.echo(f"{ref}\t{opened.resolve(ref) or 'NONE'}")


@memory_app.command("calls")
def calls_command(
    old_workspace: OldWorkspaceArg = None,
    workspace: WorkspaceOpt = None,
    tag: Annotated[str | None, typer.Option(help="Only calls with this tag.")] = None,
    call_log: Annotated[Path | None, typer.Option(help="Call log path.", dir_okay=False)] = None,
) -> None:
    """Print the call log (JSON lines)."""
    from memory_server.calllog import read_calls

    workspace = workspace_given(workspace, old_workspace, "mirage memory calls")
    for record in read_calls(call_log or workspace / ".mirage" / "calls.jsonl", tag=tag):
        typer.echo(record.model_dump_json())


ServedWorkspaceOpt = Annotated[
    Path, typer.Option(*WORKSPACE, help="Workspace folder.", exists=True, file_okay=False)
]
HttpOpt = Annotated[
    str | None, typer.Option(help="Serve streamable HTTP on HOST:PORT instead of stdio.")
]
TokenOpt = Annotated[
    str | None,
    typer.Option(help="Bearer token required from HTTP clients.", envvar="MIRAGE_MEMORY_TOKEN"),
]
DefaultTagOpt = Annotated[
    str | None, typer.Option(help="Attribution tag for calls that carry none (stdio).")
]
ServedCallLogOpt = Annotated[
    Path | None,
    typer.Option(
        help="Call log path (default <workspace>/.mirage/calls.jsonl).", callback=file_to_write
    ),
]
ServedVersionOpt = Annotated[
    str | None, typer.Option(help="Serve one stored workspace version, read-only.")
]
LogFileOpt = Annotated[
    Path | None,
    typer.Option(
        help="Append logs (everything this server writes to stderr) to this file instead "
        "of stderr, once it is serving; e.g. for a stdio server inside a chat screen.",
        callback=file_to_write,
    ),
]


@memory_app.command("serve")
def serve_command(
    workspace: ServedWorkspaceOpt,
    http: HttpOpt = None,
    token: TokenOpt = None,
    tag: DefaultTagOpt = None,
    call_log: ServedCallLogOpt = None,
    version: ServedVersionOpt = None,
    log_file: LogFileOpt = None,
    model: EmbeddingModelOpt = None,
    old_model: OldEmbeddingModelOpt = None,
    chroma_url: ChromaOpt = None,
    threads: ThreadsOpt = None,
) -> None:
    """Run the MCP memory server (stdio by default). Started by hand on a terminal (or over
    HTTP) it prints client config snippets to stderr; started by an MCP client it does not."""
    _set_threads(threads or 1)
    host, port = _checked_address(http, token) if http else (None, None)
    server = _built_server(
        workspace,
        model=model,
        old_model=old_model,
        chroma_url=chroma_url,
        call_log=call_log,
        tag=tag,
        version=version,
        transport="http" if http else "stdio",
    )
    _log_and_warm_up(server, workspace, http, version, log_file)
    if host is not None or sys.stdin.isatty():
        typer.echo(client_config_text(workspace, host, port, token, tag), err=True)
    if host is None or port is None:
        server.run("stdio")
        return
    from memory_server.http import serve_http

    serve_http(server, host=host, port=port, token=token)


def _checked_address(http: str, token: str | None) -> tuple[str, int]:
    """``--http HOST:PORT`` parsed, and the binding checked (off loopback only with a token);
    a bad one ends the command as a usage error."""
    host, port = _parse_http(http)
    from runtime.asgi import check_binding

    try:
        check_binding(host, token)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    return host, port


def _built_server(
    workspace: Path,
    *,
    model: str | None,
    old_model: str | None,
    chroma_url: str | None,
    call_log: Path | None,
    tag: str | None,
    version: str | None,
    transport: str,
) -> MemoryMCPServer:
    """The memory server of ``workspace`` (not running yet); a workspace, index option or
    version it cannot serve ends the command with its one-line reason."""
    from memory_server.errors import MemoryServerError
    from memory_server.server import build_server

    try:
        return build_server(
            workspace,
            index_config=_index_config(model, old_model, chroma_url),
            call_log=call_log,
            tag=tag,
            version=version,
            transport=transport,
        )
    except (MemoryServerError, ValueError) as exc:
        raise fail(str(exc)) from exc


def _log_and_warm_up(
    server: MemoryMCPServer,
    workspace: Path,
    http: str | None,
    version: str | None,
    log_file: Path | None,
) -> None:
    """Send stderr to ``log_file`` (when given), log ``memory.serving``, and warm the server up
    in a background thread: a client's initialize must not wait for the model."""
    import threading

    import structlog

    if log_file is not None:
        _stderr_to_file(log_file)
    structlog.get_logger(__name__).info(
        "memory.serving", workspace=str(workspace), transport=http or "stdio", version=version
    )
    threading.Thread(target=server.service.warm_up, name="warm-up", daemon=True).start()


def _parse_http(value: str) -> tuple[str, int]:
    host, _, port_text = value.rpartition(":")
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise fail(f"--http must be HOST:PORT (e.g. 127.0.0.1:8765), got {value!r}")
    return host.strip("[]"), int(port_text)


def client_config_text(
    workspace: Path, host: str | None, port: int | None, token: str | None, tag: str | None
) -> str:
    """The snippets users paste into MCP clients."""
    if host is None:
        args = ["memory", "serve", "--workspace", str(workspace.resolve())]
        if tag:
            args += ["--tag", tag]
        block = {
            "mcpServers": {
                "mirage-memory": {
                    "command": _mirage_command(),
                    "args": args,
                    "env": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
                }
            }
        }
        return "MCP client config (stdio):\n" + json.dumps(block, indent=2)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/mcp"
    entry: dict[str, Any] = {"url": url}
    if token:
        entry["headers"] = {"Authorization": "Bearer <your token>"}
    lines = [
        f"MCP endpoint (streamable HTTP): {url}",
        f"Per-caller attribution: http://{shown}:{port}/t/<tag>/mcp"
        " or header 'X-Mirage-Tag: <tag>'",
        "MCP client config (HTTP):",
        json.dumps({"mcpServers": {"mirage-memory": entry}}, indent=2),
    ]
    return "\n".join(lines)


def _mirage_command() -> str:
    argv0 = Path(sys.argv[0])
    if argv0.name == "mirage" and argv0.exists():
        return str(argv0.resolve())
    found = [Path(p) / "mirage" for p in os.environ.get("PATH", "").split(os.pathsep)]
    existing = next((str(path) for path in found if path.is_file()), None)
    return existing or shlex.quote("mirage")


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
