"""docs/table-design.md says what the engines write: the items that carry a TTL,
and what a system account's balance reads (checked on the SQLite table itself)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient

from tallybook.http.app import create_app
from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store.metered import MeteredStore
from tallybook.store.sqlite import SqliteStore
from tallybook.webhooks.sender import Response

DOC = (Path(__file__).resolve().parents[2] / "docs" / "table-design.md").read_text()

#: a kind of item by its key, and the words the doc's TTL row names it by
TTL_KINDS = {
    "IDEM#": "HTTP idempotency rows",
    "N#H#": "notification history",
    "N#K#": "idempotency rows (`retention_days`)",
    "N#A#": "an active notification with an `expires_at`",
    "H#": "settled wallet holds",
    "EVT#": "webhook events",
    "WHDLV#": "deliveries",
    "WHORD#": "worker rows",
    "EVCHG#": "worker rows",
}


class _Accepting:
    """A receiver that accepts every delivery (no network)."""

    def post(self, url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> Response:
        return Response(204, 1)


def _kind(pk: str, sk: str) -> str:
    for prefix in TTL_KINDS:
        if pk.startswith(prefix) or sk.startswith(prefix):
            return prefix
    return f"{pk.split('#')[0]} / {sk.split('#')[0]}"


def test_every_item_with_a_ttl_is_in_the_docs_ttl_row(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    clock = ManualClock()
    ledger = Ledger(SqliteStore(path), clock=clock)
    ledger.programs.create("shop")
    _, key = ledger.keys.create("shop", "read,write")
    with TestClient(create_app(ledger)) as client:
        opened = client.post(
            "/v1/accounts",
            json={"account": "alice"},
            headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "open-alice"},
        )
        assert opened.status_code == 201
    ledger.wallet.credit("shop", "alice", "cash", 500, txn_id="t1")
    ledger.wallet.authorize("shop", "alice", 200, hold_id="h1")
    ledger.wallet.void("shop", "h1")
    ledger.notifications.add("shop", "alice", "Promo", {}, idempotency_key="k1")
    ledger.notifications.add(
        "shop", "alice", "Sale", {}, expires_at=clock.now() + timedelta(days=1)
    )
    ledger.webhooks.create("shop", "https://example.com/hooks")
    ledger.webhooks.worker(sender=_Accepting()).run_once()
    ledger.notifications.add("shop", "alice", "Promo", {"n": 2})  # a change not taken in

    row = next(line for line in DOC.splitlines() if line.startswith("| TTL |"))
    with sqlite3.connect(path) as db:
        items = db.execute("SELECT pk, sk, body FROM items WHERE ttl IS NOT NULL").fetchall()
    kinds = {_kind(pk, sk) for pk, sk, _ in items}
    assert kinds == set(TTL_KINDS), kinds  # every kind above was written
    for kind in kinds:
        assert TTL_KINDS[kind] in row, kind
    assert all(json.loads(body).get("ttl") for _, _, body in items)


def test_a_system_balance_reads_what_the_doc_says(tmp_path: Path) -> None:
    store = MeteredStore(SqliteStore(tmp_path / "t.db"))
    ledger = Ledger(store)
    ledger.programs.create("shop")
    for account in ("a", "b", "c"):
        ledger.accounts.open("shop", account)
        ledger.transactions.credit("shop", account, "points", 5, txn_id=f"t-{account}")
    ledger.programs.get("shop")  # the program is cached, as on every later call
    store.metrics.reset()
    assert ledger.transactions.system_balance("shop", "@external") == {"points": -15}
    snap = store.metrics.snapshot()
    row = next(line for line in DOC.splitlines() if line.startswith("| a system account's"))
    assert "the directory (16 `Query`s)" in row
    assert snap["query"].requests == 16
    assert "plus its 16 shard keys" in row
    # one BatchGetItem of the 3 heads, then its own 16 shard keys
    assert snap["batch_get"].priced_read_units == 3 + 16
