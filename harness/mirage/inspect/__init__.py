"""MIRAGE in the Inspect ecosystem (``pip install -e ".[inspect]"``; docs/inspect.md).

Above: ``mirage export inspect`` (``mirage.cli.export``) and the ``mirage/probe`` Inspect task
(``mirage.inspect_tasks``). Below: MIRAGE's records, aggregation, probe plan and scoring, and
Inspect's own API (``inspect_ai``), which only the modules of this package import — so the
default install, which has no inspect-ai, never loads it.

- ``scores``: one probe record as an Inspect sample score, and a report's cells as Inspect
  results (shared by the export and the task, so both logs read alike);
- ``export``: a result folder as one Inspect eval log, written with ``inspect_ai.log``;
- ``task``: the probes of a built checkpoint family as an Inspect task whose scorer writes
  mirage's own records.
"""
