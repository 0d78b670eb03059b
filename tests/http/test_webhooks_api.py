"""Webhook subscriptions over HTTP: admin scope, the secret once, validation as
problem+json, deliveries and resend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

Headers = dict[str, str]


def test_subscriptions_need_the_admin_scope(
    app_client: TestClient, write_headers: Headers, idem: Callable[..., Headers]
) -> None:
    r = app_client.post(
        "/v1/webhooks", json={"url": "https://example.com/h"}, headers=idem(write_headers)
    )
    assert r.status_code == 403
    assert r.headers["content-type"].startswith("application/problem+json")


def test_create_list_disable_delete(
    app_client: TestClient, admin_headers: Headers, idem: Callable[..., Headers]
) -> None:
    r = app_client.post(
        "/v1/webhooks",
        json={"url": "https://example.com/h", "types": ["hold.expired", "tier.changed"]},
        headers=idem(admin_headers),
    )
    assert r.status_code == 201, r.text
    created = r.json()
    secret, sub_id = created["secret"], created["id"]
    assert secret.startswith("whsec_")
    listed = app_client.get("/v1/webhooks", headers=admin_headers)
    assert secret not in listed.text
    assert [s["id"] for s in listed.json()["subscriptions"]] == [sub_id]
    assert listed.json()["subscriptions"][0]["secret_hint"] == "…" + secret[-4:]
    r = app_client.post(f"/v1/webhooks/{sub_id}/disable", headers=idem(admin_headers))
    assert r.json()["status"] == "disabled"
    r = app_client.post(f"/v1/webhooks/{sub_id}/enable", headers=idem(admin_headers))
    assert r.json()["status"] == "active"
    assert app_client.get(f"/v1/webhooks/{sub_id}/deliveries", headers=admin_headers).json() == {
        "deliveries": [],
        "cursor": None,
    }
    assert app_client.delete(f"/v1/webhooks/{sub_id}", headers=admin_headers).status_code == 204
    assert app_client.get(f"/v1/webhooks/{sub_id}", headers=admin_headers).status_code == 404


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"url": "http://example.com/h"}, "https://"),
        ({"url": "http://127.0.0.1:9/h", "allow_http": True}, "TALLYBOOK_WEBHOOKS_ALLOW_HTTP"),
        ({"url": "https://example.com/h", "types": ["nope"]}, "unknown event type"),
        ({"url": "https://example.com/h", "secret": "x"}, ""),
        ({"url": "https://example.com/h", "allow_http": "yes"}, "valid boolean"),
        ({"url": "https://example.com/h", "allow_http": 1}, "valid boolean"),
    ],
)
def test_bad_subscriptions_are_problems(
    app_client: TestClient,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    body: dict[str, Any],
    detail: str,
) -> None:
    r = app_client.post("/v1/webhooks", json=body, headers=idem(admin_headers))
    assert r.status_code in (400, 422), r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert detail in r.text


def _subscribe_port_9(
    app_client: TestClient,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """A subscription to a loopback port nothing listens on; its id."""
    monkeypatch.setenv("TALLYBOOK_WEBHOOKS_ALLOW_HTTP", "1")
    r = app_client.post(
        "/v1/webhooks",
        json={"url": "http://127.0.0.1:9/h", "allow_http": True},
        headers=idem(admin_headers),
    )
    sub_id = r.json()["id"]
    return str(sub_id)


def test_deliveries_and_resend(
    app_client: TestClient,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
    credit: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sub_id = _subscribe_port_9(app_client, admin_headers, idem, monkeypatch)
    open_account("alice")
    credit("alice", 100)
    ledger = app_client.app.state.ledger  # type: ignore[attr-defined]
    ledger.webhooks.worker().run_once()  # nothing listens on port 9: a failed attempt
    page = app_client.get(f"/v1/webhooks/{sub_id}/deliveries", headers=admin_headers).json()
    (delivery,) = page["deliveries"]
    assert delivery["type"] == "transaction.posted"
    assert delivery["status"] == "pending"
    assert delivery["attempts"] == 1
    assert delivery["last_error"]
    r = app_client.post(
        f"/v1/webhooks/{sub_id}/deliveries/{delivery['position']}/resend",
        headers=idem(admin_headers),
    )
    assert r.status_code == 200, r.text
    assert r.json()["event_id"] == delivery["event_id"]


def test_metrics_count_deliveries_failures_and_lag(
    app_client: TestClient,
    admin_headers: Headers,
    open_account: Callable[..., Any],
    credit: Callable[..., Any],
) -> None:
    from tallybook.webhooks.delivery import RetryPolicy
    from webhooks.receiver import running_receiver

    ledger = app_client.app.state.ledger  # type: ignore[attr-defined]
    open_account("alice")
    with running_receiver() as receiver:
        sub = ledger.webhooks.create("shop", receiver.url, allow_http=True)
        receiver.secret = sub.secret
        receiver.fail_count = 1
        credit("alice", 100)
        credit("alice", 50)
        worker = ledger.webhooks.worker(policy=RetryPolicy(base_seconds=3600))
        worker.run_once()  # the first fails and waits an hour; the second waits behind it
        text = app_client.get("/metrics", headers=admin_headers).text
    sid = sub.subscription.id
    labels = f'program="shop",subscription="{sid}"'
    assert f'tallybook_webhook_deliveries_total{{outcome="failed",{labels}}} 1.0' in text
    assert f'tallybook_webhook_deliveries_total{{outcome="delivered",{labels}}} 0.0' in text
    assert f"tallybook_webhook_queued{{{labels}}} 1.0" in text
    lag = next(line for line in text.splitlines() if line.startswith("tallybook_webhook_lag"))
    assert float(lag.rsplit(" ", 1)[1]) >= 0.0


@pytest.mark.parametrize("key", ["", "short"])
def test_a_missing_or_malformed_server_key_is_a_problem_naming_the_variable(
    app_client: TestClient,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    engine: str,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
) -> None:
    if not key and engine != "dynamodb":
        pytest.skip("SQLite keeps a key file beside the database")
    monkeypatch.setenv("TALLYBOOK_WEBHOOK_KEY", key)
    monkeypatch.delenv("TALLYBOOK_WEBHOOK_KEY_SECRET", raising=False)
    r = app_client.post(
        "/v1/webhooks", json={"url": "https://example.com/h"}, headers=idem(admin_headers)
    )
    assert r.status_code == 503, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["type"].endswith("/webhook-key")
    assert "TALLYBOOK_WEBHOOK_KEY" in r.json()["detail"]
    assert app_client.get("/v1/webhooks", headers=admin_headers).json()["subscriptions"] == []


@pytest.mark.parametrize(
    ("position", "status"),
    [
        (f"{'1' * 40}.000", 404),
        # taken in after a predecessor read later from another shard (webhooks/order.py)
        (f"{'1' * 40}.000~000001~{'2' * 40}.008", 404),
        ("1.0", 422),
        (f"{'1' * 40}.000~1~{'2' * 40}.008", 422),
    ],
)
def test_resend_takes_every_position_form(
    app_client: TestClient,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    monkeypatch: pytest.MonkeyPatch,
    position: str,
    status: int,
) -> None:
    sub_id = _subscribe_port_9(app_client, admin_headers, idem, monkeypatch)
    r = app_client.post(
        f"/v1/webhooks/{sub_id}/deliveries/{position}/resend", headers=idem(admin_headers)
    )
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")


def test_the_deliveries_page_size_is_what_the_openapi_document_says(
    app_client: TestClient, admin_headers: Headers, idem: Callable[..., Headers]
) -> None:
    # the document said 1-1000 while the service refused more than 200 (a 422 of its own)
    r = app_client.post(
        "/v1/webhooks", json={"url": "https://example.com/h"}, headers=idem(admin_headers)
    )
    path = f"/v1/webhooks/{r.json()['id']}/deliveries"
    spec = app_client.get("/openapi.json").json()
    params = spec["paths"]["/v1/webhooks/{sub_id}/deliveries"]["get"]["parameters"]
    limit = next(p for p in params if p["name"] == "limit")["schema"]
    assert (limit["minimum"], limit["maximum"]) == (1, 200)
    ok = app_client.get(path, params={"limit": limit["maximum"]}, headers=admin_headers)
    assert ok.status_code == 200, ok.text
    over = app_client.get(path, params={"limit": limit["maximum"] + 1}, headers=admin_headers)
    assert over.status_code == 422
    assert over.json()["errors"][0]["loc"] == ["query", "limit"]
