"""The HTTP service at its edges: paths it does not serve, bodies a route does
not take. Every answer is a documented problem, never a redirect or a silent
acceptance."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tallybook.ledger import Ledger

Headers = dict[str, str]
sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])


@sqlite_only
def test_a_path_with_a_trailing_slash_is_a_404_problem_not_a_redirect(
    app_client: TestClient,
    ledger: Ledger,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    open_account("ann")
    posted = app_client.post(
        "/v1/accounts/",
        json={"account": "bob"},
        headers=idem(write_headers),
        follow_redirects=False,
    )
    assert posted.status_code == 404, posted.text
    assert posted.headers["content-type"] == "application/problem+json"
    assert "location" not in posted.headers
    assert posted.json()["type"].endswith("/not-found")
    assert "'/'" in posted.json()["detail"]
    assert app_client.get("/v1/accounts/bob", headers=write_headers).status_code == 404
    for path in ("/v1/accounts/ann/", "/v1/accounts/ann/balances/", "/v1/program/", "/healthz/"):
        r = app_client.get(path, headers=write_headers, follow_redirects=False)
        assert r.status_code == 404, (path, r.status_code)
        assert r.headers["content-type"] == "application/problem+json"
    # the admin page keeps its short address
    home = app_client.get("/admin", follow_redirects=False)
    assert home.status_code == 303
    assert home.headers["location"] == "/admin/"
