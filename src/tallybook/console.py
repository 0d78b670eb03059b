"""The ``tallybook`` console script: says which extra to install when one is missing.

``pip install tallybook`` gives the library only; the command needs the ``cli``
extra (typer, rich) and ``tallybook serve`` the ``server`` extra too. Without
them the command prints one line naming what to install instead of an
ImportError's stack trace (``tallybook serve`` checks the server extra itself).
"""

from __future__ import annotations

import importlib.util
import sys

from tallybook._version import __version__

#: extra -> the modules it brings
EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("typer", "rich"),
    "server": (
        "fastapi",
        "uvicorn",
        "pydantic",
        "mangum",
        "jinja2",
        "multipart",
        "prometheus_client",
        "pythonjsonlogger",
        "fastapi_offline",
        "aws_lambda_powertools",
    ),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported."""
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def install_hint(extra: str) -> str:
    """One line: what is missing and the pip command that installs it."""
    return (
        f"error: this needs tallybook's {extra} extra ({', '.join(missing(extra))} "
        f"not installed): pip install 'tallybook[{extra}]'"
    )


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        print(f"tallybook {__version__}")
        return
    if missing("cli"):
        print(install_hint("cli"), file=sys.stderr)
        sys.exit(1)
    from tallybook.cli import main as cli_main

    cli_main()
