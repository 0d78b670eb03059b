"""The API function as the SAM stack wires it: API Gateway HTTP API events (payload
format 2.0, the ``$default`` stage) through ``tallybook.lambda_handler.handler``."""

from __future__ import annotations

import json

import pytest

import tallybook
from tallybook import lambda_handler
from tallybook.ledger import Ledger

from .test_lambda_events import http_api_event


@pytest.mark.parametrize("engine", ["sqlite"])
def test_http_api_events_reach_the_app(ledger: Ledger, api: str) -> None:
    auth = {"authorization": f"Bearer {api}", "content-type": "application/json"}
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
