"""``tallybook table``: create the DynamoDB table, print its CloudFormation template."""

from __future__ import annotations

import typer

app = typer.Typer(help="Create the storage table (DynamoDB) or print its template.", no_args_is_help=True)
