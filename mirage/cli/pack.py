"""``mirage pack``: validate, build (the bundled packs, byte-identically) and import packs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mirage.cli.options import EXIT_USAGE, OUT, fail, folder_to_write

pack_app = typer.Typer(
    help="Evidence packs: validate, rebuild the bundled packs, import banks.", no_args_is_help=True
)


@pack_app.command("validate")
def validate_command(
    pack: Annotated[
        str, typer.Argument(help="bundled pack name (mirage-core, mirage-ext) or path")
    ],
) -> None:
    """Check a pack: schema, files, pairing, golds against data, content keywords, filler
    disjointness."""
    from harness.mirage.packs.validate import validate_pack

    problems = validate_pack(pack)
    if problems:
        typer.echo(f"{pack}: {len(problems)} problem(s)", err=True)
        for problem in problems:
            typer.echo(f"  - {problem}", err=True)
        raise typer.Exit(code=EXIT_USAGE)
    typer.echo(f"{pack}: ok")


@pack_app.command("build")
def build_command(
    out: Annotated[
        Path | None,
        typer.Option(*OUT, help="output folder (default: bundled)", callback=folder_to_write),
    ] = None,
    name: Annotated[list[str] | None, typer.Option("--name", help="build only these packs")] = None,
) -> None:
    """Regenerate the bundled packs from harness/mirage/packs/sources."""
    from harness.mirage.packs.build import BUNDLED_PACKS, build_pack
    from harness.mirage.packs.pack import BUNDLED_DIR

    target = out or BUNDLED_DIR
    target.mkdir(parents=True, exist_ok=True)
    for pack_name in name or list(BUNDLED_PACKS):
        try:
            path = build_pack(pack_name, target)
        except KeyError as exc:
            raise fail(str(exc.args[0])) from exc
        typer.echo(f"built {pack_name} -> {path}")


@pack_app.command("import")
def import_command(
    bank: Annotated[Path, typer.Argument(help="reference question bank JSON (base_questions)")],
    artifacts: Annotated[Path, typer.Option("--artifacts", help="folder with the artifact files")],
    out: Annotated[Path, typer.Option(*OUT, help="pack folder to write", callback=folder_to_write)],
    name: Annotated[str, typer.Option("--name", help="pack name")] = "imported",
) -> None:
    """Turn a reference MIRAGE bank plus your artifact files into a pack (content keywords
    derived from each artifact's text), then validate it."""
    from harness.kit.packfiles import PackFormatError
    from harness.mirage.packs.importer import import_bank
    from harness.mirage.packs.validate import validate_pack

    try:
        path, warnings = import_bank(bank, artifacts, out, name)
    except PackFormatError as exc:
        for line in exc.lines():
            typer.echo(f"error: {line}", err=True)
        raise typer.Exit(code=EXIT_USAGE) from exc
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    problems = validate_pack(path)
    for problem in problems:
        typer.echo(f"  - {problem}", err=True)
    typer.echo(f"imported into {path}" + (f" with {len(problems)} problem(s)" if problems else ""))
    if problems:
        raise typer.Exit(code=EXIT_USAGE)


@pack_app.command("lock")
def lock_command(
    pack: Annotated[Path, typer.Argument(help="pack folder (holding pack.yaml)")],
) -> None:
    """Write the pack's SHA256SUMS (every file's SHA-256, sha256sum's format) for the files it
    holds now; `mirage pack validate` and `mirage run` then refuse a file that differs. The
    pack's digest, which keys its checkpoints and results, does not change."""
    from harness.kit.packsums import write_sums
    from harness.mirage.packs.pack import PACK_FILE

    if not (pack / PACK_FILE).is_file():
        raise fail(f"{pack / PACK_FILE} does not exist: give a pack folder")
    path = write_sums(pack)
    count = len(path.read_text(encoding="utf-8").splitlines())
    typer.echo(f"locked {pack}: {count} files in {path}")


def register(app: typer.Typer) -> None:
    app.add_typer(pack_app, name="pack")
