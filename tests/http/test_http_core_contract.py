"""HTTP core contract: Idempotency-Key on every POST, problem+json everywhere, Lambda v1/v2."""

from __future__ import annotations

import json
from typing import Any

import pytest

sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])


def _problem(r: Any, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"] == f"https://tallybook.dev/problems/{code}"
    assert r.json()["status"] == status
    # one encoding whichever layer answered (handlers or ASGI middleware)
    assert r.content == json.dumps(r.json(), separators=(",", ":"), ensure_ascii=False).encode()


def test_a_stored_response_replays_and_another_body_is_409(app_client, idem, write_headers) -> None:
    """``POST /v1/accounts``: the middleware's stored-response path (not a posting)."""
    h = idem(key="open-alice")
    first = app_client.post("/v1/accounts", json={"account": "alice"}, headers=h)
    again = app_client.post("/v1/accounts", json={"account": "alice"}, headers=h)
    assert first.status_code == again.status_code == 201  # not the 200 of a second open
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == "/v1/accounts/alice"
    other = app_client.post("/v1/accounts", json={"account": "bob"}, headers=h)
    _problem(other, 409, "idempotency-conflict")
    r = app_client.get("/v1/accounts/bob", headers=write_headers)
    _problem(r, 404, "not-found")


def test_a_transfer_replays_and_another_body_is_409(
    app_client, idem, write_headers, open_account, credit
) -> None:
    open_account("alice")
    open_account("bob")
    credit("alice", 100)
    body = {"source": "alice", "destination": "bob", "fund": "points", "amount": 30}
    first = app_client.post("/v1/transfers", json=body, headers=idem(key="tr-1"))
    again = app_client.post("/v1/transfers", json=body, headers=idem(key="tr-1"))
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    other = app_client.post("/v1/transfers", json={**body, "amount": 31}, headers=idem(key="tr-1"))
    _problem(other, 409, "idempotency-conflict")
    balances = app_client.get("/v1/accounts/bob/balances", headers=write_headers).json()
    assert next(b for b in balances["balances"] if b["fund"] == "points")["balance"] == 30


@sqlite_only
def test_every_post_documents_the_idempotency_key(app_client) -> None:
    spec = app_client.get("/openapi.json").json()
    posts = [(p, ops["post"]) for p, ops in spec["paths"].items() if "post" in ops]
    assert len(posts) >= 3
    for path, op in posts:
        if not path.startswith("/v1/"):
            continue
        headers = [p["name"].lower() for p in op.get("parameters", []) if p["in"] == "header"]
        assert "idempotency-key" in headers, path
        assert "409" in op["responses"], path


@sqlite_only
def test_framework_errors_are_problems_too(app_client, read_headers) -> None:
    _problem(app_client.get("/no-such-page"), 404, "not-found")
    _problem(app_client.get("/v1/accounts/alice/nothing", headers=read_headers), 404, "not-found")
    _problem(app_client.put("/v1/accounts", headers=read_headers), 405, "method-not-allowed")
    _problem(app_client.delete("/healthz"), 405, "method-not-allowed")
    _problem(app_client.get("/v1/accounts/alice"), 401, "unauthorized")


@sqlite_only
def test_a_422_has_one_title_whoever_refused_the_input(app_client, write_headers, idem) -> None:
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 1}
    by_service = app_client.post("/v1/transactions", json=body, headers=write_headers)
    by_schema = app_client.post("/v1/transactions", json={**body, "amount": 1.5}, headers=idem())
    for r in (by_service, by_schema):
        _problem(r, 422, "validation")
        assert r.json()["title"] == "Validation failed"


def _v2_event(method: str, path: str, query: str, headers: dict[str, str], body: str | None):  # type: ignore[no-untyped-def]
    """An API Gateway HTTP API (payload format 2.0) event."""
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"host": "abc.execute-api.eu-west-1.amazonaws.com", **headers},
        "queryStringParameters": dict(p.split("=", 1) for p in query.split("&")) if query else None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc",
            "domainName": "abc.execute-api.eu-west-1.amazonaws.com",
            "domainPrefix": "abc",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "pytest",
            },
            "requestId": "v2-request",
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Jan/2026:00:00:00 +0000",
            "timeEpoch": 1767225600000,
        },
        "body": body,
        "isBase64Encoded": False,
    }


@sqlite_only
def test_lambda_handler_serves_http_api_v2_events(ledger, mint_key, store, monkeypatch) -> None:
    from tallybook import lambda_handler
    from tallybook.http import app as app_module

    monkeypatch.setenv("TALLYBOOK_STORE", store.describe())
    monkeypatch.setattr(app_module, "_app", None)
    monkeypatch.setattr(lambda_handler, "_adapter", None)
    ledger.accounts.open("shop", "alice")
    auth = {"authorization": f"Bearer {mint_key('read,write')}"}
    post = {**auth, "content-type": "application/json", "idempotency-key": "lam-1"}
    body = json.dumps({"type": "credit", "account": "alice", "fund": "cash", "amount": 3})

    first = lambda_handler.handler(_v2_event("POST", "/v1/transactions", "", post, body), None)
    again = lambda_handler.handler(_v2_event("POST", "/v1/transactions", "", post, body), None)
    assert first["statusCode"] == again["statusCode"] == 201, first
    assert json.loads(again["body"]) == json.loads(first["body"])
    assert again["headers"]["idempotent-replayed"] == "true"

    page = lambda_handler.handler(
        _v2_event("GET", "/v1/accounts/alice/entries", "fund=cash&limit=1", auth, None), None
    )
    assert page["statusCode"] == 200, page
    assert [e["txn_id"] for e in json.loads(page["body"])["entries"]] == ["lam-1"]
    missing = lambda_handler.handler(_v2_event("GET", "/nope", "", {}, None), None)
    assert missing["statusCode"] == 404
    assert missing["headers"]["content-type"] == "application/problem+json"
    assert ledger.accounts.get("shop", "alice").fund("cash").balance == 3
