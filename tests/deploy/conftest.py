"""Fixtures of the deployment tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tallybook import lambda_handler
from tallybook.http import app as app_module
from tallybook.ledger import Ledger
from tallybook.store.port import ItemStore


@pytest.fixture
def api(ledger: Ledger, store: ItemStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The handler's app on the test's store; yields a read/write key of program shop."""
    monkeypatch.setenv("TALLYBOOK_STORE", store.describe())
    monkeypatch.setattr(app_module, "_app", None)
    monkeypatch.setattr(lambda_handler, "_adapter", None)
    _, secret = ledger.keys.create("shop", "read,write", None)
    yield secret
    app_module._app = None
