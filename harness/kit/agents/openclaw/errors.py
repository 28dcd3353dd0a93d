"""The one error family of an OpenClaw run: each message is one line naming what to do."""

from harness.kit.agents.base import AgentFailure


class OpenClawError(AgentFailure):
    """OpenClaw could not be configured, started or driven; finished probes are kept."""
