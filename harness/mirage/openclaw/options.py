"""The options of ``mirage run`` that belong to OpenClaw, checked with the rest of the run's
options (``RunConfig``), before any work.

Above: ``RunConfig``'s check of the named agents' options (``harness.mirage.config``).
Below: the kit's OpenClaw config loader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

AGENT = "openclaw"
"""Its ``--agent`` value."""


class AgentOptions(Protocol):
    """What the check reads of the run's options."""

    agent: str | None
    concurrency: int
    summary_formats: list[str]
    openclaw_config: Path | None


def check_options(options: AgentOptions) -> None:
    """``--openclaw-config`` only with ``--agent openclaw``, which runs one probe at a time and
    compacts with OpenClaw's own format; a bad settings file fails now, before any work."""
    from harness.kit.agents.openclaw.config import load_user_config

    if options.agent != AGENT:
        if options.openclaw_config is not None:
            raise ValueError("--openclaw-config applies only with --agent openclaw")
        return
    if options.concurrency != 1:
        raise ValueError("--agent openclaw runs one probe at a time: use --concurrency 1")
    if options.summary_formats != ["verbatim"]:
        raise ValueError(
            "--summary-format applies to mirage's own compaction; OpenClaw compacts with its "
            "own format"
        )
    if options.openclaw_config is not None:
        load_user_config(options.openclaw_config)
