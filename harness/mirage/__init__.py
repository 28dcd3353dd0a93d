"""The MIRAGE protocol (papers/mirage.txt): evidence packs, the trunk and its checkpoints, one
fresh restore per probe, conditions C0 / Cm, structured-response parsing, deterministic scoring,
the retrieval-path label, diagnostics, statistics and reports.

Above: the composition root (``mirage``). Below: the shared kit (``harness.kit``), ``runtime``,
``compaction`` and ``memory_server``. Never imports ``harness.cue``.
"""
