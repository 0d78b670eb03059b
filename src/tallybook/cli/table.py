"""``tallybook table``: create the DynamoDB table, print its CloudFormation template."""

from __future__ import annotations

import json
import re
from typing import Annotated

import typer

from tallybook.cli.options import StoreOption
from tallybook.errors import ConfigError
from tallybook.store.url import parse_store_url, resolve_store_url

app = typer.Typer(
    help="Create the storage table (DynamoDB) or print its template.", no_args_is_help=True
)


@app.command("create")
def create(
    store: StoreOption = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--no-wait",
            help="Wait until the table and its indexes are ACTIVE and TTL is on.",
        ),
    ] = True,
) -> None:
    """Create the table a store URL names, with its indexes, TTL and stream.

    For dynamodb://TABLE?region=..&endpoint=.. it creates TABLE (key pk/sk,
    global secondary indexes gsi1 and gsi2, on-demand billing, TTL on the
    attribute 'ttl', a stream of new images that webhooks read); on a table that
    exists already it switches TTL and the stream on where they are off, and
    refuses one keyed, indexed, projected or streamed otherwise. For
    sqlite:///PATH.db it creates the file and its schema; memory://NAME needs
    nothing. Safe to run again.

    Example: tallybook table create --store 'dynamodb://ledger?region=eu-west-1'
    """
    url = resolve_store_url(store)
    parsed = parse_store_url(url)
    if parsed.engine == "sqlite":
        from tallybook.store.url import open_store

        open_store(url).close()
        typer.echo(f"initialised SQLite store {parsed.path} ({url}); it needs no table setup")
        return
    if parsed.engine == "memory":  # not a DynamoDB table of that name
        typer.echo(f"{url} is an in-memory store: it needs no table setup")
        return
    from tallybook.store.dynamodb import DynamoStore

    dynamo = DynamoStore(parsed.table, region=parsed.region, endpoint=parsed.endpoint)
    try:
        setup = dynamo.create_table(wait=wait)
    finally:
        dynamo.close()
    typer.echo(setup.summary())
    typer.echo(f"store URL: {dynamo.describe()}")


@app.command("template")
def template(
    table: Annotated[
        str,
        typer.Option("--table", help="Table name to put in the template."),
    ] = "tallybook",
) -> None:
    """Print a CloudFormation template (JSON) for the table.

    The template declares an AWS::DynamoDB::Table with the same key, indexes
    (gsi1, gsi2), on-demand billing, TTL and stream as `tallybook table create`, plus
    point-in-time recovery and a Retain deletion policy. deploy/template.yaml (an
    AWS SAM stack with the HTTP API and the scheduled jobs) declares the same table.

    Example: tallybook table template --table ledger > table.json &&
    aws cloudformation deploy --template-file table.json --stack-name ledger
    """
    from tallybook.store.dynamodb.table import cloudformation_template

    if not _TABLE_NAME.fullmatch(table):
        raise ConfigError(
            f"bad table name {table!r}: DynamoDB takes 3-255 letters, digits, '_', '-' or '.'"
        )
    typer.echo(json.dumps(cloudformation_template(table), indent=2))


#: DynamoDB's rule for table names
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")
