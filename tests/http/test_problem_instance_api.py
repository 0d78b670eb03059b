"""A problem's ``instance`` is a URI reference (RFC 9457 section 3.1.5), and a
cut ``detail`` still says how many errors it left out."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tallybook.http.problems import MAX_DETAIL

Headers = dict[str, str]

sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])  # no ledger writes are involved


@sqlite_only
def test_the_instance_is_the_path_as_sent_percent_encoded(
    app_client: TestClient, write_headers: Headers
) -> None:
    """``instance`` was the decoded path: ``/v1/accounts/a b/balances``, with a
    space and ``é``, is no URI reference, and ``a%2Fb`` came back as ``a/b``,
    another path. It is now the path as the client sent it."""
    sent = [
        ("GET", "/v1/accounts/al%20ice/balances"),  # 422 from the route
        ("GET", "/v1/accounts/%C3%A9t%C3%A9/balances"),  # 422
        ("GET", "/v1/nowhere/a%2Fb"),  # 404
        ("PATCH", "/v1/accounts/al%20ice/notifications"),  # 405, answered by the middleware
    ]
    for method, path in sent:
        r = app_client.request(method, path, headers=write_headers)
        assert 400 <= r.status_code < 500, r.text
        assert r.json()["instance"] == path, (method, path)


@sqlite_only
def test_a_cut_validation_detail_keeps_its_count_of_the_rest(
    app_client: TestClient, write_headers: Headers
) -> None:
    """Five long field names fill the 1,000 characters a ``detail`` holds: the
    cut took "(and N more)" off its end, so it no longer said there were more."""
    body = {"account": "bob", **{f"{n}{'x' * 190}": 1 for n in range(8)}}
    r = app_client.post(
        "/v1/accounts", json=body, headers={**write_headers, "Idempotency-Key": "k-1"}
    )
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert len(detail) <= MAX_DETAIL
    assert detail.endswith("\u2026 (and 3 more)"), detail[-40:]
    assert detail.startswith("invalid request: body.0xxx")
