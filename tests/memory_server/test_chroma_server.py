"""The same index code against a Chroma server (``--chroma-url``), started with ``chroma run``."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memory_server.embedding import Embedder
from memory_server.index import HybridIndex, IndexConfig
from memory_server.workspace import Workspace
from tests.memory_server.conftest import write_workspace

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def chroma_url(tmp_path: Path) -> Iterator[str]:
    binary = shutil.which("chroma")
    if binary is None:
        pytest.skip("the chroma CLI is not installed")
    port = _free_port()
    process = subprocess.Popen(
        [binary, "run", "--path", str(tmp_path / "chroma"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://localhost:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # readiness poll of the server's heartbeat endpoint
            try:
                if httpx.get(f"{url}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                pytest.fail("chroma server did not start")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_index_and_search_on_a_chroma_server(
    chroma_url: str, tmp_path: Path, embedder: Embedder, shared_cache: Path
) -> None:
    root = write_workspace(tmp_path / "ws")
    config = IndexConfig(chroma_url=chroma_url, embedding_cache=shared_cache)
    index = HybridIndex(Workspace.open(root), config, embedder=embedder)
    report = index.sync()
    assert report.chunks_added == index.chunk_count() > 0
    assert index.search("INV-2023-0042", 1)[0].artifact_id == "invoice_2023_0042"
    assert index.search("Munich median rent 2019", 1)[0].artifact_id == "chart_3f9a1c20"

    other = write_workspace(tmp_path / "other")
    (other / "notes" / "only_here.txt").write_text("The spare key is under the blue pot.\n")
    other_index = HybridIndex(Workspace.open(other), config, embedder=embedder)
    assert other_index.search("spare key", 1)[0].path == "notes/only_here.txt"
    assert all(hit.path != "notes/only_here.txt" for hit in index.search("spare key", 5))
