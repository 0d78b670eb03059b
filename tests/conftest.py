"""Engine fixtures shared by every test ring.

``store`` is parametrised over both engines: SQLite (a temp file) always, and
DynamoDB when ``TALLYBOOK_TEST_DYNAMODB`` names an endpoint (``.ci/run`` starts
DynamoDB Local and sets it). Each DynamoDB test gets a fresh table.
:func:`make_store` also makes the in-memory engine (``"memory"``). A module
marked ``pytestmark = pytest.mark.unit`` tests services, not storage: it runs
on memory in place of SQLite (and on DynamoDB as before), which makes the
SQLite half of the suite faster; what SQLite itself does is covered by the
contract suite (``tests/store/test_contract.py``) and the integration tests.

Test SQLite stores run at ``synchronous=normal`` (see :func:`make_store`), test
DynamoDB tables have no stream unless the test reads it (then each is in a
database of its own, see :func:`_dynamodb_store`), and the suite runs its slow
cases first, then the DynamoDB ones (see :func:`_run_order`).
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.port import ItemStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: no per-example wall-clock deadline (hypothesis' default is 200 ms): on the
#: loaded 2-core CI machine pure property tests took 300-600 ms for an example
#: and failed with DeadlineExceeded / FlakyFailure; what they check is not speed
settings.register_profile("tallybook", deadline=None)
settings.load_profile("tallybook")

DYNAMODB_ENDPOINT = os.environ.get("TALLYBOOK_TEST_DYNAMODB", "")
#: where the tables with a stream go (see :func:`_dynamodb_store`)
STREAMS_ENDPOINT = os.environ.get("TALLYBOOK_TEST_DYNAMODB_STREAMS") or DYNAMODB_ENDPOINT
ENGINES = ["sqlite", "dynamodb"]
#: the engines of a ``unit`` test: memory instead of SQLite.
#: ``TALLYBOOK_TEST_UNIT_ENGINE=sqlite`` puts SQLite back, to time the unit
#: tests on both (docs/architecture.md, "Tests")
UNIT_ENGINES = [os.environ.get("TALLYBOOK_TEST_UNIT_ENGINE", "memory"), "dynamodb"]

if DYNAMODB_ENDPOINT:
    # DynamoDB has no default server key for webhook secrets (SQLite keeps a key
    # file beside the database); CLI subprocesses inherit it
    os.environ.setdefault("TALLYBOOK_WEBHOOK_KEY", "tallybook-test-webhook-key-0123456789")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "unit: a service test that needs no real engine (memory replaces SQLite)"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A ``unit`` test's ``engine`` (and so its ``store``) is memory or DynamoDB.

    Added as a parametrize mark before pytest reads the marks, so it takes the
    place of the ``engine`` fixture's own parameters, as a test's explicit
    ``parametrize("engine", ...)`` does (and one of those still wins)."""
    definition = metafunc.definition
    if "engine" not in metafunc.fixturenames or not definition.get_closest_marker("unit"):
        return
    if any("engine" in str(m.args[0]) for m in definition.iter_markers("parametrize")):
        return
    definition.add_marker(pytest.mark.parametrize("engine", UNIT_ENGINES))


def _run_order(item: pytest.Item) -> int:
    """0: slow cases, 1: other DynamoDB cases, 2: the rest.

    xdist hands tests out in collection order; started last, the few long
    tests left one worker busy for minutes while the others sat idle. Run
    first, the short cases fill in around them."""
    if item.get_closest_marker("slow"):
        return 0
    params = getattr(item, "callspec", None)
    return 1 if params is not None and params.params.get("engine") == "dynamodb" else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_run_order)  # stable: file order within each group


@functools.cache
def _dynamodb_client() -> DynamoDBClient:
    """One client per test process, made by DynamoStore as it makes its own
    (same retries, timeouts and pool): a new one costs about 0.1 s of CPU, on
    each of several hundred DynamoDB cases. A store given a client does not
    close it."""
    from tallybook.store.dynamodb import DynamoStore

    return DynamoStore("tb-test", region="us-east-1", endpoint=DYNAMODB_ENDPOINT).client


def _dynamodb_store(stream: bool) -> ItemStore:
    """A fresh table, as ``tallybook table create`` makes it, with or without its stream.

    DynamoDB Local keeps a stream's records after the table is deleted, and
    every request on a stream table of that database slows down with all of
    them (a put: 6 ms fresh, 34 ms after the suite's webhook tests). Only the
    webhook tests read the stream: their tables go to
    ``TALLYBOOK_TEST_DYNAMODB_STREAMS``, an instance with a database per region
    (scripts/test.sh starts it), each in a region of its own, so each starts
    clean. Every other table is made without a stream (reads and writes do
    not depend on it)."""
    from tallybook.store.dynamodb import DynamoStore

    table = f"tb-test-{uuid.uuid4().hex[:12]}"
    if stream:
        # a client of its own (its region), closed with the store
        region = f"tb-{uuid.uuid4().hex[:12]}"
        store = DynamoStore(table, region=region, endpoint=STREAMS_ENDPOINT)
    else:
        store = DynamoStore(
            table, region="us-east-1", endpoint=DYNAMODB_ENDPOINT, client=_dynamodb_client()
        )
    store.create_table(stream=stream)
    return store


def make_store(engine: str, tmp_path: Path, *, stream: bool = True) -> ItemStore:
    """A new store of ``engine``; ``stream``: a DynamoDB table keeps its stream."""
    if engine == "sqlite":
        from tallybook.store.sqlite import SqliteStore

        # normal, not the durable default full: no fsync per commit, which only an
        # OS crash or power cut tells apart. tests/store/test_sqlite_durability.py
        # pins the default and SIGKILLs writers at both settings on its own stores.
        return SqliteStore(tmp_path / "tallybook.db", synchronous="normal")
    if engine == "memory":
        from tallybook.store.memory import MemoryStore

        return MemoryStore()
    if not DYNAMODB_ENDPOINT:
        pytest.skip("DynamoDB Local not configured (set TALLYBOOK_TEST_DYNAMODB)")
    return _dynamodb_store(stream)


def reads_the_stream(node: pytest.Item) -> bool:
    """Whether a test reads the table's stream: the webhook tests, wherever they are."""
    return "webhook" in node.nodeid


def store_url(engine: str, store: ItemStore) -> str:
    """A URL that opens the same store again (for processes and the CLI)."""
    return store.describe()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ItemStore]:
    s = make_store(engine, tmp_path, stream=reads_the_stream(request.node))
    yield s
    if engine == "dynamodb":
        from tallybook.store.dynamodb import DynamoStore

        assert isinstance(s, DynamoStore)
        s.delete_table()
    s.close()


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock starting now (so TTL-based reads behave as in production)."""
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def ledger(store: ItemStore, clock: ManualClock) -> Ledger:
    """A ledger on the engine under test, with program ``shop`` (default funds)."""
    led = Ledger(store, clock=clock)
    led.programs.create("shop")
    return led
