"""A real npm registry on loopback, serving small packages built by the test.

``FakeNpmRegistry`` answers the two requests ``npm install`` makes: the packument
(``GET /<name>``) and the tarball (``GET /<name>/-/<name>-<version>.tgz``, checked by npm
against the sha512 integrity in the packument). A package can be made to fail with an HTTP
status, or to hang on its tarball until released (to interrupt an install mid-way).

    with FakeNpmRegistry() as registry:
        registry.publish("node", "24.21.0", {"bin/node": (script, 0o755)}, bin={"node": "bin/node"})
        ... npm install --registry registry.url ...
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

FileSpec = tuple[str, int]
"""File content and mode."""


@dataclass
class _Package:
    name: str
    versions: dict[str, dict[str, Any]] = field(default_factory=dict)
    tarballs: dict[str, bytes] = field(default_factory=dict)


def build_tarball(manifest: dict[str, Any], files: dict[str, FileSpec]) -> bytes:
    """An npm package tarball: everything under ``package/``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        entries = {"package.json": (json.dumps(manifest), 0o644), **files}
        for path, (content, mode) in entries.items():
            data = content.encode("utf-8")
            info = tarfile.TarInfo(f"package/{path}")
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class FakeNpmRegistry:
    def __init__(self) -> None:
        self._packages: dict[str, _Package] = {}
        self.failures: dict[str, int] = {}
        self.hang_tarball: set[str] = set()
        self.tarball_requested = threading.Event()
        self.release = threading.Event()
        self.requests: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    def publish(
        self,
        name: str,
        version: str,
        files: dict[str, FileSpec],
        **manifest_fields: Any,
    ) -> None:
        manifest = {"name": name, "version": version, **manifest_fields}
        tarball = build_tarball(manifest, files)
        package = self._packages.setdefault(name, _Package(name))
        package.tarballs[version] = tarball
        digest = base64.b64encode(hashlib.sha512(tarball).digest()).decode("ascii")
        package.versions[version] = {
            **manifest,
            "dist": {
                "tarball": f"{self.url}{name}/-/{name}-{version}.tgz",
                "integrity": f"sha512-{digest}",
                "shasum": hashlib.sha1(tarball).hexdigest(),
            },
        }

    def _packument(self, name: str) -> dict[str, Any] | None:
        package = self._packages.get(name)
        if package is None:
            return None
        latest = sorted(package.versions)[-1]
        return {"name": name, "dist-tags": {"latest": latest}, "versions": package.versions}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                registry.requests.append(self.path)
                name, _, rest = self.path.lstrip("/").partition("/-/")
                if name in registry.failures:
                    self._send(registry.failures[name], b'{"error": "refused by the test"}')
                    return
                if rest:
                    self._tarball(name, rest)
                    return
                packument = registry._packument(name)
                if packument is None:
                    self._send(404, b'{"error": "Not found"}')
                    return
                self._send(200, json.dumps(packument).encode())

            def _tarball(self, name: str, filename: str) -> None:
                if name in registry.hang_tarball:
                    registry.tarball_requested.set()
                    registry.release.wait(60)
                package = registry._packages.get(name)
                version = filename.removeprefix(f"{name}-").removesuffix(".tgz")
                if package is None or version not in package.tarballs:
                    self._send(404, b'{"error": "Not found"}')
                    return
                self._send(200, package.tarballs[version], "application/octet-stream")

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def __enter__(self) -> FakeNpmRegistry:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
