"""A local provider that caches prompts the way Anthropic and OpenAI document it, for tests and
benchmarks that point litellm at it with ``api_base``.

Routes (one server, both APIs): ``POST /v1/messages`` speaks the Anthropic Messages API,
``POST /v1/chat/completions`` the OpenAI chat API. Every request is recorded with its raw body.

Anthropic (explicit caching): the prompt is the sequence of blocks tools → system → messages;
a block carrying ``cache_control`` is a breakpoint (more than four is a 400, as Anthropic
answers). A call reads the longest cached prefix that ends at a breakpoint or at one of the 20
block boundaries before it, and writes the prefix up to its last breakpoint when that is not
cached yet; prefixes shorter than ``min_cacheable_tokens`` are never cached. Usage comes back
as Anthropic reports it: ``input_tokens`` (after the last breakpoint),
``cache_read_input_tokens``, ``cache_creation_input_tokens``.

OpenAI (automatic caching): the prompt (tools, then each message) is tokenised; a call reads
the longest previously seen prefix in steps of 128 tokens from 1,024 on, and every prefix of
the call becomes readable for later calls. Usage: ``prompt_tokens`` with
``prompt_tokens_details.cached_tokens``.

Token counts are tiktoken cl100k counts of each block's JSON: not any provider's tokenizer,
but the same for every call, which is all cache accounting needs.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from runtime.tokens import count_tokens, encoding

MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
OPENAI_MIN_CACHED = 1024
OPENAI_CACHE_STEP = 128

Responder = Callable[[dict[str, Any]], str]


@dataclass
class Block:
    """One unit of an Anthropic prompt: its JSON (markers removed), tokens, and marker."""

    text: str
    tokens: int
    marked: bool


@dataclass
class ProviderRequest:
    api: str
    body: dict[str, Any]
    raw: bytes
    usage: dict[str, Any] = field(default_factory=dict)
    breakpoints: list[int] = field(default_factory=list)
    """Anthropic: index (in ``blocks``) of every block that carried ``cache_control``."""
    blocks: list[Block] = field(default_factory=list)


def anthropic_blocks(body: dict[str, Any]) -> list[Block]:
    """The prompt of an Anthropic request as cacheable blocks, in cache order."""
    units: list[dict[str, Any]] = [dict(tool) for tool in body.get("tools") or []]
    system = body.get("system") or []
    units += [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
    for message in body.get("messages", []):
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        units += [{"role": message["role"], **part} for part in parts]
    blocks = []
    for unit in units:
        marked = unit.pop("cache_control", None) is not None
        text = json.dumps(unit, sort_keys=True)
        blocks.append(Block(text, count_tokens(text), marked))
    return blocks


def _prefix_hashes(blocks: list[Block]) -> list[str]:
    """hashes[i] identifies the prefix of the first i blocks."""
    digest = hashlib.sha256()
    hashes = [digest.hexdigest()]
    for block in blocks:
        digest.update(block.text.encode())
        hashes.append(digest.copy().hexdigest())
    return hashes


class PromptCache:
    """Both providers' caches (prefix hashes), shared by every connection of one server."""

    def __init__(self, min_cacheable_tokens: int) -> None:
        self.min_cacheable_tokens = min_cacheable_tokens
        self._anthropic: set[str] = set()
        self._openai: set[str] = set()
        self._lock = threading.Lock()

    def anthropic_usage(self, blocks: list[Block]) -> dict[str, int]:
        hashes = _prefix_hashes(blocks)
        totals = [0]
        for block in blocks:
            totals.append(totals[-1] + block.tokens)
        ends = [i + 1 for i, block in enumerate(blocks) if block.marked]
        with self._lock:
            read = 0
            for end in ends:
                for boundary in range(end, max(0, end - LOOKBACK_BLOCKS) - 1, -1):
                    if hashes[boundary] in self._anthropic:
                        read = max(read, boundary)
                        break
            last = ends[-1] if ends else 0
            written = last if last > read and totals[last] >= self.min_cacheable_tokens else read
            for end in ends:
                if totals[end] >= self.min_cacheable_tokens:
                    self._anthropic.add(hashes[end])
        return {
            "input_tokens": totals[-1] - totals[written],
            "cache_read_input_tokens": totals[read],
            "cache_creation_input_tokens": totals[written] - totals[read],
        }

    def openai_usage(self, body: dict[str, Any]) -> dict[str, Any]:
        parts = [json.dumps(body.get("tools") or [], sort_keys=True)]
        parts += [json.dumps(message, sort_keys=True) for message in body.get("messages", [])]
        tokens = encoding().encode("".join(parts), disallowed_special=())
        steps = range(OPENAI_MIN_CACHED, len(tokens) + 1, OPENAI_CACHE_STEP)
        keys = {end: hashlib.sha256(str(tokens[:end]).encode()).hexdigest() for end in steps}
        with self._lock:
            cached = max((end for end, key in keys.items() if key in self._openai), default=0)
            self._openai.update(keys.values())
        return {
            "prompt_tokens": len(tokens),
            "prompt_tokens_details": {"cached_tokens": cached},
        }


def protocol_reply(_body: dict[str, Any]) -> str:
    return "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        body = json.loads(raw or b"{}")
        owner = self.server.owner
        if self.path.rstrip("/").endswith("/v1/messages"):
            status, answer = owner.anthropic(body, raw)
        elif self.path.rstrip("/").endswith("/chat/completions"):
            status, answer = owner.openai(body, raw)
        else:
            status, answer = 404, {"error": {"message": f"no route {self.path}"}}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: CachingProvider


class CachingProvider:
    """``with CachingProvider() as provider:`` then ``api_base=provider.anthropic_base`` (or
    ``provider.openai_base``); ``provider.requests`` holds what arrived."""

    def __init__(
        self, responder: Responder = protocol_reply, *, min_cacheable_tokens: int = 1024
    ) -> None:
        self.responder = responder
        self.cache = PromptCache(min_cacheable_tokens)
        self.requests: list[ProviderRequest] = []
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def anthropic_base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_base(self) -> str:
        return f"{self.anthropic_base}/v1"

    def _record(self, request: ProviderRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def anthropic(self, body: dict[str, Any], raw: bytes) -> tuple[int, dict[str, Any]]:
        blocks = anthropic_blocks(body)
        breakpoints = [i for i, block in enumerate(blocks) if block.marked]
        request = ProviderRequest("anthropic", body, raw, breakpoints=breakpoints, blocks=blocks)
        self._record(request)
        if len(breakpoints) > MAX_BREAKPOINTS:
            message = f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided."
            error = {"type": "invalid_request_error", "message": message}
            return 400, {"type": "error", "error": error}
        text = self.responder(body)
        request.usage = {**self.cache.anthropic_usage(blocks), "output_tokens": count_tokens(text)}
        return 200, {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": request.usage,
        }

    def openai(self, body: dict[str, Any], raw: bytes) -> tuple[int, dict[str, Any]]:
        request = ProviderRequest("openai", body, raw)
        self._record(request)
        text = self.responder(body)
        usage = self.cache.openai_usage(body)
        output = count_tokens(text)
        request.usage = {**usage, "completion_tokens": output}
        request.usage["total_tokens"] = usage["prompt_tokens"] + output
        message = {"role": "assistant", "content": text}
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": request.usage,
        }

    def start(self) -> CachingProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> CachingProvider:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
