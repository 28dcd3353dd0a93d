"""The evaluation harness: the shared kit (``harness.kit``) and one package per protocol,
MIRAGE (``harness.mirage``) and CUE-Mem (``harness.cue``); each protocol imports the kit and
never the other, the kit imports no protocol (docs/architecture.md)."""

import runtime as _runtime  # noqa: F401  (applies the offline defaults first)
