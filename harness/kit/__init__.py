"""The shared evaluation kit: what both protocols (``harness.mirage``, ``harness.cue``) use.

Above: the protocols, each importing the kit and never the other. Below: ``runtime``,
``compaction`` and ``memory_server``. The kit never imports a protocol (tests/test_layers.py).
"""
