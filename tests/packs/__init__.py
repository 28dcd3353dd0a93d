"""Pack tests. ``UNLOCKED``: a ``copytree`` ignore that leaves out a bundled pack's SHA256SUMS, for
tests that edit the copy to exercise the pack's own checks (with the list, any edit would be
refused by its checksum first)."""

import shutil

from harness.kit.packsums import SUMS_FILE

UNLOCKED = shutil.ignore_patterns(SUMS_FILE)
