"""docs/http.md, "Times": a time without a zone is UTC where it filters or
schedules, and a 422 where it moves money at a date."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

Headers = dict[str, str]
NAIVE = "2030-01-01T00:00:00"


@pytest.mark.parametrize("engine", ["sqlite"])
def test_naive_times_are_utc_in_filters_and_refused_where_money_moves(
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    open_account("alice")
    refused = [
        ("/v1/accounts/alice/wallet/grants", {"amount": 5, "expires_at": NAIVE}),
        (
            "/v1/accounts/alice/wallet/held-credits",
            {"fund": "store_credit", "amount": 5, "release_at": NAIVE},
        ),
        (
            "/v1/billing/records",
            {
                "id": "r1",
                "partner": "acme",
                "order_id": "o1",
                "amount": 100,
                "currency": "USD",
                "rate": "0.1",
                "time": "2026-01-01T00:00:00",
            },
        ),
    ]
    for path, body in refused:
        r = app_client.post(path, json=body, headers=idem())
        assert r.status_code == 422, (path, r.text)
        assert "time zone" in r.json()["detail"], path
    r = app_client.get(
        "/v1/billing/records",
        params={"since": "2026-01-01T00:00:00", "until": "2026-01-02T00:00:00"},
        headers=write_headers,
    )
    assert r.status_code == 422
    for path, query in (
        ("/v1/accounts/alice/entries", {"fund": "cash", "since": NAIVE}),
        ("/v1/accounts/alice/notifications/history", {"since": NAIVE}),
    ):
        r = app_client.get(path, params=query, headers=write_headers)
        assert r.status_code == 200, (path, r.text)
    r = app_client.post(
        "/v1/accounts/alice/notifications",
        json={"type": "Promo", "payload": {}, "expires_at": NAIVE},
        headers=idem(),
    )
    assert r.status_code == 201, r.text
    assert r.json()["expires_at"].startswith("2030-01-01T00:00:00")
    doc = (Path(__file__).parents[2] / "docs" / "http.md").read_text()
    assert "A time without a zone is read as UTC where it filters" in " ".join(doc.split())
