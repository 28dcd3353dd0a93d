"""``mirage parse`` (why did this reply execute or not?) and ``mirage compliance`` (how often
does a backbone produce executable tool calls?). Backbones load only inside the command.

A model no profile matches is read with the default profile's family, as ``mirage run`` and
``serve-model`` read it; both commands say so in one ``note:`` line on stderr rather than refuse,
since that fallback is what a run of the model does. ``mirage compliance`` checks its models as
``mirage run`` does before any call (known, the provider's key set, ``--api-base`` answering)
and exits 1 when a provider failed on any prompt, after writing the table.
"""

from __future__ import annotations

import asyncio
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from mirage.cli.options import (
    EXIT_FAILURE,
    FAMILY,
    MAX_OUTPUT_TOKENS,
    MODEL,
    OUT,
    REQUEST_TIMEOUT,
    REQUEST_TIMEOUT_HELP,
    aliased,
    fail,
    folder_to_write,
)
from runtime.backbones import DEFAULT_MODEL, DEFAULT_TIMEOUT_S, LOCAL_PREFIX
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


def profile_family(model: str) -> str:
    """The parser family of ``model``'s profile; a ``note:`` line on stderr when no profile
    matches and the default one's family is used."""
    from runtime.profiles import DEFAULT_PROFILE, resolve_profile

    profile = resolve_profile(model)
    if profile.name == DEFAULT_PROFILE.name:
        typer.echo(
            f"note: no model profile matches {model!r}: its replies are read with the default "
            f"family {profile.parser}, as mirage run and serve-model read them (-f FAMILY picks "
            "another)",
            err=True,
        )
    return profile.parser


def parse_command(
    family: Annotated[
        str | None, typer.Option(*FAMILY, help=f"Parser family: {', '.join(FAMILIES)}.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(*MODEL, help="Use this model's profile parser.")
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
        family = profile_family(model or DEFAULT_MODEL)
    if family not in FAMILIES:
        raise typer.BadParameter(f"unknown family {family!r} (known: {', '.join(FAMILIES)})")
    offered = load_tools(tools) if tools is not None else list(default_tools())
    text = sys.stdin.read()
    result = parse_reply(text, offered, family=family, adapters=adapters, truncated=truncated)
    typer.echo(json.dumps(result_json(result), indent=2, ensure_ascii=False))


def compliance_command(
    model: Annotated[list[str], typer.Option(*MODEL, help="Backbone model string (repeatable).")],
    api_base: Annotated[
        str | None,
        typer.Option(
            help="Base URL of the OpenAI-compatible server the litellm models are served at "
            "(hosted_vllm/NAME, openai/NAME); checked to answer before any prompt is sent"
        ),
    ] = None,
    adapters: Annotated[
        AdapterMode, typer.Option("--adapters", help="Parse with adapters off, on, or both.")
    ] = AdapterMode.off,
    n: Annotated[
        int | None, typer.Option("--n", min=1, help="Replies per backbone (default: all 16).")
    ] = None,
    out: Annotated[
        Path, typer.Option(*OUT, help="Directory for the table files.", callback=folder_to_write)
    ] = Path("results/compliance"),
    max_output_tokens: Annotated[
        int, typer.Option(*MAX_OUTPUT_TOKENS, min=16, help="Output token limit per reply.")
    ] = 256,
    request_timeout: Annotated[
        float, typer.Option(*REQUEST_TIMEOUT, min=0.1, help=REQUEST_TIMEOUT_HELP)
    ] = DEFAULT_TIMEOUT_S,
    old_max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=16, hidden=True)] = None,
) -> None:
    """Send tool-eliciting prompts to each backbone and tabulate how many replies became
    executable tool calls: OUT/compliance.md (what each column counts, then the table) and
    OUT/compliance.json (every reply). Models are checked as mirage run checks them before any
    prompt (known, the provider's key set, --api-base answering); a provider failure on any
    prompt exits 1 once the table is written."""
    from mirage.wiring import artifact_recall_tool
    from runtime.compliance import render_markdown, run_compliance, write_report

    modes = {AdapterMode.off: (False,), AdapterMode.on: (True,), AdapterMode.both: (False, True)}
    budget = aliased(max_output_tokens, old_max_tokens, "--max-tokens", MAX_OUTPUT_TOKENS[0])
    backbones = _study_backbones(model, api_base, budget, request_timeout)
    study = run_compliance(
        backbones, tools=[artifact_recall_tool()], adapter_modes=modes[adapters], n=n
    )
    report = asyncio.run(study)
    markdown_path, json_path = write_report(report, out)
    typer.echo(render_markdown(report.rows))
    typer.echo(f"wrote {markdown_path} and {json_path}", err=True)
    first_mode = modes[adapters][0]  # every mode parses the same replies: count them once
    failed = sum(row.provider_error for row in report.rows if row.adapters == first_mode)
    if failed:
        raise fail(
            f"the provider failed on {failed} prompt(s) (provider_error; each reason in "
            f"{json_path})",
            EXIT_FAILURE,
        )


def _study_backbones(
    models: list[str], api_base: str | None, budget: int, timeout_s: float
) -> list[Any]:
    """The backbones of ``models``, checked before any call as ``mirage run`` checks them;
    ``api_base`` goes to the litellm models only (the embedded one has no server)."""
    from runtime.backbones import make_backbone
    from runtime.backbones.access import check_access

    try:
        check_access(models, api_base)
        backbones = []
        for name in models:
            profile_family(name)  # the note, for a model no profile matches
            served = None if name.startswith(LOCAL_PREFIX) else api_base
            backbones.append(
                make_backbone(name, max_output_tokens=budget, api_base=served, timeout_s=timeout_s)
            )
    except ValueError as exc:
        raise fail(str(exc)) from exc
    return backbones


def register(app: typer.Typer) -> None:
    app.command("parse")(parse_command)
    app.command("compliance")(compliance_command)
