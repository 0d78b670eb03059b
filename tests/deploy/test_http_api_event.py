"""The API function as the SAM stack wires it: API Gateway HTTP API events (payload
format 2.0, the ``$default`` stage) through ``tallybook.lambda_handler.handler``."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tallybook
from tallybook import lambda_handler
from tallybook.http import app as app_module
from tallybook.ledger import Ledger
from tallybook.store.port import ItemStore


def http_api_event(
    method: str, path: str, headers: dict[str, str], body: str | None = None
) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "ANY /{proxy+}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"host": "abc123.execute-api.eu-west-1.amazonaws.com", **headers},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": "abc123.execute-api.eu-west-1.amazonaws.com",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "pytest",
            },
            "requestId": "JKJaXmPLvHcESHA=",
            "routeKey": "ANY /{proxy+}",
            "stage": "$default",
            "time": "23/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1795435200000,
        },
        "pathParameters": {"proxy": path.lstrip("/")},
        "body": body,
        "isBase64Encoded": False,
    }


@pytest.mark.parametrize("engine", ["sqlite"])
def test_http_api_events_reach_the_app(
    ledger: Ledger, store: ItemStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLYBOOK_STORE", store.describe())
    monkeypatch.setattr(app_module, "_app", None)
    monkeypatch.setattr(lambda_handler, "_adapter", None)
    _, secret = ledger.keys.create("shop", "read,write", None)
    auth = {"authorization": f"Bearer {secret}", "content-type": "application/json"}
    try:
        health = lambda_handler.handler(http_api_event("GET", "/healthz", {}), None)
        assert health["statusCode"] == 200
        assert json.loads(health["body"])["version"] == tallybook.__version__
        opened = lambda_handler.handler(
            http_api_event(
                "POST", "/v1/accounts", {**auth, "idempotency-key": "h-1"}, '{"account": "ann"}'
            ),
            None,
        )
        assert opened["statusCode"] == 201, opened
        balances = lambda_handler.handler(
            http_api_event("GET", "/v1/accounts/ann/balances", auth), None
        )
        assert balances["statusCode"] == 200
        assert ledger.accounts.get("shop", "ann").id == "ann"
    finally:
        app_module._app = None
