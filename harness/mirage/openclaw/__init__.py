"""``mirage run --agent openclaw``: MIRAGE's trunk replayed through the real OpenClaw (``trunk``)
and the pieces of its run (``run``: window, answering backbone, family); the run itself is the
OpenClaw run strategy's (``harness.mirage.strategies.openclaw``). Driving OpenClaw itself
(install, gateway, RPC, config, state, the probe adapter) is the kit's:
``harness.kit.agents.openclaw``.
"""
