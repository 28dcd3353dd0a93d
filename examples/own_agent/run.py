"""The worked example: evaluate "your own agent" with MIRAGE through the OpenAI-compatible
adapter, and check the R_tool labels against the agent's own log of its tool calls.

1. start ``agent_server.py`` (a separate process: litellm over the embedded SmolLM2 model, MCP
   client for memory) on a free port;
2. ``mirage run --agent openai:http://127.0.0.1:PORT/v1 --memory-url http://127.0.0.1:M/mcp``
   with a scripted trunk (checkpoints are built by MIRAGE's runtime, as always);
3. compare, probe by probe, the path MIRAGE recorded (from the memory server's call log) with
   what the agent says it did, and write ``output/comparison.md``.

Run: ``python examples/own_agent/run.py [--limit 2] [--fixed-url]`` (re-running resumes).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "output"
AGENT_MODEL = "example-agent"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_agent(port: int, memory_url: str, log: Path, fixed_url: bool) -> subprocess.Popen:
    command = [sys.executable, str(HERE / "agent_server.py"), "--port", str(port)]
    command += ["--memory-url", memory_url, "--log", str(log)]
    if fixed_url:
        command.append("--ignore-probe-url")
    agent = subprocess.Popen(command, stderr=(OUTPUT / "agent-stderr.log").open("w"))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if agent.poll() is not None:
            raise SystemExit(f"the example agent exited ({agent.returncode}); see agent-stderr.log")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return agent
        except httpx.TransportError:
            time.sleep(0.5)  # polling a child process's readiness
    agent.kill()
    raise SystemExit("the example agent did not come up within 180 s")


def run_mirage(agent_port: int, memory_url: str, limit: int, out: Path, fixed_url: bool) -> None:
    command = [
        sys.executable, "-m", "mirage", "run",
        "--agent", f"openai:http://127.0.0.1:{agent_port}/v1",
        "--agent-model", AGENT_MODEL,
        "--memory-url", memory_url,
        "--trunk-model", "scripted",
        "--limit", str(limit),
        "--agent-timeout", "600",
        "--out", str(out),
    ]  # fmt: skip
    if fixed_url:
        command += ["--concurrency", "1"]  # untagged calls are attributed by time window
    subprocess.run(command, check=True)


def agent_tool_use(log: Path) -> dict[str, int]:
    """Probe tag → calls the agent made that reached the memory server (its own account)."""
    used: dict[str, int] = defaultdict(int)
    if log.exists():
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("reached_server"):
                used[entry["tag"]] += 1
    return used


def compare(results: Path, log: Path) -> str:
    from harness.kit.results import read_records
    from harness.mirage.probing.records import ProbeRecord

    used = agent_tool_use(log)
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    mismatched = []
    for record in read_records(results, ProbeRecord):
        tag = getattr(record, "tag", "")
        server = record.path == "R_tool"
        agent = used.get(tag, 0) > 0
        cell = cells[(record.state, record.condition)]
        cell[0] += 1
        cell[1] += server
        cell[2] += agent
        cell[3] += server != agent
        if server != agent:
            mismatched.append(tag)
    rows = [
        "| State | Cond. | n | R_tool % (server log) | R_tool % (agent log) | mismatches |",
        "|---|---|---|---|---|---|",
    ]
    for (state, condition), (n, by_server, by_agent, bad) in cells.items():
        rows.append(
            f"| {state} | {condition} | {n} | {100 * by_server / n:.1f} "
            f"| {100 * by_agent / n:.1f} | {bad} |"
        )
    total = sum(c[0] for c in cells.values())
    verdict = f"{total - len(mismatched)}/{total} probes: MIRAGE's path label matches the agent"
    return "\n".join([*rows, "", verdict, *(f"- mismatch: {t}" for t in mismatched)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=2, help="questions (whole pairs), >= 2")
    parser.add_argument(
        "--fixed-url",
        action="store_true",
        help="the agent ignores the per-probe URL and uses only --memory-url (window attribution)",
    )
    args = parser.parse_args()
    OUTPUT.mkdir(exist_ok=True)
    out = OUTPUT / ("run-fixed-url" if args.fixed_url else "run")
    log = OUTPUT / ("agent-calls-fixed-url.jsonl" if args.fixed_url else "agent-calls.jsonl")
    memory_url = f"http://127.0.0.1:{free_port()}/mcp"
    agent_port = free_port()
    started = time.perf_counter()
    agent = start_agent(agent_port, memory_url, log, args.fixed_url)
    try:
        run_mirage(agent_port, memory_url, args.limit, out, args.fixed_url)
    finally:
        agent.send_signal(signal.SIGINT)
        agent.wait(30)
    table = compare(out / AGENT_MODEL / "results.jsonl", log)
    report = f"# Own agent vs. MIRAGE's labels\n\n{table}\n"
    (OUTPUT / f"comparison{'-fixed-url' if args.fixed_url else ''}.md").write_text(report)
    print("\n" + report)
    print(f"example finished in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    os.chdir(HERE.parent.parent)  # the repository root, so `-m mirage` resolves
    main()
