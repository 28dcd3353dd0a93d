"""A stand-in for the ``openclaw`` command, run as the "Node" of a fake install (tests only).

``config validate --json``: valid unless the config (``OPENCLAW_CONFIG_PATH``) has a top-level
key ``bogus``. ``gateway run``: serves ``GET /v1/models`` on the config's ``gateway.port`` with
its token; ``FAKE_GATEWAY=exit`` exits at once with an error line, ``FAKE_GATEWAY=die`` exits
2 s after it starts serving.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def config() -> dict[str, Any]:
    with open(os.environ["OPENCLAW_CONFIG_PATH"], encoding="utf-8") as handle:
        return dict(json.load(handle))


def validate() -> int:
    issues = []
    if "bogus" in config():
        issues.append({"path": "bogus", "message": 'Unrecognized key: "bogus"'})
    print(json.dumps({"valid": not issues, "issues": issues}))
    return 0 if not issues else 1


def serve() -> int:
    mode = os.environ.get("FAKE_GATEWAY", "")
    if mode == "exit":
        print("Error: gateway refused to start (fake)", flush=True)
        return 3
    gateway = config()["gateway"]
    token = gateway["auth"]["token"]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != f"Bearer {token}":
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"data": [{"id": "openclaw/default"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", gateway["port"]), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("listening", flush=True)
    if mode == "die":
        time.sleep(2)
        print("fatal: worker crashed (fake)", flush=True)
        os._exit(5)
    while True:
        time.sleep(3600)


def main() -> int:
    args = sys.argv[2:]  # argv[1] is the OpenClaw entry point
    if args[:2] == ["config", "validate"]:
        return validate()
    if args[:2] == ["gateway", "run"]:
        return serve()
    print(f"fake openclaw: unknown command {args}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
