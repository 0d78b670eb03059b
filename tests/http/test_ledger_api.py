"""Ledger endpoints over HTTP, on both engines: program, accounts, entries, postings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from tallybook.domain.money import MAX_AMOUNT
from tallybook.http.app import create_app
from tallybook.ledger import Ledger
from tallybook.store import keys

#: request-validation cases do not depend on the engine: run them on SQLite only
sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])


def _balance(client, headers, account: str, fund: str = "points") -> int:
    r = client.get(f"/v1/accounts/{account}/balances", headers=headers)
    assert r.status_code == 200, r.text
    return next(b["balance"] for b in r.json()["balances"] if b["fund"] == fund)


def test_program_shows_funds(app_client, read_headers) -> None:
    r = app_client.get("/v1/program", headers=read_headers)
    assert r.status_code == 200
    body = r.json()
    assert body["id"] == "shop"
    assert [f["name"] for f in body["funds"]] == ["points", "cash", "store_credit", "bonus"]


def test_open_account_is_201_then_200(app_client, idem, write_headers) -> None:
    r = app_client.post("/v1/accounts", json={"account": "alice"}, headers=idem())
    assert r.status_code == 201
    assert r.headers["location"] == "/v1/accounts/alice"
    assert {b["fund"]: b["balance"] for b in r.json()["balances"]} == {
        "points": 0,
        "cash": 0,
        "store_credit": 0,
        "bonus": 0,
    }
    again = app_client.post("/v1/accounts", json={"account": "alice"}, headers=idem())
    assert again.status_code == 200
    assert again.json()["account"] == "alice"
    got = app_client.get("/v1/accounts/alice", headers=write_headers)
    assert got.status_code == 200
    assert got.json()["program"] == "shop"


def test_unknown_account_is_404_problem(app_client, read_headers) -> None:
    for path in ("/v1/accounts/nobody", "/v1/accounts/nobody/balances"):
        r = app_client.get(path, headers=read_headers)
        assert r.status_code == 404
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["type"] == "https://tallybook.dev/problems/not-found"
    r = app_client.get("/v1/accounts/nobody/entries?fund=points", headers=read_headers)
    assert r.status_code == 404


def test_a_damaged_program_item_is_a_409_problem_naming_it(ledger, read_headers, idem) -> None:
    """Every request of the program answered 500 "an unexpected error occurred"."""
    ledger.accounts.open("shop", "alice")
    item = dict(ledger.store.get(keys.program("shop")))
    item["funds"] = [{**f, "unit": 5} if f["name"] == "cash" else f for f in item["funds"]]
    ledger.store.put(item)
    fresh = Ledger(ledger.store, clock=ledger.clock)  # no cached copy of the program
    credit = {"type": "credit", "account": "alice", "fund": "cash", "amount": 5}
    with TestClient(create_app(fresh)) as client:
        answers = [
            client.get("/v1/accounts/alice/balances", headers=read_headers),
            client.get("/v1/program", headers=read_headers),
            client.post("/v1/transactions", json=credit, headers=idem()),
        ]
    for r in answers:
        assert r.status_code == 409, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["type"] == "https://tallybook.dev/problems/damaged-item"
        assert r.json()["detail"] == (
            "program shop: its stored item PROG#shop / PROG is damaged: fund 2: unit is not text"
        )
    assert ledger.accounts.get("shop", "alice").fund("cash").balance == 0


def test_credit_debit_adjust_and_raw(
    app_client, idem, write_headers, admin_headers, open_account
) -> None:
    open_account("alice")
    posts = [
        {"type": "credit", "account": "alice", "fund": "cash", "amount": 1000, "order_id": "o-1"},
        {"type": "debit", "account": "alice", "fund": "cash", "amount": 300},
        {"type": "adjust", "account": "alice", "fund": "cash", "amount": -50},
        {
            "type": "raw",
            "legs": [
                {"account": "alice", "fund": "points", "amount": 40},
                {"account": "@issuance", "fund": "points", "amount": -40},
            ],
            "description": "welcome points",
            "metadata": {"campaign": "spring"},
        },
    ]
    for i, body in enumerate(posts):
        headers = admin_headers if body["type"] == "raw" else write_headers  # @issuance leg
        r = app_client.post("/v1/transactions", json=body, headers=idem(headers, f"t-{i}"))
        assert r.status_code == 201, r.text
        assert r.json()["id"] == f"t-{i}"
        assert r.headers["location"] == f"/v1/transactions/t-{i}"
    assert _balance(app_client, write_headers, "alice", "cash") == 650
    assert _balance(app_client, write_headers, "alice", "points") == 40
    raw = app_client.get("/v1/transactions/t-3", headers=write_headers).json()
    assert raw["type"] == "raw"
    assert raw["metadata"] == {"campaign": "spring"}
    assert raw["legs"][0] == {
        "account": "alice",
        "fund": "points",
        "unit": "points",
        "amount": 40,
        "balance": 40,
        "seq": 1,
    }


def test_insufficient_funds_is_422_and_writes_nothing(
    app_client, idem, write_headers, open_account, credit
) -> None:
    open_account("alice")
    credit("alice", 100)
    r = app_client.post(
        "/v1/transactions",
        json={"type": "debit", "account": "alice", "fund": "points", "amount": 101},
        headers=idem(key="too-much"),
    )
    assert r.status_code == 422
    assert r.json()["type"] == "https://tallybook.dev/problems/insufficient-funds"
    assert _balance(app_client, write_headers, "alice") == 100
    assert app_client.get("/v1/transactions/too-much", headers=write_headers).status_code == 404


@sqlite_only
def test_unbalanced_raw_posting_is_refused(app_client, idem, open_account) -> None:
    open_account("alice")
    r = app_client.post(
        "/v1/transactions",
        json={"type": "raw", "legs": [{"account": "alice", "fund": "points", "amount": 5}]},
        headers=idem(),
    )
    assert r.status_code == 422
    assert r.json()["type"] == "https://tallybook.dev/problems/validation"


@sqlite_only
@pytest.mark.parametrize("amount", [0, -1, MAX_AMOUNT + 1, 1.5, "10", True, None], ids=repr)
def test_amount_bounds(app_client, idem, open_account, amount) -> None:
    open_account("alice")
    r = app_client.post(
        "/v1/transactions",
        json={"type": "credit", "account": "alice", "fund": "points", "amount": amount},
        headers=idem(),
    )
    assert r.status_code == 422
    problem = r.json()
    assert problem["errors"][0]["loc"][-1] == "amount"


def test_largest_amount_is_accepted(app_client, idem, write_headers, open_account) -> None:
    open_account("alice")
    r = app_client.post(
        "/v1/transactions",
        json={"type": "credit", "account": "alice", "fund": "cash", "amount": MAX_AMOUNT},
        headers=idem(),
    )
    assert r.status_code == 201
    assert _balance(app_client, write_headers, "alice", "cash") == MAX_AMOUNT


@sqlite_only
def test_posting_needs_idempotency_key(app_client, write_headers, open_account) -> None:
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 1}
    r = app_client.post("/v1/transactions", json=body, headers=write_headers)
    assert r.status_code == 422
    assert "Idempotency-Key" in r.json()["detail"]
    bad = {**write_headers, "Idempotency-Key": "has space"}
    assert app_client.post("/v1/transactions", json=body, headers=bad).status_code == 422


def test_replay_returns_same_status_and_body(app_client, idem, write_headers, open_account) -> None:
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 7}
    first = app_client.post("/v1/transactions", json=body, headers=idem(key="k-1"))
    second = app_client.post("/v1/transactions", json=body, headers=idem(key="k-1"))
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert "idempotent-replayed" not in first.headers
    assert second.headers["idempotent-replayed"] == "true"
    assert _balance(app_client, write_headers, "alice") == 7


def test_replay_ignores_json_formatting(app_client, idem, open_account) -> None:
    open_account("alice")
    compact = b'{"type":"credit","account":"alice","fund":"points","amount":7}'
    spaced = b'{ "amount": 7, "fund": "points", "account": "alice", "type": "credit" }'
    h = {**idem(key="k-2"), "content-type": "application/json"}
    assert app_client.post("/v1/transactions", content=compact, headers=h).status_code == 201
    r = app_client.post("/v1/transactions", content=spaced, headers=h)
    assert r.status_code == 201
    assert r.headers["idempotent-replayed"] == "true"


def test_same_key_other_body_is_409(app_client, idem, write_headers, open_account) -> None:
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 7}
    assert (
        app_client.post("/v1/transactions", json=body, headers=idem(key="k-3")).status_code == 201
    )
    other = {**body, "amount": 8}
    r = app_client.post("/v1/transactions", json=other, headers=idem(key="k-3"))
    assert r.status_code == 409
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["type"] == "https://tallybook.dev/problems/idempotency-conflict"
    assert _balance(app_client, write_headers, "alice") == 7


def test_engine_replay_after_stored_response_expired(
    app_client, idem, ledger, clock, write_headers, open_account
) -> None:
    """Past the 24 h TTL the transaction record still makes the posting at-most-once."""
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 5}
    first = app_client.post("/v1/transactions", json=body, headers=idem(key="old"))
    from tallybook.store import keys

    ledger.store.delete(keys.idempotent_response("shop", "old"))  # as if the TTL had passed
    again = app_client.post("/v1/transactions", json=body, headers=idem(key="old"))
    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    other = app_client.post("/v1/transactions", json={**body, "amount": 6}, headers=idem(key="old"))
    ledger.store.delete(keys.idempotent_response("shop", "old"))
    assert other.status_code == 409
    assert _balance(app_client, write_headers, "alice") == 5


def test_input_errors_are_not_stored_but_refusals_are(
    app_client, idem, open_account, credit
) -> None:
    """A request refused before the ledger decided (unknown account) runs again on a
    retry; an insufficient-funds refusal is the key's answer for ever (issue 17)."""
    body = {"type": "debit", "account": "alice", "fund": "points", "amount": 10}
    assert (
        app_client.post("/v1/transactions", json=body, headers=idem(key="d-1")).status_code == 404
    )
    open_account("alice")
    assert (
        app_client.post("/v1/transactions", json=body, headers=idem(key="d-1")).status_code == 422
    )
    credit("alice", 10)
    r = app_client.post("/v1/transactions", json=body, headers=idem(key="d-1"))
    assert r.status_code == 422
    assert r.headers["idempotent-replayed"] == "true"


