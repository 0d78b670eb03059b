"""The storage-port contract suite (:mod:`tallybook.store.testing`) on every
engine: SQLite, DynamoDB (when ``TALLYBOOK_TEST_DYNAMODB`` is set) and memory."""

from __future__ import annotations

import pytest

from tallybook.store.testing import ItemStoreContract


@pytest.fixture(params=["sqlite", "dynamodb", "memory"])
def engine(request: pytest.FixtureRequest) -> str:
    """The shared ``store`` fixture (``tests/conftest.py``) on all three engines."""
    return str(request.param)


class TestContract(ItemStoreContract):
    """Every case, once per engine."""
