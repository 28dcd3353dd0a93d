"""The probes of Algorithm 1 (lines 3–9): for every state × condition × question × repeat, a
fresh restore, one probe turn, one scored record; one module per concern:

- ``loop``: the probe plan (state-major) and the concurrent probe loop;
- ``records``: the probe record (schema 3), built and rescored;
- ``retrieval_paths``: the four-way retrieval path of a probe and the evidence it was decided on
  (by the artifacts' content keywords, ``harness.mirage.protocol.keywords``);
- ``visibility``: where each artifact stands in each state (verbatim, summary, notes, nowhere);
- ``retry``: ``--retry-errors``' target (the failed probes, swapped in atomically);
- ``repath``: ``mirage rescore``'s upgrade of older two-way paths from the checkpoints.

Above: the run (``harness.mirage.run.probing``: each answerer's probes, state by state, with the
memory server pinned to the checkpoint's workspace version) and its strategies, the reports.
Below: the kit's agents and results log, the trunk's checkpoints, scoring.
"""
