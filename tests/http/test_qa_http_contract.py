"""Black-box QA of the HTTP contract: what a route answers is what it declares,
bad input is a 4xx problem (never a 500, never a half-applied write)."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tallybook.errors import ValidationError
from tallybook.ledger import Ledger
from tallybook.services.wallet.charges import FakeChargeProcessor
from tallybook.store.queries import encode_cursor
from tallybook.store.records.responses import response_key

Headers = dict[str, str]
sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])


def _declared(client: TestClient, method: str, path: str, status: int) -> bool:
    spec = client.get("/openapi.json").json()
    return str(status) in spec["paths"][path][method]["responses"]


@sqlite_only
def test_an_earn_replay_answers_a_declared_200_and_a_redeem_replay_its_201(
    app_client: TestClient,
    ledger: Ledger,
    admin_headers: Headers,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    rules = {"earn": {"points_per_unit": 1, "unit_size": 100}}
    assert app_client.put("/v1/program/loyalty", json=rules, headers=admin_headers).is_success
    open_account("alice")
    earn = {"order_id": "o-1", "amount": 10_000}
    first = app_client.post("/v1/accounts/alice/earn", json=earn, headers=idem())
    assert first.status_code == 201, first.text
    again = app_client.post("/v1/accounts/alice/earn", json=earn, headers=idem())
    assert again.status_code == 200, again.text
    assert _declared(app_client, "post", "/v1/accounts/{account}/earn", 200)
    # with the same Idempotency-Key, the stored 201 was replayed instead (200 without one)
    keyed = {"order_id": "o-2", "amount": 10_000}
    first = app_client.post("/v1/accounts/alice/earn", json=keyed, headers=idem(key="e-2"))
    assert first.status_code == 201, first.text
    for headers in (idem(key="e-2"), idem(), write_headers):
        again = app_client.post("/v1/accounts/alice/earn", json=keyed, headers=headers)
        assert again.status_code == 200, again.text
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.json() == first.json()
    # the earn is keyed by its order id alone (docs/http.md): the key on another order
    other = app_client.post(
        "/v1/accounts/alice/earn", json={"order_id": "o-3", "amount": 100}, headers=idem(key="e-2")
    )
    assert other.status_code == 201, other.text

    redeem = {"points": 1, "reward_id": "mug"}
    first = app_client.post("/v1/accounts/alice/redeem", json=redeem, headers=idem(key="r-1"))
    assert first.status_code == 201, first.text
    again = app_client.post("/v1/accounts/alice/redeem", json=redeem, headers=idem(key="r-1"))
    assert again.status_code == 201, again.text  # the stored response, for 24 hours
    # after 24 hours the stored response is gone and the ledger answers the replay
    ledger.store.delete(response_key("shop", "r-1"))
    # ... with the same status as the original
    again = app_client.post("/v1/accounts/alice/redeem", json=redeem, headers=idem(key="r-1"))
    assert again.status_code == 201, again.text
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()


@sqlite_only
def test_a_declined_charge_answers_a_declared_402(
    app_client: TestClient,
    ledger: Ledger,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    ledger.wallet.processor = FakeChargeProcessor("decline")
    open_account("alice")
    body = {"amount": 10, "on_shortfall": "charge"}
    r = app_client.post("/v1/accounts/alice/wallet/debits", json=body, headers=idem())
    assert r.status_code == 402, r.text
    assert _declared(app_client, "post", "/v1/accounts/{account}/wallet/debits", 402)


def _nested(depth: int) -> dict[str, Any]:
    """A JSON object ``depth`` levels deep, itself included."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@sqlite_only
def test_a_payload_nested_too_deeply_is_refused_and_nothing_is_written(
    app_client: TestClient,
    write_headers: Headers,
    open_account: Callable[..., dict[str, Any]],
) -> None:
    open_account("alice")
    url = "/v1/accounts/alice/notifications"
    for payload in (_nested(17), _nested(400), {"a": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}):
        r = app_client.post(url, json={"type": "Promo", "payload": payload}, headers=write_headers)
        assert r.status_code == 422, r.text
        assert "16 levels" in r.json()["detail"]
    listed = app_client.get(url, headers=write_headers)
    assert listed.status_code == 200, listed.text
    assert listed.json()["notifications"] == []
    ok = app_client.post(url, json={"type": "Promo", "payload": _nested(16)}, headers=write_headers)
    assert ok.status_code == 201, ok.text
    assert app_client.get(url, headers=write_headers).status_code == 200


