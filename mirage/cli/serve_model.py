"""``mirage serve-model``: any mirage backbone behind an OpenAI-compatible endpoint.

Above: the ``mirage`` root (``mirage.cli``), which calls ``register(app)``. Below:
``runtime.serve`` (the app, uvicorn), ``runtime.backbones.make_backbone``, and
``runtime.asgi.check_binding`` (one rule for every server mirage starts: no key, loopback only;
never a blank key).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mirage.cli.options import (
    MAX_OUTPUT_TOKENS,
    MODEL,
    REQUEST_TIMEOUT,
    REQUEST_TIMEOUT_HELP,
    fail,
    file_to_write,
)
from runtime.asgi import DEFAULT_READ_TIMEOUT_S
from runtime.backbones import DEFAULT_MODEL, DEFAULT_TIMEOUT_S
from runtime.serve.app import DEFAULT_MAX_REQUEST_BYTES

if TYPE_CHECKING:
    from runtime.backbones.base import Backbone

ModelOpt = Annotated[
    str,
    typer.Option(*MODEL, help=f"Backbone: {DEFAULT_MODEL} (embedded) or any litellm model string"),
]
HostOpt = Annotated[str, typer.Option(help="Interface to listen on")]
PortOpt = Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free port)")]
NameOpt = Annotated[
    str | None, typer.Option(help="Model name clients use (default: the model string)")
]
ApiBaseOpt = Annotated[
    str | None, typer.Option(help="Base URL of the backbone's server (litellm models)")
]
ContextWindowOpt = Annotated[
    int | None, typer.Option(min=64, help="The backbone's context window in tokens")
]
MaxOutputTokensOpt = Annotated[
    int | None,
    typer.Option(*MAX_OUTPUT_TOKENS, min=1, help="Reply budget when a request sets no max_tokens"),
]
ToolModeOpt = Annotated[
    str | None, typer.Option(help="native or text (default: from the model's profile)")
]
AdaptersOpt = Annotated[
    bool, typer.Option(help="Let the parser recover pseudo-tool calls (adapters)")
]
LogOpt = Annotated[
    Path | None,
    typer.Option(
        "--log", help="Append one JSON line per request to this file", callback=file_to_write
    ),
]
LogContentOpt = Annotated[
    bool, typer.Option(help="Also log request messages and reply text (off: privacy)")
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option(
        help="Require 'Authorization: Bearer KEY' from clients (needed off loopback)",
        envvar="MIRAGE_SERVE_API_KEY",
    ),
]
MaxRequestMbOpt = Annotated[
    float, typer.Option(min=0.001, help="Refuse (413) request bodies above this many MiB")
]
ReadTimeoutOpt = Annotated[
    float,
    typer.Option(
        min=0.1,
        help="Close a connection whose client sends nothing for this many seconds "
        "before its request is complete",
    ),
]
RequestTimeoutOpt = Annotated[
    float, typer.Option(*REQUEST_TIMEOUT, min=0.1, help=REQUEST_TIMEOUT_HELP)
]


def serve_model(
    model: ModelOpt = DEFAULT_MODEL,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8000,
    name: NameOpt = None,
    api_base: ApiBaseOpt = None,
    context_window: ContextWindowOpt = None,
    max_output_tokens: MaxOutputTokensOpt = None,
    tool_mode: ToolModeOpt = None,
    adapters: AdaptersOpt = False,
    log_path: LogOpt = None,
    log_content: LogContentOpt = False,
    api_key: ApiKeyOpt = None,
    max_request_mb: MaxRequestMbOpt = DEFAULT_MAX_REQUEST_BYTES / (1 << 20),
    read_timeout: ReadTimeoutOpt = DEFAULT_READ_TIMEOUT_S,
    request_timeout: RequestTimeoutOpt = DEFAULT_TIMEOUT_S,
) -> None:
    """Serve a backbone as an OpenAI-compatible endpoint: GET /v1/models and POST
    /v1/chat/completions (streaming or not, OpenAI tool calls in and out; for text-mode models
    the profile writes the tools into the prompt and mirage's parser turns the reply into
    tool_calls; tool_choice, response_format and sampling fields are honoured, passed through or
    refused, see docs/serve_model.md). Listening on anything but loopback needs --api-key; on
    loopback, requests with a foreign Host (421) or from another web page's Origin (403) are
    refused, and a POST must be JSON (415). Ctrl-C stops it."""
    from runtime.serve.app import create_app
    from runtime.serve.requestlog import RequestLog
    from runtime.serve.server import serve_forever

    backbone = _checked_backbone(
        model,
        host=host,
        api_key=api_key,
        api_base=api_base,
        context_window=context_window,
        max_output_tokens=max_output_tokens,
        tool_mode=tool_mode,
        timeout_s=request_timeout,
    )
    backbone.load()  # the embedded model loads now, not on the first request
    request_log = RequestLog(log_path, with_content=log_content) if log_path else None
    app = create_app(
        backbone,
        name=name,
        request_log=request_log,
        adapters=adapters,
        api_key=api_key,
        host=host,
        max_request_bytes=int(max_request_mb * (1 << 20)),
    )
    typer.echo(_serving_line(backbone, name, host, port, log_path), err=True)
    try:
        serve_forever(app, host=host, port=port, read_timeout_s=read_timeout)
    finally:
        if request_log is not None:
            request_log.close()


def _checked_backbone(
    model: str,
    *,
    host: str,
    api_key: str | None,
    api_base: str | None,
    context_window: int | None,
    max_output_tokens: int | None,
    tool_mode: str | None,
    timeout_s: float,
) -> Backbone:
    """The binding checked (no key, loopback only), then the backbone made (not loaded yet);
    either one's ``ValueError`` ends the command as a usage error."""
    from runtime.asgi import check_binding
    from runtime.backbones import make_backbone

    try:
        check_binding(host, api_key, token_option="--api-key")
        return make_backbone(
            model,
            api_base=api_base,
            context_window=context_window,
            max_output_tokens=max_output_tokens,
            tool_mode=tool_mode,
            timeout_s=timeout_s,
        )
    except ValueError as exc:
        raise fail(str(exc)) from exc


def _serving_line(
    backbone: Backbone, name: str | None, host: str, port: int, log_path: Path | None
) -> str:
    """What is served where, as the line printed on stderr before serving starts."""
    served = name or backbone.model
    return (
        f"serving {backbone.model} as model {served!r} at http://{host}:{port}/v1 "
        f"(tool mode {backbone.tool_mode}, parser {backbone.profile.parser}, window "
        f"{backbone.context_window})" + (f"; request log {log_path}" if log_path else "")
    )


def register(app: typer.Typer) -> None:
    app.command("serve-model")(serve_model)
