"""Numbers in query strings are ASCII digits, as in the CLI and in JSON bodies:
pydantic's lax mode read ``1_0``, `` 5``, ``+5``, ``5.0`` and fullwidth digits as
integers, so ``?limit=1_0`` listed ten."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

Headers = dict[str, str]

PAGED = [
    "/v1/accounts/alice/entries?fund=cash&limit={}",
    "/v1/accounts/alice/transactions?limit={}",
    "/v1/accounts/alice/wallet/transactions?limit={}",
    "/v1/accounts/alice/tier/history?limit={}",
    "/v1/accounts/alice/expiring?days={}",
    "/v1/tiers/member/members?limit={}",
    "/v1/billing/records?since=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00Z&limit={}",
    "/v1/reports?limit={}",
    "/v1/webhooks/sub_x/deliveries?limit={}",
]


@pytest.mark.parametrize("engine", ["memory"], indirect=True)
@pytest.mark.parametrize("value", ["1_0", "%205", "%2B5", "5.0", "%EF%BC%95", "1e1"])
@pytest.mark.parametrize("url", PAGED, ids=lambda u: u.split("?")[0])
def test_a_query_number_that_is_not_ascii_digits_is_a_422(
    app_client: TestClient, auth: Callable[..., Headers], url: str, value: str
) -> None:
    r = app_client.get(url.format(value), headers=auth("read,write,admin"))
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert "must be an integer in ASCII digits" in r.json()["detail"]


@pytest.mark.parametrize("engine", ["memory"], indirect=True)
def test_ascii_digits_still_read(app_client: TestClient, auth: Callable[..., Headers]) -> None:
    headers = auth("read,write")
    app_client.post(
        "/v1/accounts", json={"account": "alice"}, headers={**headers, "Idempotency-Key": "o"}
    )
    r = app_client.get("/v1/accounts/alice/transactions?limit=05", headers=headers)
    assert r.status_code == 200, r.text
    r = app_client.get("/v1/accounts/alice/transactions?limit=-1", headers=headers)
    assert r.status_code == 422
    assert "greater than or equal to 1" in r.text
