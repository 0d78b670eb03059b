"""docs/http.md, "Times": a time without a zone is UTC where it filters or
schedules, and a 422 where it moves money at a date."""

from __future__ import annotations

import re
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


#: a time in an answer, whatever its form
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
#: the one form answers use (docs/http.md, "Times")
_ONE_FORM = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def _times(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in _times(v)]
    if isinstance(value, list):
        return [t for v in value for t in _times(v)]
    return [value] if isinstance(value, str) and _TIME.fullmatch(value) else []


@pytest.mark.parametrize("engine", ["sqlite"])
def test_every_time_in_an_answer_has_six_fraction_digits(
    app_client: TestClient,
    ledger: Any,
    clock: Any,
    write_headers: Headers,
    admin_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    """A time on a whole second was ``...:05Z`` where others were ``...:05.123456Z``
    (and webhooks and billing always wrote six digits): one form now, which sorts
    as text. The test clock stands on a whole second."""
    assert clock.now().microsecond == 0
    examples = Path(__file__).resolve().parents[2] / "examples"
    from tallybook.services.loyalty.service import load_toml

    ledger.loyalty.configure("shop", load_toml(str(examples / "loyalty.toml")))
    open_account("alice")
    w = write_headers
    posts = [
        ("/v1/accounts/alice/wallet/credits", {"fund": "cash", "amount": 900}),
        ("/v1/accounts/alice/wallet/grants", {"amount": 30, "expires_in_days": 10}),
        ("/v1/accounts/alice/wallet/holds", {"amount": 40, "expires_in": 3600}),
        ("/v1/accounts/alice/earn", {"order_id": "o-1", "amount": 5000}),
        ("/v1/accounts/alice/notifications", {"type": "TierChanged", "payload": {}}),
    ]
    answers = []
    for url, body in posts:
        r = app_client.post(url, json=body, headers=idem(w, key="h-1" if "holds" in url else None))
        assert r.status_code < 300, (url, r.text)
        answers.append(r.json())
    made = app_client.post(
        "/v1/webhooks", json={"url": "https://example.com/h"}, headers=admin_headers
    )
    answers.append(made.json())
    for url in (
        "/v1/program",
        "/v1/accounts/alice",
        "/v1/accounts/alice/entries?fund=cash",
        "/v1/accounts/alice/transactions",
        "/v1/accounts/alice/wallet",
        "/v1/accounts/alice/wallet/grants",
        "/v1/accounts/alice/wallet/holds",
        "/v1/accounts/alice/wallet/transactions",
        "/v1/holds/h-1",
        "/v1/accounts/alice/notifications",
        "/v1/accounts/alice/notifications/history",
        "/v1/accounts/alice/tier",
        "/v1/accounts/alice/tier/history",
        "/v1/accounts/alice/expiring",
    ):
        r = app_client.get(url, headers=w)
        assert r.status_code == 200, (url, r.text)
        answers.append(r.json())
    times = _times(answers)
    assert len(times) > 20
    assert [t for t in times if not _ONE_FORM.fullmatch(t)] == []
