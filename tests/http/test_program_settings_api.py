"""Issue 17 gaps: low-balance thresholds and notification rules over HTTP and the CLI
(before, thresholds were set only from Python, notification rules only from the CLI)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tallybook.cli import app
from tallybook.ledger import Ledger
from tallybook.store.port import ItemStore

Headers = dict[str, str]
URL = "/v1/program/funds/cash/low-balance-threshold"


def test_low_balance_threshold_over_http(
    app_client: TestClient,
    write_headers: Headers,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
    credit: Callable[..., Any],
) -> None:
    assert app_client.put(URL, json={"threshold": 500}, headers=write_headers).status_code == 403
    r = app_client.put(URL, json={"threshold": 500}, headers=admin_headers)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "name": "cash",
        "unit": "USD",
        "allow_overdraft": False,
        "low_balance_threshold": 500,
    }
    funds = app_client.get("/v1/program", headers=write_headers).json()["funds"]
    assert {f["name"]: f["low_balance_threshold"] for f in funds}["cash"] == 500
    open_account("alice")
    credit("alice", 1000, "cash")
    body = {"type": "debit", "account": "alice", "fund": "cash", "amount": 600}
    assert app_client.post("/v1/transactions", json=body, headers=idem()).status_code == 201
    listed = app_client.get("/v1/accounts/alice/notifications", headers=write_headers).json()
    assert [n["type"] for n in listed["notifications"]] == ["LowBalance"]
    r = app_client.put(URL, json={"threshold": None}, headers=admin_headers)
    assert r.json()["low_balance_threshold"] is None
    # cleared: the LowBalance it raised is not true any more
    listed = app_client.get("/v1/accounts/alice/notifications", headers=write_headers).json()
    assert listed["notifications"] == []
    history = app_client.get("/v1/accounts/alice/notifications/history", headers=write_headers)
    (gone,) = history.json()["notifications"]
    assert (gone["status"], gone["dismiss_reason"]) == ("dismissed", "threshold_changed")
    bad = [
        ("/v1/program/funds/miles/low-balance-threshold", {"threshold": 1}, 404),
        (URL, {"threshold": -1}, 422),
        (URL, {"threshold": 1.5}, 422),
        (URL, {}, 422),
    ]
    for url, payload, status in bad:
        assert app_client.put(url, json=payload, headers=admin_headers).status_code == status


def test_notification_rules_over_http(
    app_client: TestClient,
    read_headers: Headers,
    write_headers: Headers,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
) -> None:
    url = "/v1/program/notification-rules"
    rules = {"retention_days": 30, "types": {"Promo": {"listed": False}}}
    assert app_client.put(url, json=rules, headers=write_headers).status_code == 403
    r = app_client.put(url, json=rules, headers=admin_headers)
    assert r.status_code == 200, r.text
    assert r.json()["retention_days"] == 30
    assert r.json()["types"]["Promo"]["listed"] is False
    assert app_client.get(url, headers=read_headers).json() == r.json()
    open_account("alice")
    added = app_client.post(
        "/v1/accounts/alice/notifications", json={"type": "Promo"}, headers=idem()
    )
    assert added.status_code == 201, added.text
    listed = app_client.get("/v1/accounts/alice/notifications", headers=read_headers).json()
    assert listed["notifications"] == []
    bad = app_client.put(url, json={"retention_days": "soon"}, headers=admin_headers)
    assert 400 <= bad.status_code < 500
    assert bad.headers["content-type"].startswith("application/problem+json")


def test_threshold_from_the_cli(
    ledger: Ledger, store: ItemStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLYBOOK_STORE", store.describe())
    runner = CliRunner()
    result = runner.invoke(app, ["program", "threshold", "shop", "cash", "250"])
    assert result.exit_code == 0, result.output
    assert "LowBalance below 250" in result.output
    fund = ledger.programs.get("shop", fresh=True).fund("cash")
    assert fund is not None
    assert fund.low_balance_threshold == 250
    result = runner.invoke(app, ["program", "threshold", "shop", "cash", "--clear"])
    assert result.exit_code == 0, result.output
    fund = ledger.programs.get("shop", fresh=True).fund("cash")
    assert fund is not None
    assert fund.low_balance_threshold is None
    assert runner.invoke(app, ["program", "threshold", "shop", "cash"]).exit_code == 2
