"""The second worked example: an OpenAI Agents SDK agent (``agent.py``) under MIRAGE.

1. start ``mirage serve-model`` (the embedded SmolLM2 by default, ``--model`` for another) on a
   free port — the agent's model;
2. for each variant, ``mirage run --agent "cmd:agent.py --model-url … --tool-choice X"`` with a
   scripted trunk: ``required`` (the SDK's ``ModelSettings(tool_choice="required")``) and
   ``auto``; both share one ``--out``, so the trunk and its checkpoints are built once;
3. read each run's ``attribution.json`` (the memory server's log against the agent's own
   reports) and write ``comparison-sdk.md``.

Run: ``pip install -r examples/own_agent/openai_agents_sdk/requirements.txt`` once, then
``python examples/own_agent/openai_agents_sdk/run.py [--limit 2] [--variant required]
[--model-url URL --served-name NAME]`` (re-running resumes).
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
VARIANTS = ("required", "auto")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_model(args: argparse.Namespace, port: int, out: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "mirage", "serve-model", "--model", args.model]
    command += ["--port", str(port), "--name", args.served_name]
    command += ["--log", str(out / "serve-model.jsonl")]
    server = subprocess.Popen(command, cwd=ROOT, stderr=(out / "serve-model.log").open("w"))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"mirage serve-model exited ({server.returncode}); see {out}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.5)  # polling a child process's readiness
    server.kill()
    raise SystemExit("mirage serve-model did not come up within 300 s")


def run_mirage(args: argparse.Namespace, variant: str, model_url: str, out: Path) -> None:
    argv = [str(HERE / "agent.py"), "--model-url", model_url]
    argv += ["--model", args.served_name, "--tool-choice", variant]
    command = [
        sys.executable, "-m", "mirage", "run",
        "--agent", f"cmd:{shlex.join(argv)}",
        "--agent-model", f"{args.name}-{variant}",
        "--trunk-model", "scripted",
        "--limit", str(args.limit),
        "--concurrency", "4",
        "--agent-timeout", "600",
        "--out", str(out),
    ]  # fmt: skip
    subprocess.run(command, cwd=ROOT, check=True)


def comparison(out: Path, name: str, variants: list[str]) -> str:
    rows = [
        "| tool_choice | probes | R_tool (server log) | agent reported | disagreements "
        "| agent errors |",
        "|---|---|---|---|---|---|",
    ]
    for variant in variants:
        counts = json.loads((out / f"{name}-{variant}" / "attribution.json").read_text())
        rows.append(
            f"| {variant} | {counts['probes']} | {counts['r_tool']} | "
            f"{counts['agent_reported']} | {counts['disagreements']} | {counts['agent_errors']} |"
        )
    return "\n".join(rows)


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/smollm2-135m", help="served by serve-model")
    parser.add_argument(
        "--model-url", help="use this OpenAI-compatible endpoint instead of starting serve-model"
    )
    parser.add_argument("--served-name", default="served", help="the model name it serves")
    parser.add_argument("--limit", type=int, default=2, help="questions (whole pairs), >= 2")
    parser.add_argument("--variant", choices=[*VARIANTS, "both"], default="both")
    parser.add_argument("--out", type=Path, default=HERE / "output")
    parser.add_argument("--name", default="sdk", help="results go to OUT/NAME-VARIANT/")
    return parser.parse_args()


def main() -> None:
    args = options()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    variants = list(VARIANTS) if args.variant == "both" else [args.variant]
    started = time.perf_counter()
    server, model_url = None, args.model_url
    if model_url is None:
        port = free_port()
        server, model_url = start_model(args, port, out), f"http://127.0.0.1:{port}/v1"
    try:
        for variant in variants:
            run_mirage(args, variant, model_url, out)
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)
            server.wait(30)
    report = "# OpenAI Agents SDK agent vs. MIRAGE's memory-server log\n\n"
    report += comparison(out, args.name, variants) + "\n"
    (out / f"comparison-{args.name}.md").write_text(report)
    print(f"\n{report}\nexample finished in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
