"""``python -m mirage`` runs the ``mirage`` command line (used to start child servers portably,
e.g. the memory server's stdio process: ``python -m mirage memory serve …``)."""

from mirage.cli import main

main()
