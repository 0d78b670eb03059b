"""The ``tallybook`` command: a twin of the Python API.

Each capability registers its commands from its own module; errors from
:mod:`tallybook.errors` become a one-line message and the error's exit code,
never a stack trace.
"""

from __future__ import annotations

import sys

import typer

from tallybook.cli import table
from tallybook.errors import TallybookError

app = typer.Typer(
    name="tallybook",
    help="Rewards, loyalty and wallet ledger. Store: --store URL or $TALLYBOOK_STORE "
    "(default sqlite:///./tallybook.db).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(table.app, name="table")


def main() -> None:
    try:
        app()
    except TallybookError as exc:
        typer.secho(f"error: {exc.message}", err=True, fg=typer.colors.RED)
        sys.exit(exc.exit_code)
