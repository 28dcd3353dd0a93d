"""OpenClaw, the MIRAGE paper's own agent, as an agent under test (docs/openclaw.md).

``install`` (a pinned OpenClaw and its Node in mirage's cache, from the npm registry);
``config`` (its generated, merged, validated ``openclaw.json``); ``gateway`` and ``rpc`` (the
gateway process, its chat endpoint and WebSocket RPC); ``endpoint`` (mirage's model endpoint
routing ``trunk``/``answer``/``housekeeping``); ``harness`` (all of it running for one run);
``trunk`` (the trunk replay and checkpoints); ``agent`` (a probe on a fresh fork);
``run`` (``mirage run --agent openclaw``).
"""
