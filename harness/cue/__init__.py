"""CUE-Mem on the mirage runtime (``mirage cue …``; docs/cue.md). Imports the shared kit
(``harness.kit``: agent adapters, results log, memory endpoint, report and pack-file helpers),
never the MIRAGE protocol.

- ``schema``, ``pack``: the CUE pack format and its loader; ``build``: the bundled pack, built
  offline and byte-identically; ``importer``: the release format in; ``validate``: support and
  no leakage;
- ``textualize``: one memory unit per round at chosen caption levels; ``systems``, ``agent``:
  full context, naive RAG, the memory server, an agent we did not write; ``responder``: what a
  system answers with;
- ``answer``: the prompt and the A–D letter parser; ``records``: the results line;
- ``metrics``, ``stats``: accuracy, Memory Avg, EI-Gap, retrieval; stratified bootstrap + Holm;
- ``config``, ``run``, ``report``, ``figures``, ``cli``: the run and its report.
"""
