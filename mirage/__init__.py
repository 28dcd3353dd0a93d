"""The composition root of mirage: the ``mirage`` command line and the wiring of defaults that
needs several packages. It sits above ``harness``, ``compaction``, ``memory_server`` and
``runtime`` and is the only package that imports all of them (docs/architecture.md).

Importing it applies the offline defaults first (``runtime.offline``, through ``runtime``).
"""

import runtime as _runtime  # noqa: F401  (offline defaults before anything else)
