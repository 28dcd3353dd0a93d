"""The trunk T = plant ⊕ filler and its checkpoints (Algorithm 1, lines 1–2), one module per
concern:

- ``states``: the depth profiles (S1-d0, S1-d50k, S1-d80k, S2 and their EIT targets);
- ``driver``: the one walk over the pack's turns that decides when each state is reached (the
  real trunk, OpenClaw's replay and the dry run all use it);
- ``runner``: the built-in runtime's trunk under that driver (each turn, each checkpoint, the
  compaction policy that keeps the branch point);
- ``branches``: every other summary format's compaction states, branched from the pre-compaction
  state on its own workspace version;
- ``checkpoints``: checkpoint folders and families (immutable, content-addressed, read back
  strictly);
- ``summarizers``: who writes each format's summary and what its window makes of it.

Above: the run (``harness.mirage.run``: its family of checkpoints, built, reused or completed
with new branches; the dry run's token-level replay), the strategies, OpenClaw's trunk. Below:
the pack, the runtime's agent loop and compaction, the memory server.
"""
