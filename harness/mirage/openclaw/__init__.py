"""``mirage run --agent openclaw``: MIRAGE's trunk replayed through the real OpenClaw and the
run around it (``run``, ``trunk``). Driving OpenClaw itself (install, gateway, RPC, config,
state, the probe adapter) is the kit's: ``harness.kit.agents.openclaw``.
"""
