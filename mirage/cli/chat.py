"""``mirage chat``: talk to the agent in the terminal with the default tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mirage.cli.options import MAX_OUTPUT_TOKENS, MODEL, WORKSPACE, folder_to_write
from runtime.backbones import DEFAULT_MODEL

if TYPE_CHECKING:
    from runtime.session import AgentConfig

DEFAULT_WORKSPACE = Path.home() / ".mirage" / "workspace"


def chat(
    ctx: typer.Context,
    model: Annotated[
        str | None, typer.Option(*MODEL, help="litellm model string; default: the embedded SmolLM2")
    ] = None,
    workspace: Annotated[
        Path,
        typer.Option(
            *WORKSPACE,
            help="Workspace served to the agent by the memory server",
            callback=folder_to_write,
        ),
    ] = DEFAULT_WORKSPACE,
    no_tools: Annotated[
        bool, typer.Option("--no-tools", help="Chat without the memory server")
    ] = False,
    api_base: Annotated[
        str | None, typer.Option(help="Base URL of an OpenAI-compatible server")
    ] = None,
    context_window: Annotated[
        int | None, typer.Option(help="Cap the effective context window")
    ] = None,
    max_output_tokens: Annotated[
        int, typer.Option(*MAX_OUTPUT_TOKENS, help="Reply budget per backbone call")
    ] = 256,
) -> None:
    """Talk to the agent: tool calls and the EIT/compaction status line are shown after each
    reply. Type /exit (or Ctrl-D) to leave. The memory server's logs go to
    <workspace>/.mirage/server.log (to the screen with mirage -v chat)."""
    from runtime.session import AgentConfig

    config = AgentConfig(
        model=model or DEFAULT_MODEL,
        context_window=context_window,
        max_output_tokens=max_output_tokens,
    )
    verbose = bool(ctx.find_root().params.get("verbose"))
    asyncio.run(_chat(config, None if no_tools else workspace, api_base, verbose))


async def _chat(
    config: AgentConfig, workspace: Path | None, api_base: str | None, verbose: bool
) -> None:
    from contextlib import AsyncExitStack

    from mirage.wiring import memory_server_log, memory_server_stdio
    from runtime.agent import Agent
    from runtime.backbones import make_backbone
    from runtime.backbones.base import ProviderError
    from runtime.factory import new_session
    from runtime.mcp_client import MCPToolset

    options = {"api_base": api_base} if api_base else {}
    backbone = make_backbone(config.model, max_output_tokens=config.max_output_tokens, **options)
    session = new_session(config, backbone.context_window, workspace)
    async with AsyncExitStack() as stack:
        toolset = None
        server_log = None
        if workspace is not None:
            workspace.mkdir(parents=True, exist_ok=True)
            server_log = None if verbose else memory_server_log(workspace)
            server = memory_server_stdio(workspace, log_file=server_log)
            toolset = await stack.enter_async_context(MCPToolset([server]))
        agent = Agent(session, backbone, toolset)
        typer.echo(f"mirage chat · {backbone.model} · window {agent.context_window} tokens")
        if server_log is not None:
            typer.secho(f"  memory server log: {server_log}", fg="bright_black")
        while True:
            try:
                text = typer.prompt("you", prompt_suffix="> ")
            except (EOFError, typer.Abort):
                break
            if text.strip() in {"/exit", "/quit"}:
                break
            try:
                record = await agent.turn(text)
            except ProviderError as error:
                typer.secho(f"provider error: {error}", fg="red")
                continue
            for call in record.tool_calls:
                state = "executed" if call.executed else "not executed"
                state += ", error returned to the model" if call.error_returned else ""
                typer.secho(f"  ⚙ {call.name}({call.arguments}) [{call.label}, {state}]", fg="cyan")
            typer.echo(f"agent> {record.reply}")
            ledger = session.ledger
            typer.secho(
                f"  [EIT {ledger.current_eit}/{ledger.context_window} · peak {ledger.peak_eit} · "
                f"compactions {session.compaction_count} · {record.total_s:.1f}s]",
                fg="bright_black",
            )


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)
