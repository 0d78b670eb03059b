"""``python -m tallybook``: the ``tallybook`` command, for environments without its script."""

from tallybook.console import main

main()
