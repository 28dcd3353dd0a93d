"""``mirage doctor``: does the embedded model run on this machine (``runtime.backbones.doctor``
does the checking)."""

from __future__ import annotations

import typer


def doctor() -> None:
    """Check that the embedded model runs on this machine: CPU flags, what the installed
    llama.cpp was compiled for, where the weights go (AMX and repacking off), and a short real
    prefill + decode in a child process. Exits 1 on any error, with the fix."""
    from runtime.backbones.doctor import CPUINFO, check_embedded_backbone
    from runtime.backbones.llama.backbone import EmbeddedBackbone

    backbone = EmbeddedBackbone()
    typer.echo(f"mirage doctor · embedded backbone {backbone.model} · {backbone.n_threads} threads")
    cpuinfo = CPUINFO.read_text(encoding="utf-8") if CPUINFO.is_file() else ""
    checks = check_embedded_backbone(backbone, cpuinfo)
    for check in checks:
        typer.echo(check.line())
    if any(check.status == "error" for check in checks):
        raise typer.Exit(code=1)
    typer.echo("ok: the embedded backbone runs on this machine")


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
