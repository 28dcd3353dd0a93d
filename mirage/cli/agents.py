"""``mirage agents install|list``: agents we did not write, installed into mirage's cache.

Above: the ``mirage`` root (``mirage.cli``), which calls ``register(app)``. Below:
``harness.kit.agents.openclaw.install`` (npm, the npm registry only).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from mirage.cli.options import EXIT_FAILURE, fail

agents_app = typer.Typer(
    name="agents",
    help="Agents we did not write (OpenClaw), installed into mirage's cache from npm.",
    no_args_is_help=True,
)


class Agent(StrEnum):
    openclaw = "openclaw"


@agents_app.command("install")
def install_command(
    agent: Annotated[Agent, typer.Argument(help="The agent to install.")],
    version: Annotated[
        str | None, typer.Option(help="Exact agent version (default: the pinned one).")
    ] = None,
    node_version: Annotated[
        str | None,
        typer.Option(help="Exact version of the npm package `node` (default: the pinned one)."),
    ] = None,
    registry: Annotated[
        str | None, typer.Option(help="npm registry URL (default: npm's configured registry).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Reinstall even if already installed.")] = False,
) -> None:
    """Install a pinned OpenClaw and the Node 24 it needs into mirage's cache
    ($MIRAGE_CACHE_DIR, else ~/.cache/mirage). A second run is instant."""
    from harness.kit.agents.openclaw.install import (
        DEFAULT_NODE_VERSION,
        DEFAULT_OPENCLAW_VERSION,
        InstallError,
        check_version,
        find_install,
        install_openclaw,
    )

    chosen = version or DEFAULT_OPENCLAW_VERSION
    node = node_version or DEFAULT_NODE_VERSION
    try:
        existing = None if force else find_install(check_version(chosen, "--version"))
    except InstallError as exc:
        raise fail(str(exc)) from exc
    if existing is None:
        typer.echo(f"installing {agent.value} {chosen} with node {node} from npm ...", err=True)
        try:
            outcome = install_openclaw(chosen, node_version=node, registry=registry, force=force)
        except InstallError as exc:  # the registry, npm or the disk failed: a runtime failure
            raise fail(str(exc), EXIT_FAILURE) from exc
    if existing is not None:
        typer.echo(
            f"{agent.value} {existing.version} is already installed (node "
            f"{existing.node_version}) at {existing.path}; --force reinstalls"
        )
        return
    install = outcome.install
    typer.echo(
        f"installed {agent.value} {install.version} (node {install.node_version}) in "
        f"{install.install_seconds:.0f} s at {install.path}"
    )


@agents_app.command("list")
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """Show the installed agents: version, Node version, path, size."""
    from harness.kit.agents.openclaw.install import cache_root, list_installs

    installs = list_installs()
    if as_json:
        for install in installs:
            typer.echo(install.model_dump_json())
        return
    if not installs:
        typer.echo(f"no agents installed in {cache_root()} (mirage agents install openclaw)")
        return
    typer.echo("agent\tversion\tnode\tsize\tinstalled\tpath")
    for install in installs:
        fields = (
            install.agent,
            install.version,
            install.node_version,
            f"{install.size_bytes / 1e6:.0f} MB",
            install.installed_at.strftime("%Y-%m-%d %H:%M"),
            str(install.path),
        )
        typer.echo("\t".join(fields))


def register(app: typer.Typer) -> None:
    app.add_typer(agents_app, name="agents")
