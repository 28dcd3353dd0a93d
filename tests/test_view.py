"""``mirage view`` as a user starts it (a real process on a free loopback port): it serves the
report page and the files the page references, and nothing else of the run folder."""

from __future__ import annotations

import http.client
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

PAGE = """<!doctype html><html><head><link rel="icon" href="data:,"></head><body>
<img src="figures/ac.png"><img src="figures/leak.png"><a href="#probes">probes</a>
<a href="https://example.org/">elsewhere</a><img src="../outside.png"></body></html>"""


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("view")
    folder = base / "run"
    (folder / "figures").mkdir(parents=True)
    (folder / "report.html").write_text(PAGE, encoding="utf-8")
    (folder / "figures" / "ac.png").write_bytes(b"\x89PNG\r\n\x1a\nfigure")
    (folder / "results.jsonl").write_text('{"secret": "a probe record"}\n', encoding="utf-8")
    (base / "outside.png").write_bytes(b"not in the run folder")
    (folder / "etclink").symlink_to("/etc")
    (folder / "figures" / "leak.png").symlink_to("/etc/passwd")  # referenced, but leaves
    return folder


@pytest.fixture(scope="module")
def port(run_folder: Path) -> Iterator[int]:
    command = [sys.executable, "-m", "mirage", "view", str(run_folder), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[1]  # "serving http://127.0.0.1:PORT/report.html"
        yield int(url.split(":")[2].split("/")[0])
    finally:
        process.terminate()
        process.wait(timeout=30)


def _get(port: int, path: str, host: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    """A GET with ``path`` sent as is (no client-side normalisation of ``..``)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", f"127.0.0.1:{port}" if host is None else host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


def test_the_page_and_the_figures_it_references_are_served(port: int) -> None:
    status, body, headers = _get(port, "/report.html")
    assert status == 200 and body.startswith(b"<!doctype html>")
    assert headers["Content-Type"] == "text/html"
    status, body, headers = _get(port, "/figures/ac.png")
    assert (status, body, headers["Content-Type"]) == (200, b"\x89PNG\r\n\x1a\nfigure", "image/png")
    assert httpx.get(f"http://localhost:{port}/report.html").status_code == 200


def test_the_root_redirects_to_the_page(port: int) -> None:
    status, _, headers = _get(port, "/")
    assert (status, headers["Location"]) == (302, "/report.html")


@pytest.mark.parametrize(
    "path",
    [
        "/results.jsonl",  # in the folder, not referenced
        "/figures/",  # no directory listing
        "/figures",
        "/etclink/passwd",  # a symlink out of the folder
        "/figures/leak.png",  # referenced, but a symlink to /etc/passwd
        "/../outside.png",
        "/..%2foutside.png",
        "/%2e%2e/outside.png",
        "/etc/passwd",
    ],
)
def test_nothing_else_is_served(port: int, path: str) -> None:
    status, body, _ = _get(port, path)
    assert status == 404, (path, body[:80])
    assert b"root:" not in body and b"secret" not in body


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.nip.io", ""])
def test_a_foreign_host_header_is_refused(port: int, host: str) -> None:
    status, body, _ = _get(port, "/report.html", host=host)
    assert status == 403 and b"127.0.0.1 and localhost" in body


def _reset(port: int, request: bytes) -> None:
    """A client that sends ``request`` and drops the connection with a reset (RST), as a
    browser tab closed mid-page or a killed client does."""
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    client.sendall(request)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()


def test_a_client_that_drops_its_connection_is_one_log_line(run_folder: Path) -> None:
    """Issue 37: a reset connection printed a 25-line ConnectionResetError traceback."""
    command = [sys.executable, "-m", "mirage", "view", str(run_folder), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[1]
        port = int(url.split(":")[2].split("/")[0])
        _reset(port, b"GET /report.html HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # mid-request
        time.sleep(0.5)
        status, body, _ = _get(port, "/report.html")  # and it goes on serving
        assert status == 200 and body.startswith(b"<!doctype html>")
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "view.client_dropped" in lines[0], stderr
    assert "ConnectionResetError" in lines[0]
