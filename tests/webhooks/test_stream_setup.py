"""``table create`` turns the stream on, also for a table made before webhooks."""

from __future__ import annotations

import os
import uuid

import pytest

from tallybook.errors import ConfigError
from tallybook.ledger import Ledger
from tallybook.store.dynamodb import DynamoStore
from tallybook.store.dynamodb.table import table_definition
from tallybook.webhooks.stream import stream_reader

DYNAMODB_ENDPOINT = os.environ.get("TALLYBOOK_TEST_DYNAMODB", "")


@pytest.mark.skipif(not DYNAMODB_ENDPOINT, reason="DynamoDB Local not configured")
def test_table_create_enables_the_stream_on_an_older_table() -> None:
    store = DynamoStore(f"tb-old-{uuid.uuid4().hex[:8]}", endpoint=DYNAMODB_ENDPOINT)
    older = table_definition(store.table)
    del older["StreamSpecification"]
    store.client.create_table(**older)
    try:
        with pytest.raises(ConfigError, match="tallybook table create"):
            Ledger(store).webhooks.worker().take_in({})
        store.create_table()
        desc = store.client.describe_table(TableName=store.table)["Table"]
        assert desc["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
        reader = stream_reader(store)
        assert reader is not None
        assert reader.read(lambda events: len(events)) == 0
    finally:
        store.delete_table()


@pytest.mark.parametrize("command", ["create", "template"])
def test_table_help_names_the_stream(command: str) -> None:
    """README and docs/webhooks.md: the table has the stream webhooks read, and `table
    create` turns it on for an older table (it said such a table was left as it is)."""
    from typer.testing import CliRunner

    from tallybook.cli import app

    assert "StreamSpecification" in table_definition("t-help")
    output = CliRunner().invoke(app, ["table", command, "--help"], terminal_width=200).output
    text = " ".join(output.split())
    assert "stream" in text
    if command == "create":
        assert "exists already it switches TTL and the stream on" in text
