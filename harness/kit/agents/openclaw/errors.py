"""The one error family of an OpenClaw run: each message is one line naming what to do."""


class OpenClawError(RuntimeError):
    """OpenClaw could not be configured, started or driven; finished probes are kept."""
