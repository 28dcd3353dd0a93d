"""Who may talk to the model endpoint, over real loopback sockets: a foreign Host (421) or a web
page's Origin (403) is refused exactly as the memory server refuses them (one rule,
``runtime.asgi``), a POST that is not JSON is 415, a body nested too deep is 400, and a blank key
is refused before anything serves."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp.server.mcpserver import MCPServer

from memory_server.http import HttpServerThread
from runtime.asgi import check_binding
from runtime.backbones import ScriptedBackbone
from runtime.serve import BackgroundServer, create_app
from runtime.serve.app import MAX_JSON_DEPTH, nested_deeper

BODY = {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]}
JSON_TYPE = {"content-type": "application/json"}


@pytest.fixture
def endpoint() -> Iterator[str]:
    app = create_app(ScriptedBackbone(["hello"] * 10), name="scripted")
    with BackgroundServer(app) as server:
        yield server.base_url


def _post(url: str, headers: dict[str, str], body: Any = BODY) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(url, content=content, headers=headers, timeout=30)


FOREIGN = [
    pytest.param({"host": "evil.example"}, 421, id="foreign-host"),
    pytest.param({"host": "evil.example:8000"}, 421, id="foreign-host-with-port"),
    pytest.param({"origin": "http://evil.example"}, 403, id="foreign-origin"),
    pytest.param({"origin": "https://127.0.0.1.evil.example"}, 403, id="lookalike-origin"),
    pytest.param({"host": "evil.example", "origin": "http://evil.example"}, 421, id="both"),
]


@pytest.mark.parametrize(("headers", "status"), FOREIGN)
def test_a_foreign_host_or_origin_is_refused_as_the_memory_server_refuses_it(
    endpoint: str, headers: dict[str, str], status: int
) -> None:
    with HttpServerThread(MCPServer("guard-check")) as memory:
        memory_answer = _post(memory.url, {**JSON_TYPE, **headers}, body={})
    served = _post(f"{endpoint}/chat/completions", {**JSON_TYPE, **headers})
    assert (served.status_code, memory_answer.status_code) == (status, status)
    error = served.json()["error"]
    assert error["code"] in {"host_not_allowed", "origin_not_allowed"}
    assert "loopback" in error["message"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"host": "localhost"},
        {"origin": "http://localhost:3000"},
        {"host": "[::1]:9", "origin": "http://127.0.0.1"},
    ],
)
def test_loopback_names_are_answered(endpoint: str, headers: dict[str, str]) -> None:
    answer = _post(f"{endpoint}/chat/completions", {**JSON_TYPE, **headers})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "hello"


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_a_post_that_is_not_json_is_415(endpoint: str, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    answer = _post(f"{endpoint}/chat/completions", headers)
    assert answer.status_code == 415
    assert answer.json()["error"]["code"] == "unsupported_media_type"
    charset = _post(
        f"{endpoint}/chat/completions", {"content-type": "Application/JSON; charset=utf-8"}
    )
    assert charset.status_code == 200


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000])
def test_a_body_nested_too_deep_is_400(endpoint: str, depth: int) -> None:
    nested = ("[" * depth + "]" * depth).encode()
    body = b'{"model": "scripted", "messages": [], "metadata": ' + nested + b"}"
    answer = _post(f"{endpoint}/chat/completions", JSON_TYPE, body=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "request_too_deep"


def test_nesting_is_measured_without_recursion() -> None:
    deep: Any = []
    for _ in range(50_000):
        deep = [deep]
    assert nested_deeper(deep, MAX_JSON_DEPTH)
    assert not nested_deeper({"a": [[{"b": 1}]]}, 4)
    assert nested_deeper({"a": [[{"b": {}}]]}, 4)
    assert not nested_deeper("text", 0)


def test_with_a_key_the_key_is_checked_and_health_stays_open() -> None:
    app = create_app(ScriptedBackbone(["hello"]), name="scripted", api_key="s3cret")
    with BackgroundServer(app) as server:
        url = f"{server.base_url}/chat/completions"
        without = _post(url, JSON_TYPE)
        wrong = _post(url, {**JSON_TYPE, "authorization": "Bearer nope"})
        right = _post(url, {**JSON_TYPE, "authorization": "Bearer s3cret"})
        health = httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=10)
    assert [r.status_code for r in (without, wrong, right, health)] == [401, 401, 200, 200]


@pytest.mark.parametrize("key", ["", " ", "\t", "s3cret ", " s3cret"])
def test_a_blank_or_padded_key_is_refused_before_serving(key: str) -> None:
    with pytest.raises(ValueError, match="blank or starts or ends with whitespace"):
        create_app(ScriptedBackbone([]), api_key=key)
    with pytest.raises(ValueError, match="--token is blank"):
        check_binding("0.0.0.0", key)  # the memory server's option, the same rule
