"""What ``mirage view`` serves: one report page and the files it references, nothing else.

Above: ``mirage view`` (``mirage/cli/report.py``), which picks the page and runs the server.
Below: the standard library's ``http.server``.

The page (``report.html`` or ``comparison.html``) and each relative ``src``/``href`` in it that
names a file inside the page's folder are served; every other path is 404, so there is no
directory listing and no other file of the run folder (results, workspace links) leaves it. A
path is resolved on every request and refused when it resolves outside the folder, so a
symlink cannot lead out of it. Only ``Host: 127.0.0.1[:port]`` or ``localhost[:port]`` is
answered (403 otherwise): a page on another site that rebinds its DNS name to 127.0.0.1 cannot
read the report. A client that drops its connection (a reset, a tab closed mid-page) is one log
line (``view.client_dropped``), never a traceback.
"""

from __future__ import annotations

import mimetypes
import posixpath
import sys
from html.parser import HTMLParser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import structlog

log = structlog.get_logger(__name__)

LOOPBACK_NAMES = ("127.0.0.1", "localhost")


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [value for name, value in attrs if name in ("src", "href") and value]


def served_paths(page: Path) -> dict[str, str]:
    """URL path → path relative to the page's folder: the page, and the relative references
    in it that stay inside the folder (``data:``, absolute URLs and fragments are skipped)."""
    parser = _References()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    served = {f"/{page.name}": page.name}
    for reference in parser.found:
        parts = urlsplit(reference)
        if parts.scheme or parts.netloc or not parts.path or parts.path.startswith("/"):
            continue
        relative = posixpath.normpath(unquote(parts.path))
        if relative != ".." and not relative.startswith("../"):
            served[f"/{relative}"] = relative
    return served


def inside(root: Path, relative: str) -> Path | None:
    """The file ``relative`` names under ``root``, or None when it is missing, not a file, or
    resolves (through a symlink) outside ``root``."""
    real_root = root.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(real_root) or not target.is_file():
        return None
    return target


class ReportHandler(BaseHTTPRequestHandler):
    """GET and HEAD of the served paths; ``server`` is a ``ReportServer``."""

    server: ReportServer

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def _answer(self, *, with_body: bool) -> None:
        if not self.server.host_allowed(self.headers.get("Host", "")):
            self._plain(HTTPStatus.FORBIDDEN, "this server answers only 127.0.0.1 and localhost")
            return
        path = urlsplit(self.path).path
        if path == "/":
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", f"/{self.server.page.name}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        relative = self.server.paths.get(unquote(path))
        target = inside(self.server.page.parent, relative) if relative is not None else None
        if target is None:
            self._plain(HTTPStatus.NOT_FOUND, "not part of this report")
            return
        body = target.read_bytes()
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        self._send(HTTPStatus.OK, kind, body if with_body else b"", length=len(body))

    def _plain(self, status: HTTPStatus, message: str) -> None:
        self._send(status, "text/plain; charset=utf-8", f"{message}\n".encode())

    def _send(self, status: HTTPStatus, kind: str, body: bytes, length: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None  # no line per request on the console


class ReportServer(ThreadingHTTPServer):
    """Serves ``page`` and what it references on 127.0.0.1:``port`` (0: a free port)."""

    daemon_threads = True

    def __init__(self, page: Path, port: int = 0) -> None:
        if inside(page.parent, page.name) is None:
            raise ValueError(f"{page} resolves outside its folder {page.parent}")
        self.page = page
        self.paths = served_paths(page)
        super().__init__(("127.0.0.1", port), ReportHandler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        """A dropped client is one warning line; anything else is the standard report."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):  # reset, broken pipe, aborted
            host, port = client_address[0], client_address[1]
            log.warning("view.client_dropped", client=f"{host}:{port}", error=type(error).__name__)
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]

    def host_allowed(self, host: str) -> bool:
        allowed = {*LOOPBACK_NAMES, *(f"{name}:{self.port}" for name in LOOPBACK_NAMES)}
        return host.lower() in allowed