def test_transactions_by_id_order_and_account(app_client, idem, read_headers, open_account) -> None:
    open_account("alice")
    for i in range(3):
        body = {
            "type": "credit",
            "account": "alice",
            "fund": "points",
            "amount": 10 + i,
            "order_id": "order-9" if i < 2 else "order-10",
        }
        assert (
            app_client.post("/v1/transactions", json=body, headers=idem(key=f"c{i}")).status_code
            == 201
        )
    r = app_client.get("/v1/transactions/c1", headers=read_headers)
    assert r.status_code == 200
    assert r.json()["legs"][0]["amount"] == 11
    assert app_client.get("/v1/transactions/nope", headers=read_headers).status_code == 404
    by_order = app_client.get("/v1/orders/order-9/transactions", headers=read_headers).json()
    assert sorted(t["id"] for t in by_order["transactions"]) == ["c0", "c1"]
    none = app_client.get("/v1/orders/unknown/transactions", headers=read_headers)
    assert none.status_code == 200
    assert none.json() == {"transactions": []}

    seen: list[str] = []
    cursor = None
    while True:
        url = "/v1/accounts/alice/transactions?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = app_client.get(url, headers=read_headers).json()
        seen += [t["id"] for t in page["transactions"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert seen == ["c2", "c1", "c0"]
    assert app_client.get("/v1/accounts/bob/transactions", headers=read_headers).status_code == 404


def test_entries_order_cursor_and_time_filters(
    app_client, clock, read_headers, open_account, credit
) -> None:
    open_account("alice")
    start = clock.now()
    for i in range(5):
        credit("alice", 1 + i, txn_id=f"e{i}")
        clock.advance(timedelta(seconds=10))

    def entries(query: str) -> dict:
        r = app_client.get(f"/v1/accounts/alice/entries?fund=points&{query}", headers=read_headers)
        assert r.status_code == 200, r.text
        return r.json()

    newest = entries("limit=10")
    assert [e["txn_id"] for e in newest["entries"]] == ["e4", "e3", "e2", "e1", "e0"]
    assert [e["balance"] for e in newest["entries"]] == [15, 10, 6, 3, 1]
    assert newest["cursor"] is None

    oldest, cursor = [], None
    while True:
        page = entries("order=oldest&limit=2" + (f"&cursor={cursor}" if cursor else ""))
        oldest += [e["seq"] for e in page["entries"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert oldest == [1, 2, 3, 4, 5]

    since = (start + timedelta(seconds=10)).isoformat().replace("+00:00", "Z")
    until = (start + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    window = entries(f"order=oldest&since={since}&until={until}")
    assert [e["txn_id"] for e in window["entries"]] == ["e1", "e2"]
    naive = entries(f"order=oldest&since={since[:-1]}&until={until[:-1]}")
    assert naive["entries"] == window["entries"]


@sqlite_only
@pytest.mark.parametrize(
    "query",
    [
        "fund=points&limit=0",
        "fund=points&limit=1001",
        "fund=points&order=sideways",
        "",
        "fund=Points",
        "fund=points&since=2030-01-01T00:00:00Z&until=2020-01-01T00:00:00Z",
        "fund=points&since=9999-12-31T23:59:59-05:00",
        "fund=points&since=not-a-date",
    ],
)
def test_entries_bad_queries_are_422(app_client, read_headers, open_account, query) -> None:
    open_account("alice")
    r = app_client.get(f"/v1/accounts/alice/entries?{query}", headers=read_headers)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")


def test_entries_unknown_fund_404_and_bad_cursor_400(
    app_client, read_headers, open_account
) -> None:
    open_account("alice")
    r = app_client.get("/v1/accounts/alice/entries?fund=gems", headers=read_headers)
    assert r.status_code == 404
    r = app_client.get("/v1/accounts/alice/entries?fund=points&cursor=%%%", headers=read_headers)
    assert r.status_code == 400
    assert r.json()["type"] == "https://tallybook.dev/problems/store-validation"


def test_transfer_moves_all_or_nothing(
    app_client, idem, write_headers, open_account, credit
) -> None:
    open_account("alice")
    open_account("bob")
    credit("alice", 50)
    ok = app_client.post(
        "/v1/transfers",
        json={"source": "alice", "destination": "bob", "fund": "points", "amount": 30},
        headers=idem(key="tr-1"),
    )
    assert ok.status_code == 201, ok.text
    assert ok.json()["type"] == "transfer"
    too_much = app_client.post(
        "/v1/transfers",
        json={"source": "alice", "destination": "bob", "fund": "points", "amount": 21},
        headers=idem(),
    )
    assert too_much.status_code == 422
    to_nobody = app_client.post(
        "/v1/transfers",
        json={"source": "alice", "destination": "ghost", "fund": "points", "amount": 1},
        headers=idem(),
    )
    assert to_nobody.status_code == 404
    same = app_client.post(
        "/v1/transfers",
        json={"source": "alice", "destination": "alice", "fund": "points", "amount": 1},
        headers=idem(),
    )
    assert same.status_code == 422
    assert _balance(app_client, write_headers, "alice") == 20
    assert _balance(app_client, write_headers, "bob") == 30


@sqlite_only
def test_unknown_fields_and_types_are_422(app_client, idem, open_account) -> None:
    open_account("alice")
    for body in (
        {"type": "credit", "account": "alice", "fund": "points", "amount": 1, "extra": 1},
        {"type": "refund", "account": "alice", "fund": "points", "amount": 1},
        {"type": "credit", "account": "a/b", "fund": "points", "amount": 1},
        {"type": "credit", "account": "alice", "fund": "points", "amount": 1, "metadata": {"k": 1}},
        [],
        "credit",
    ):
        r = app_client.post("/v1/transactions", json=body, headers=idem())
        assert r.status_code == 422, (body, r.text)
