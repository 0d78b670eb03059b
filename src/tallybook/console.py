"""The ``tallybook`` console script: says which extra to install when one is missing.

``pip install tallybook`` gives the library only; the command needs the ``cli``
extra (typer, rich) and ``tallybook serve`` the ``server`` extra too. Without
them the command prints one line naming what to install instead of an
ImportError's stack trace (``tallybook serve`` checks the server extra itself).
"""

from __future__ import annotations

import sys

from tallybook._version import __version__
from tallybook.extras import install_hint, missing


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        print(f"tallybook {__version__}")
        return
    if missing("cli"):
        print(install_hint("cli"), file=sys.stderr)
        sys.exit(1)
    from tallybook.cli import main as cli_main

    cli_main()