@sqlite_only
def test_sns_json_nested_too_deeply_is_a_rejected_message(
    app_client: TestClient, write_headers: Headers
) -> None:
    headers = {**write_headers, "Content-Type": "text/plain"}
    deep = "[" * 100_000 + "]" * 100_000
    r = app_client.post("/v1/events/sns", content=deep, headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("not-json")
    envelope = {"Type": "Notification", "MessageId": "m-1", "Message": deep}
    r = app_client.post("/v1/events/sns", content=json.dumps(envelope), headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("not-json")


@sqlite_only
@pytest.mark.parametrize("key", ["my key 1", "a" * 129, "-leading-dash", "a/b"])
def test_an_invalid_optional_idempotency_key_is_refused_not_ignored(
    app_client: TestClient, admin_headers: Headers, key: str
) -> None:
    """POST /v1/webhooks honours an optional Idempotency-Key through the middleware:
    one that breaks the documented pattern used to be ignored, so every retry
    created another subscription."""
    headers = {**admin_headers, "Idempotency-Key": key}
    body = {"url": "https://example.com/hook"}
    for _ in range(2):
        r = app_client.post("/v1/webhooks", json=body, headers=headers)
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["errors"][0]["loc"] == ["header", "Idempotency-Key"]
    assert app_client.get("/v1/webhooks", headers=admin_headers).json()["subscriptions"] == []
    ok = {**admin_headers, "Idempotency-Key": "hook-1"}
    first = app_client.post("/v1/webhooks", json=body, headers=ok)
    again = app_client.post("/v1/webhooks", json=body, headers=ok)
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]


@sqlite_only
def test_a_cursor_of_another_funds_history_is_refused_not_an_empty_page(
    app_client: TestClient,
    write_headers: Headers,
    open_account: Callable[..., dict[str, Any]],
    credit: Callable[..., dict[str, Any]],
) -> None:
    open_account("alice")
    for fund in ("cash", "points"):
        for _ in range(3):
            credit("alice", 5, fund=fund)
    url = "/v1/accounts/alice/entries"
    page = app_client.get(url, params={"fund": "cash", "limit": 2}, headers=write_headers).json()
    assert page["cursor"]
    r = app_client.get(
        url, params={"fund": "points", "limit": 2, "cursor": page["cursor"]}, headers=write_headers
    )
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    r = app_client.get(
        url, params={"fund": "cash", "limit": 2, "cursor": page["cursor"]}, headers=write_headers
    )
    assert r.status_code == 200, r.text
    assert [e["seq"] for e in r.json()["entries"]] == [1]


@sqlite_only
def test_a_posting_replayed_after_its_stored_response_is_gone_keeps_its_status(
    app_client: TestClient,
    ledger: Ledger,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    """docs/http.md: a replay gets the same status and body, also after the
    24 hours the middleware keeps a response (the transaction record answers)."""
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 7}
    first = app_client.post("/v1/transactions", json=body, headers=idem(key="t-old"))
    assert first.status_code == 201, first.text
    ledger.store.delete(response_key("shop", "t-old"))
    again = app_client.post("/v1/transactions", json=body, headers=idem(key="t-old"))
    assert again.status_code == 201, again.text
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    balance = app_client.get("/v1/accounts/alice/balances", headers=idem()).json()
    assert balance["balances"][0] == {
        "fund": "points",
        "unit": "points",
        "balance": 7,
        "held": 0,
        "available": 7,
    }


@sqlite_only
def test_every_paged_route_refuses_another_routes_cursor_with_a_4xx(
    app_client: TestClient,
    ledger: Ledger,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    """A cursor that decodes but belongs to another listing (or to none) is a
    4xx problem on every route that takes one: never a 500, never a silent
    first page."""
    rules = tomllib.loads(Path("examples/loyalty.toml").read_text())
    ledger.loyalty.configure("shop", rules)
    open_account("alice")
    for i in range(3):
        body = {"order_id": f"o-{i}", "amount": 10_000}
        assert app_client.post("/v1/accounts/alice/earn", json=body, headers=idem()).is_success
    entries = app_client.get(
        "/v1/accounts/alice/entries", params={"fund": "points", "limit": 1}, headers=write_headers
    ).json()["cursor"]
    assert entries
    foreign = [
        entries,
        encode_cursor({}),
        encode_cursor({"shard": "x", "after": "x", "inner": "x"}),
        encode_cursor({"shard": "99", "after": "-1"}),
        encode_cursor({"e:points": "nope", "owner": "x"}),
    ]
    spec = app_client.get("/openapi.json").json()
    paged = [
        path
        for path, ops in spec["paths"].items()
        if any(p["name"] == "cursor" for p in ops.get("get", {}).get("parameters", []))
    ]
    assert len(paged) >= 8
    params = {
        "fund": "points",
        "since": "2026-01-01T00:00:00Z",
        "until": "2026-01-02T00:00:00Z",
    }
    for path in paged:
        url = path.format(account="alice", tier="member", sub_id="nope")
        for cursor in foreign[1:] if path.endswith("/entries") else foreign:
            r = app_client.get(url, params={**params, "cursor": cursor}, headers=write_headers)
            assert 400 <= r.status_code < 500, (path, cursor, r.status_code, r.text)
            assert r.headers["content-type"].startswith("application/problem+json"), path


@pytest.mark.parametrize("key", ["-x", "k" * 129, "a b"])
def test_an_earn_or_account_open_with_an_invalid_idempotency_key_is_a_422(
    app_client: TestClient, ledger: Ledger, write_headers: Headers, key: str
) -> None:
    """docs/http.md: a key outside the pattern is a 422, never ignored, on every POST
    (the routes answering their own replays included)."""
    ledger.loyalty.configure("shop", {"earn": {"points_per_unit": 1, "unit_size": 100}})
    ledger.accounts.open("shop", "ann")
    headers = {**write_headers, "Idempotency-Key": key}
    earn = app_client.post(
        "/v1/accounts/ann/earn", json={"order_id": "o-1", "amount": 500}, headers=headers
    )
    opened = app_client.post("/v1/accounts", json={"account": "bea"}, headers=headers)
    for r in (earn, opened):
        assert r.status_code == 422, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["errors"][0]["loc"] == ["header", "Idempotency-Key"]
    assert ledger.transactions.for_order("shop", "o-1") == []
    assert app_client.get("/v1/accounts/bea", headers=write_headers).status_code == 404


def test_an_earn_in_another_currency_is_a_422_that_does_not_echo_it_whole(
    app_client: TestClient, ledger: Ledger, write_headers: Headers, idem: Callable[..., Headers]
) -> None:
    """The detail repeated a currency of any length (a megabyte body, a megabyte detail),
    and the document stated no limit for it."""
    ledger.loyalty.configure("shop", {"earn": {"points_per_unit": 1, "unit_size": 100}})
    ledger.accounts.open("shop", "ann")
    spec = app_client.get("/openapi.json").json()
    currency = spec["components"]["schemas"]["EarnIn"]["properties"]["currency"]
    assert currency["anyOf"][0]["pattern"] == r"^[A-Za-z][A-Za-z0-9_]{0,15}$"
    for given in ("EUR", "E" * 16, "E" * 17, "E" * 100_000):
        body = {"order_id": "o-1", "amount": 500, "currency": given}
        r = app_client.post("/v1/accounts/ann/earn", json=body, headers=idem())
        assert r.status_code == 422, r.text
        assert len(r.json()["detail"]) < 200
    assert ledger.transactions.for_order("shop", "o-1") == []
    with pytest.raises(ValidationError, match="not EEEE"):
        ledger.loyalty.earn("shop", "ann", "o-1", 500, currency="E" * 100_000)
