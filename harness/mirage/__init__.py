"""The MIRAGE protocol: retrieval paths, visibility of planted evidence, and (after the layout
move) the run, checkpoints, probes, records, metrics and reports."""
