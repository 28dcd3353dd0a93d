"""OpenClaw, the MIRAGE paper's own agent, as an agent under test.

So far: ``install`` (a pinned OpenClaw and its Node in mirage's cache, from the npm registry).
Research notes for running it against mirage's model endpoint and memory server are in
docs/openclaw.md.
"""
