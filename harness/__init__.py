"""harness package of mirage."""

import runtime as _runtime  # noqa: F401  (applies the offline defaults first)
