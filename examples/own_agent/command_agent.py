#!/usr/bin/env python3
"""The smallest agent for the command adapter (``mirage run --agent cmd:…``), standard library
only: it reads the probe request from stdin, splits the probe's tag into its fields, and answers
in the probe protocol without looking anything up (a stand-in for your agent's own loop).

    mirage run --agent cmd:examples/own_agent/command_agent.py --trunk-model scripted --limit 2

With ``COMMAND_AGENT_LOG=FILE`` it appends one JSON line per request to FILE: the tag, its
fields as ``split_tag`` reads them, and the request's keys (docs/own_agent.md, "The command
adapter"; tests/examples/test_own_agent_doc.py checks the documentation against these lines).
"""

from __future__ import annotations

import json
import os
import re
import sys

TAG = re.compile(r"^(?P<state>.+?)\.(?P<condition>C0|Cm)\.(?P<question_id>.+)\.r(?P<repeat>\d+)$")
"""A probe's tag, ``STATE.CONDITION.QUESTION_ID.rREPEAT`` (docs/own_agent.md, "Probe tags")."""


def split_tag(tag: str) -> dict[str, str | int]:
    """The state, condition, question id and repeat a probe's tag names."""
    match = TAG.match(tag)
    if match is None:
        raise ValueError(f"not a probe tag: {tag!r}")
    fields: dict[str, str | int] = dict(match.groupdict())
    fields["repeat"] = int(match["repeat"])
    return fields


def main() -> None:
    request = json.load(sys.stdin)
    fields = split_tag(request["tag"])
    log = os.environ.get("COMMAND_AGENT_LOG")
    if log:
        entry = {
            "tag": request["tag"],
            "fields": fields,
            "keys": sorted(request),
            "checkpoint_keys": sorted(request["checkpoint"]),
            "memory_url": request.get("memory_url"),
        }
        with open(log, "a", encoding="utf-8") as file:
            file.write(json.dumps(entry) + "\n")
    reply = "ANSWERABLE=NO\nSOURCE=NONE\nANSWER=NONE"
    json.dump({"reply": reply, "tool_calls": []}, sys.stdout)


if __name__ == "__main__":
    main()
