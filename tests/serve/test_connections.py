"""Connections to a real endpoint on loopback: a client that stays silent before its request is
complete is cut off after the read timeout; one that has sent its request waits as long as the
answer takes."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest
from openai import OpenAI

from runtime.backbones import FunctionBackbone, ScriptedBackbone
from runtime.messages import Message
from runtime.serve import BackgroundServer, RequestLog, create_app, read_request_log

READ_TIMEOUT_S = 0.5
HEAD = (
    "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
)


def _closed_after(port: int, sent: bytes) -> float:
    """Seconds until the server closes a connection on which ``sent`` is all the client says
    (fails when it is still open after 15 s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as client:
        started = time.monotonic()
        if sent:
            client.sendall(sent)
        try:
            assert client.recv(1024) == b""
        except TimeoutError:
            pytest.fail(f"the connection was still open after 15 s ({sent[:30]!r} sent)")
        return time.monotonic() - started


@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127", (HEAD + '{"model": ').encode()],
    ids=["silent", "half_headers", "half_body"],
)
def test_a_silent_client_is_cut_off_after_the_read_timeout(tmp_path: Path, sent: bytes) -> None:
    log_path = tmp_path / "requests.jsonl"
    app = create_app(ScriptedBackbone([]), request_log=RequestLog(log_path))
    with BackgroundServer(app, read_timeout_s=READ_TIMEOUT_S) as server:
        waited = _closed_after(server.port, sent)
        time.sleep(0.2)
    assert READ_TIMEOUT_S * 0.8 < waited < READ_TIMEOUT_S + 5
    records = read_request_log(log_path) if log_path.exists() else []
    if sent.startswith(HEAD.encode()):  # the app had the request: it logs the hang-up
        [record] = records
        assert (record.status, record.error) == (499, "client_disconnected")
    else:
        assert records == []


def test_an_answer_slower_than_the_read_timeout_still_arrives() -> None:
    async def slow(messages: list[Message]) -> str:
        await asyncio.sleep(READ_TIMEOUT_S * 4)
        return "worth the wait"

    app = create_app(FunctionBackbone(slow, model="slow"))
    with BackgroundServer(app, read_timeout_s=READ_TIMEOUT_S) as server:
        client = OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="slow", messages=[{"role": "user", "content": "hi"}]
        )
        again = client.chat.completions.create(  # the same kept-alive connection
            model="slow", messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.choices[0].message.content == again.choices[0].message.content
    assert reply.choices[0].message.content == "worth the wait"
