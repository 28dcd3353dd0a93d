"""OpenClaw, the MIRAGE paper's own agent, as an agent under test (docs/openclaw.md).

``install`` (a pinned OpenClaw and its Node in mirage's cache, from the npm registry);
``config`` (its generated, merged, validated ``openclaw.json``); ``gateway`` and ``rpc`` (the
gateway process, its chat endpoint and WebSocket RPC); ``endpoint`` (mirage's model endpoint
routing ``trunk``/``answer``/``housekeeping``); ``harness`` (all of it running for one run);
``state`` (OpenClaw's session store and memory files); ``agent`` (a probe on a fresh fork).
MIRAGE's trunk replay and ``mirage run --agent openclaw`` are ``harness.mirage.openclaw``.
"""
