"""A real, fault-injecting OpenAI-compatible chat server for tests.

``FakeOpenAIServer`` serves ``POST /v1/chat/completions`` on 127.0.0.1 (random port) from a
background thread. Each request takes the next scripted ``Step`` from a queue: a normal reply,
a native tool-call reply, a reply withheld by a content filter or carrying a ``refusal``, an
HTTP error (429, 500, 503, the 400 context-length body OpenAI sends), a hang longer than the
client's timeout, or a malformed body. When the queue is empty
the server answers 500 ``script exhausted`` so a test sees the surprise. Every request body is
recorded with its arrival time.

    with FakeOpenAIServer() as server:
        server.push(rate_limited(), reply("hello"))
        ... api_base=server.api_base ...
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

StepKind = Literal["json", "raw", "hang"]


@dataclass(frozen=True)
class Step:
    """One scripted answer: a JSON body, raw bytes, or a hang of ``hang_s`` seconds."""

    kind: StepKind
    status: int = 200
    body: Any = None
    raw: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    body: dict[str, Any]
    received_at: float


def unused_port() -> int:
    """A loopback port nothing listens on (for connection-refused tests)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def completion_body(
    content: str | None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
    finish_reason: str = "stop",
    model: str = "fake-model",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def usage_body(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def reply(
    content: str, *, usage: dict[str, Any] | None = None, finish_reason: str = "stop"
) -> Step:
    """A normal assistant reply (with usage unless ``usage={}`` asks for none)."""
    chosen = usage_body(12, 3) if usage is None else (usage or None)
    return Step("json", body=completion_body(content, usage=chosen, finish_reason=finish_reason))


def tool_call_reply(name: str, arguments: dict[str, Any] | str, call_id: str = "call_1") -> Step:
    encoded = arguments if isinstance(arguments, str) else json.dumps(arguments)
    calls = [{"id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}]
    body = completion_body(
        None, tool_calls=calls, usage=usage_body(40, 9), finish_reason="tool_calls"
    )
    return Step("json", body=body)


def content_filtered(content: str | None = None) -> Step:
    """HTTP 200 whose reply the provider's content filter withheld (``content`` None) or cut."""
    body = completion_body(content, usage=usage_body(30, 0), finish_reason="content_filter")
    return Step("json", body=body)


def refused(refusal: str, content: str | None = None) -> Step:
    """HTTP 200 carrying OpenAI's ``refusal`` field (structured outputs), with ``content``."""
    body = completion_body(content, usage=usage_body(30, 9))
    body["choices"][0]["message"]["refusal"] = refusal
    return Step("json", body=body)


def error(
    status: int,
    message: str,
    *,
    code: str | None = None,
    error_type: str = "server_error",
    headers: dict[str, str] | None = None,
) -> Step:
    payload = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return Step("json", status=status, body=payload, headers=headers or {})


def rate_limited(retry_after_s: float | None = None) -> Step:
    headers = {"retry-after": str(retry_after_s)} if retry_after_s is not None else {}
    return error(
        429,
        "Rate limit reached for requests",
        code="rate_limit_exceeded",
        error_type="requests",
        headers=headers,
    )


def server_error(status: int = 500) -> Step:
    return error(status, "The server had an error while processing your request.")


def context_length_exceeded() -> Step:
    """The 400 body OpenAI returns when the prompt does not fit the model's window."""
    return error(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9000 tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
        error_type="invalid_request_error",
    )


def hang(seconds: float) -> Step:
    """Answer nothing for ``seconds`` (longer than the client timeout), then a reply."""
    return Step("hang", body=completion_body("too late", usage=usage_body(1, 1)), hang_s=seconds)


def malformed_json() -> Step:
    return Step("raw", raw=b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "mess')


def no_choices() -> Step:
    body = completion_body("x")
    body["choices"] = []
    return Step("json", body=body)


class JsonHandler(BaseHTTPRequestHandler):
    """A handler of JSON requests for tests' own endpoints: ``read_json`` the body,
    ``send_json`` an answer (Nagle off: a stdlib server otherwise adds ~50 ms per call)."""

    disable_nagle_algorithm = True

    def read_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")

    def send_json(self, payload: Any, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        payload = json.loads(self.rfile.read(length) or b"{}")
        owner = self.server.owner
        step = owner.record_and_next(RecordedRequest(self.path, payload, time.monotonic()))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            step = error(404, f"no route {self.path}")
        self._answer(step)

    def _answer(self, step: Step) -> None:
        if step.kind == "hang" and self.server.owner.stopping.wait(step.hang_s):
            return
        data = step.raw if step.kind == "raw" else json.dumps(step.body).encode()
        try:
            self.send_response(step.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in step.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout) before the answer came

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Server(ThreadingHTTPServer):
    """Tracks open connections so ``stop`` can close keep-alive sockets a client pools."""

    daemon_threads = True
    owner: FakeOpenAIServer

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.open_sockets: set[socket.socket] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        self.open_sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.open_sockets.discard(request)
        super().shutdown_request(request)

    def close_open_sockets(self) -> None:
        for sock in list(self.open_sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class FakeOpenAIServer:
    def __init__(self) -> None:
        self._steps: deque[Step] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0))
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._steps)

    def record_and_next(self, request: RecordedRequest) -> Step:
        with self._lock:
            self.requests.append(request)
            if self._steps:
                return self._steps.popleft()
        return error(500, "fake server: script exhausted (unexpected request)")

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.close_open_sockets()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
