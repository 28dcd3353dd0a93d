"""``mirage parse`` (why did this reply execute or not?) and ``mirage compliance`` (how often
does a backbone produce executable tool calls?). Backbones load only inside the command."""

from __future__ import annotations

import asyncio
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from runtime.messages import ToolSpec
from runtime.parsers import FAMILIES, ParseResult, parse_reply


class AdapterMode(StrEnum):
    off = "off"
    on = "on"
    both = "both"


def load_tools(path: Path) -> list[ToolSpec]:
    """OpenAI function tools: a list of ``{"type": "function", "function": {...}}`` (or bare
    function objects), or an object with a ``tools`` list."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"{path} is not JSON: {exc}") from None
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise typer.BadParameter(f"{path}: expected a list of OpenAI function tools")
    tools = []
    for index, item in enumerate(data):
        function = item.get("function", item) if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise typer.BadParameter(f"{path}: tool #{index} has no function name")
        tools.append(ToolSpec.from_openai(item))
    return tools


def result_json(result: ParseResult) -> dict[str, Any]:
    return {
        "family": result.family,
        "overall": result.overall,
        "executable": sum(call.executable for call in result.calls),
        "calls": [
            {
                "label": call.label,
                "name": call.name,
                "arguments": call.arguments,
                "error": call.error,
                "raw": call.raw,
            }
            for call in result.calls
        ],
        "content": result.content,
        "pseudo_tool_markers": list(result.pseudo_tool_markers),
    }


def parse_command(
    family: Annotated[
        str | None, typer.Option("--family", "-f", help=f"Parser family: {', '.join(FAMILIES)}.")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Use this model's profile parser.")
    ] = None,
    tools: Annotated[
        Path | None, typer.Option("--tools", help="OpenAI function-tools JSON file.")
    ] = None,
    adapters: Annotated[bool, typer.Option("--adapters", help="Adapt pseudo-tool text.")] = False,
    truncated: Annotated[
        bool, typer.Option("--truncated", help="The reply stopped at the token limit.")
    ] = False,
) -> None:
    """Parse one raw backbone reply from stdin and print the JSON outcome."""
    from mirage.wiring import default_tools

    if family is not None and model is not None:
        raise typer.BadParameter("give --family or --model, not both")
    if family is None:
        from runtime.profiles import resolve_profile

        family = resolve_profile(model or "local/smollm2-135m").parser
    if family not in FAMILIES:
        raise typer.BadParameter(f"unknown family {family!r} (known: {', '.join(FAMILIES)})")
    offered = load_tools(tools) if tools is not None else list(default_tools())
    text = sys.stdin.read()
    result = parse_reply(text, offered, family=family, adapters=adapters, truncated=truncated)
    typer.echo(json.dumps(result_json(result), indent=2, ensure_ascii=False))


def compliance_command(
    model: Annotated[
        list[str], typer.Option("--model", "-m", help="Backbone model string (repeatable).")
    ],
    adapters: Annotated[
        AdapterMode, typer.Option("--adapters", help="Parse with adapters off, on, or both.")
    ] = AdapterMode.off,
    n: Annotated[
        int | None, typer.Option("--n", min=1, help="Replies per backbone (default: all 16).")
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Directory for the table files.")] = Path(
        "results/compliance"
    ),
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=16, help="Output token limit per reply.")
    ] = 256,
) -> None:
    """Send tool-eliciting prompts to each backbone and tabulate how many replies became
    executable tool calls (Markdown + JSON)."""
    from mirage.wiring import artifact_recall_tool
    from runtime.backbones import make_backbone
    from runtime.compliance import render_markdown, run_compliance, write_report

    modes = {AdapterMode.off: (False,), AdapterMode.on: (True,), AdapterMode.both: (False, True)}
    try:
        backbones = [make_backbone(name, max_output_tokens=max_tokens) for name in model]
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    study = run_compliance(
        backbones, tools=[artifact_recall_tool()], adapter_modes=modes[adapters], n=n
    )
    report = asyncio.run(study)
    markdown_path, json_path = write_report(report, out)
    typer.echo(render_markdown(report.rows))
    typer.echo(f"wrote {markdown_path} and {json_path}", err=True)


def register(app: typer.Typer) -> None:
    app.command("parse")(parse_command)
    app.command("compliance")(compliance_command)
