"""``python -m runtime`` runs the ``mirage`` CLI (used to start child servers portably)."""

from runtime.cli import main

main()
