"""Fixtures for HTTP API tests; reusable by every ``tests/http/test_<capability>.py``.

All of them build on ``ledger`` from ``tests/conftest.py``, so every HTTP test
runs on both engines (SQLite always, DynamoDB when configured) with program
``shop`` (funds points, cash, store_credit, bonus) and a ``ManualClock``.

``app_client``
    A ``fastapi.testclient.TestClient`` over ``create_app(ledger)``. Unexpected
    exceptions come back as 500 problem responses (the app catches them), so
    assert on ``status_code``.
``mint_key(scopes="read,write", program="shop", name=None) -> str``
    Creates an API key through ``ledger.keys`` and returns its secret.
``auth(scopes="read,write", program="shop") -> dict``
    Headers ``{"Authorization": "Bearer <new key>"}`` for a fresh key.
``read_headers`` / ``write_headers`` / ``admin_headers``
    Ready-made headers for program ``shop`` with scopes ``read``,
    ``read,write`` and ``admin``.
``idem(headers=None, key=None) -> dict``
    ``headers`` plus a fresh (or the given) ``Idempotency-Key``; use it on
    every POST: ``client.post(url, json=..., headers=idem(write_headers))``.
``other_headers``
    ``read,write`` headers for a second program ``other`` (isolation tests).
``open_account(account, headers=None) -> dict``
    Opens ``account`` over HTTP (POST /v1/accounts) and returns the JSON body.
``credit(account, amount, fund="points", headers=None, txn_id=None) -> dict``
    Posts a credit over HTTP (POST /v1/transactions) and returns the JSON body.

``tests/http`` has no ``__init__.py`` on purpose: a package named ``http``
would shadow the standard library. Test modules here are imported by their
basename, so name yours ``test_<capability>_api.py`` or similar, unique in
the suite.

Example::

    def test_balance(app_client, write_headers, open_account, credit):
        open_account("alice")
        credit("alice", 100)
        r = app_client.get("/v1/accounts/alice/balances", headers=write_headers)
        assert r.json()["balances"][0]["balance"] == 100
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tallybook.http.app import create_app
from tallybook.ledger import Ledger

Headers = dict[str, str]


@pytest.fixture
def app_client(ledger: Ledger) -> Iterator[TestClient]:
    with TestClient(create_app(ledger)) as client:
        yield client


@pytest.fixture
def mint_key(ledger: Ledger) -> Callable[..., str]:
    def mint(scopes: str = "read,write", program: str = "shop", name: str | None = None) -> str:
        _, secret = ledger.keys.create(program, scopes, name)
        return secret

    return mint


@pytest.fixture
def auth(mint_key: Callable[..., str]) -> Callable[..., Headers]:
    def headers(scopes: str = "read,write", program: str = "shop") -> Headers:
        return {"Authorization": f"Bearer {mint_key(scopes, program)}"}

    return headers


@pytest.fixture
def read_headers(auth: Callable[..., Headers]) -> Headers:
    return auth("read")


@pytest.fixture
def write_headers(auth: Callable[..., Headers]) -> Headers:
    return auth("read,write")


@pytest.fixture
def admin_headers(auth: Callable[..., Headers]) -> Headers:
    return auth("admin")


@pytest.fixture
def idem(write_headers: Headers) -> Callable[..., Headers]:
    def with_key(headers: Headers | None = None, key: str | None = None) -> Headers:
        return {**(headers or write_headers), "Idempotency-Key": key or uuid.uuid4().hex}

    return with_key


@pytest.fixture
def other_headers(ledger: Ledger, auth: Callable[..., Headers]) -> Headers:
    ledger.programs.create("other")
    return auth("read,write", "other")


@pytest.fixture
def open_account(
    app_client: TestClient, write_headers: Headers, idem: Callable[..., Headers]
) -> Callable[..., dict[str, Any]]:
    def open_(account: str, headers: Headers | None = None) -> dict[str, Any]:
        r = app_client.post(
            "/v1/accounts", json={"account": account}, headers=idem(headers or write_headers)
        )
        assert r.status_code in (200, 201), r.text
        body: dict[str, Any] = r.json()
        return body

    return open_


@pytest.fixture
def credit(
    app_client: TestClient, write_headers: Headers, idem: Callable[..., Headers]
) -> Callable[..., dict[str, Any]]:
    def credit_(
        account: str,
        amount: int,
        fund: str = "points",
        headers: Headers | None = None,
        txn_id: str | None = None,
    ) -> dict[str, Any]:
        r = app_client.post(
            "/v1/transactions",
            json={"type": "credit", "account": account, "fund": fund, "amount": amount},
            headers=idem(headers or write_headers, txn_id),
        )
        assert r.status_code == 201, r.text
        body: dict[str, Any] = r.json()
        return body

    return credit_
