"""The HTTP service at its edges: paths it does not serve, bodies a route does
not take. Every answer is a documented problem, never a redirect or a silent
acceptance."""

from __future__ import annotations

import json
import re
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


def _bodiless_writes(client: TestClient) -> list[tuple[str, str]]:
    """(method, path with every parameter filled in) of each POST or DELETE
    the OpenAPI document lists without a request body."""
    out = []
    for path, operations in client.get("/openapi.json").json()["paths"].items():
        for method, operation in operations.items():
            if method in ("post", "delete") and "requestBody" not in operation:
                filled = path.replace("{position}", "1")
                for name in ("account", "hold_id", "sub_id", "notification_id"):
                    filled = filled.replace("{" + name + "}", "x1")
                out.append((method.upper(), filled + ("?type=Promo" if method == "delete" else "")))
    return out


@sqlite_only
def test_a_route_that_takes_no_body_refuses_one_instead_of_ignoring_it(
    app_client: TestClient, admin_headers: Headers, idem: Callable[..., Headers]
) -> None:
    routes = _bodiless_writes(app_client)
    assert ("POST", "/v1/holds/x1/void") in routes
    assert ("DELETE", "/v1/webhooks/x1?type=Promo") in routes
    headers = {**idem(admin_headers), "Content-Type": "application/json"}
    for method, path in routes:
        malformed = app_client.request(method, path, headers=headers, content=b'{"reason')
        assert malformed.status_code == 400, (method, path, malformed.text)
        assert malformed.json()["type"].endswith("/malformed-json")
        for body in (b'{"reason": "gone"}', b"[]", b"5"):
            given = app_client.request(method, path, headers=headers, content=body)
            assert given.status_code == 422, (method, path, body, given.text)
            assert given.headers["content-type"] == "application/problem+json"
            assert given.json()["errors"][0]["loc"] == ["body"]
        # a missing key is still the first thing said
        anonymous = app_client.request(
            method, path, headers={"Content-Type": "application/json"}, content=b"{"
        )
        assert anonymous.status_code == 401, (method, path)


@sqlite_only
def test_a_void_with_a_body_voids_nothing_and_one_without_or_empty_voids(
    app_client: TestClient,
    ledger: Ledger,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    open_account("ann")
    credit = {"amount": 1_000, "fund": "cash"}
    r = app_client.post("/v1/accounts/ann/wallet/credits", json=credit, headers=idem(write_headers))
    assert r.status_code == 201, r.text
    for hold in ("h-1", "h-2", "h-3"):
        r = app_client.post(
            "/v1/accounts/ann/wallet/holds", json={"amount": 100}, headers=idem(write_headers, hold)
        )
        assert r.status_code == 201, r.text
    refused = app_client.post("/v1/holds/h-1/void", json={"amount": 50}, headers=write_headers)
    assert refused.status_code == 422, refused.text
    assert ledger.wallet.hold("shop", "h-1").status == "active"
    assert app_client.post("/v1/holds/h-1/void", headers=write_headers).status_code == 200
    assert app_client.post("/v1/holds/h-2/void", json={}, headers=write_headers).status_code == 200
    null = {**write_headers, "Content-Type": "application/json"}
    assert app_client.post("/v1/holds/h-3/void", content=b"null", headers=null).status_code == 200
    assert {ledger.wallet.hold("shop", h).status for h in ("h-1", "h-2", "h-3")} == {"voided"}


@sqlite_only
def test_two_idempotency_keys_are_refused_not_run_under_the_first(
    app_client: TestClient,
    ledger: Ledger,
    write_headers: Headers,
    open_account: Callable[..., dict[str, Any]],
) -> None:
    open_account("ann")
    headers = [*write_headers.items(), ("Idempotency-Key", "first"), ("Idempotency-Key", "second")]
    credit = {"type": "credit", "account": "ann", "fund": "cash", "amount": 500}
    r = app_client.post("/v1/transactions", json=credit, headers=headers)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["errors"][0]["loc"] == ["header", "Idempotency-Key"]
    for txn in ("first", "second"):
        assert app_client.get(f"/v1/transactions/{txn}", headers=write_headers).status_code == 404
    opened = app_client.post("/v1/accounts", json={"account": "bob"}, headers=headers)
    assert opened.status_code == 422, opened.text
    assert app_client.get("/v1/accounts/bob", headers=write_headers).status_code == 404


@sqlite_only
def test_a_405_allows_every_method_the_path_serves(
    app_client: TestClient, write_headers: Headers
) -> None:
    """RFC 9110: ``Allow`` lists the methods the resource supports; a path served by
    a route per method (GET and POST ``/v1/webhooks``) named only the first."""
    paths = app_client.get("/openapi.json").json()["paths"]
    for path, operations in paths.items():
        filled = re.sub(r"\{[a-z_]+\}", "x1", path)
        r = app_client.patch(filled, headers=write_headers)
        assert r.status_code == 405, (filled, r.status_code)
        assert r.headers["content-type"] == "application/problem+json"
        allowed = {m.strip() for m in r.headers["allow"].split(",")}
        # .../notifications/history is never a notification id: no DELETE
        expected = {m.upper() for m in operations}
        assert allowed == expected | ({"HEAD"} if "GET" in expected else set()), filled


@sqlite_only
def test_a_number_given_as_a_time_is_refused_not_read_as_unix_time(
    app_client: TestClient,
    ledger: Ledger,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    """Times are ISO 8601: pydantic read 1900000000 and 1900000000000 both as a
    2030 date (seconds or milliseconds, guessed by size)."""
    open_account("ann")
    writes = [
        ("/v1/accounts/ann/wallet/grants", {"amount": 10}, "expires_at"),
        ("/v1/accounts/ann/wallet/held-credits", {"amount": 10, "fund": "cash"}, "release_at"),
        ("/v1/accounts/ann/notifications", {"type": "Promo"}, "expires_at"),
    ]
    for url, body, field in writes:
        for number in (1_900_000_000, 1_900_000_000_000, 1.9e9, "1900000000"):
            r = app_client.post(url, json={**body, field: number}, headers=idem(write_headers))
            assert r.status_code == 422, (url, number, r.text)
            assert r.json()["errors"][0]["loc"] == ["body", field]
        fine = app_client.post(
            url, json={**body, field: "2030-03-17T17:46:40Z"}, headers=idem(write_headers)
        )
        assert fine.status_code == 201, (url, fine.text)
    assert len(ledger.wallet.grants("shop", "ann")) == 1
    reads = [
        ("/v1/accounts/ann/entries", {"fund": "cash"}),
        ("/v1/accounts/ann/notifications/history", {}),
    ]
    for url, params in reads:
        for name in ("since", "until"):
            for number in ("1700000000", "0.5"):
                r = app_client.get(url, params={**params, name: number}, headers=write_headers)
                assert r.status_code == 422, (url, name, number, r.text)
            r = app_client.get(
                url, params={**params, name: "2026-01-01T00:00:00Z"}, headers=write_headers
            )
            assert r.status_code == 200, r.text


@sqlite_only
def test_head_is_answered_as_get_without_the_body(
    app_client: TestClient, read_headers: Headers
) -> None:
    """RFC 9110: a server supports HEAD wherever it supports GET (it was a 405)."""
    for path, headers in (("/healthz", {}), ("/v1/program", read_headers), ("/openapi.json", {})):
        got = app_client.get(path, headers=headers)
        head = app_client.head(path, headers=headers)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
        assert head.headers["content-length"] == got.headers["content-length"]
    refused = app_client.head("/v1/program")
    assert refused.status_code == 401
    assert refused.content == b""
    assert app_client.head("/v1/accounts", headers=read_headers).status_code == 405


@sqlite_only
def test_a_method_a_path_does_not_serve_is_a_405_even_where_a_sibling_template_matches(
    app_client: TestClient, admin_headers: Headers
) -> None:
    """``DELETE .../notifications/history`` was routed to ``DELETE
    .../notifications/{notification_id}`` and answered 422 (``history`` is not a
    notification id): a fixed segment is never read as a parameter, so every
    method a path does not serve is a 405 naming the ones it does."""
    paths = app_client.get("/openapi.json").json()["paths"]
    for path, operations in paths.items():
        filled = re.sub(r"\{[a-z_]+\}", "x1", path)
        served = {m.upper() for m in operations}
        for method in {"GET", "POST", "PUT", "DELETE", "PATCH"} - served:
            r = app_client.request(method, filled, headers=admin_headers)
            assert r.status_code == 405, (method, filled, r.status_code, r.text)
            assert r.headers["content-type"] == "application/problem+json"
            assert r.json()["type"].endswith("/method-not-allowed")
            allowed = {m.strip() for m in r.headers["allow"].split(",")}
            assert allowed == served | ({"HEAD"} if "GET" in served else set()), filled


@sqlite_only
def test_a_repeated_authorization_header_is_a_401_and_nothing_runs(
    app_client: TestClient,
    ledger: Ledger,
    mint_key: Callable[..., str],
    read_headers: Headers,
    open_account: Callable[..., dict[str, Any]],
) -> None:
    """Two ``Authorization`` headers ran under the first and ignored the second:
    which key is the caller's would be a guess."""
    open_account("ann")
    writer, reader = mint_key("read,write"), mint_key("read")
    for second in (writer, reader, "tb_nothing"):
        twice = [("Authorization", f"Bearer {writer}"), ("Authorization", f"Bearer {second}")]
        read = app_client.get("/v1/program", headers=twice)
        assert read.status_code == 401, read.text
        assert read.headers["content-type"] == "application/problem+json"
        assert "more than once" in read.json()["detail"]
        credit = {"type": "credit", "account": "ann", "fund": "points", "amount": 5}
        posted = app_client.post(
            "/v1/transactions", json=credit, headers=[*twice, ("Idempotency-Key", f"t-{second}")]
        )
        assert posted.status_code == 401, posted.text
        sns = app_client.post(
            "/v1/events/sns", content=b"{}", headers=[*twice, ("Content-Type", "text/plain")]
        )
        assert sns.status_code == 401, sns.text
    assert ledger.accounts.get("shop", "ann").fund("points").balance == 0
    # joined by a comma, as API Gateway's HTTP API hands them on
    joined = {"Authorization": f"Bearer {writer},Bearer {reader}"}
    assert app_client.get("/v1/program", headers=joined).status_code == 401
    assert app_client.get("/v1/program", headers=read_headers).status_code == 200


@sqlite_only
def test_a_repeated_query_parameter_is_a_422_not_its_last_value(
    app_client: TestClient,
    read_headers: Headers,
    open_account: Callable[..., dict[str, Any]],
    credit: Callable[..., dict[str, Any]],
) -> None:
    """``limit=1&limit=500`` was read as 500 (Starlette keeps the last value)."""
    open_account("ann")
    credit("ann", 5)
    credit("ann", 7)
    cases = [
        ("/v1/accounts/ann/entries?fund=points&limit=1&limit=500", "limit"),
        ("/v1/accounts/ann/entries?fund=cash&fund=points", "fund"),
        ("/v1/accounts/ann/transactions?cursor=&cursor=", "cursor"),
        ("/v1/accounts/ann/notifications/history?order=oldest&order=newest", "order"),
    ]
    for url, name in cases:
        r = app_client.get(url, headers=read_headers)
        assert r.status_code == 422, (url, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["errors"] == [
            {"loc": ["query", name], "msg": "given twice", "type": "duplicate"}
        ]
    one = app_client.get("/v1/accounts/ann/entries?fund=points&limit=1", headers=read_headers)
    assert one.status_code == 200, one.text
    assert len(one.json()["entries"]) == 1


@sqlite_only
def test_a_json_body_is_parsed_once_per_request(
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The request middleware parses a ``/v1`` body to refuse a key given twice;
    the route and the idempotency fingerprint parsed the same bytes again (about
    48k instructions of a posting's, bench/NOTES.md). They now take its result."""
    open_account("ann")
    parsed: list[str] = []
    decode = json.JSONDecoder.decode

    def counting(self: json.JSONDecoder, s: str, *args: Any, **kwargs: Any) -> Any:
        parsed.append(s)
        return decode(self, s, *args, **kwargs)

    monkeypatch.setattr(json.JSONDecoder, "decode", counting)
    credit = '{"type": "credit", "account": "ann", "fund": "points", "amount": 5}'
    grant = '{"amount": 7, "expires_in_days": 3}'
    writes = [
        ("/v1/transactions", credit, 201),  # the ledger answers its replays
        ("/v1/accounts", '{"account": "bob"}', 201),  # the middleware's fingerprint
        ("/v1/accounts/ann/wallet/grants", grant, 201),
    ]
    for url, body, status in writes:
        headers = {**idem(write_headers), "Content-Type": "application/json"}
        for _ in range(2):  # the first time, and its replay
            parsed.clear()
            r = app_client.post(url, content=body, headers=headers)
            assert r.status_code in (status, 200), (url, r.text)
            assert parsed.count(body) == 1, (url, len(parsed))
    assert app_client.get("/v1/accounts/ann/balances", headers=write_headers).status_code == 200


@sqlite_only
def test_an_unknown_path_is_a_404_and_an_unserved_method_a_405_before_the_body_is_judged(
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    """``POST /v1/nope`` with a text body was a 415 and ``GET /v1/nope?a=1&a=2`` a 422:
    what the request is refused for comes after whether anything serves it."""
    open_account("ann")
    text = {**idem(write_headers), "Content-Type": "text/plain"}
    twice = [*idem(write_headers).items(), ("Idempotency-Key", "other")]
    cases: list[tuple[str, str, dict[str, Any], int]] = [
        ("POST", "/v1/nope", {"content": b"x", "headers": text}, 404),
        ("PUT", "/v1/accounts/ann/nope", {"content": b"x", "headers": text}, 404),
        ("POST", "/v1/nope", {"content": b'{"a": 1, "a": 2}', "headers": write_headers}, 404),
        ("POST", "/v1/nope", {"json": {}, "headers": twice}, 404),
        ("GET", "/v1/nope?limit=1&limit=2", {"headers": write_headers}, 404),
        ("PUT", "/v1/accounts/ann", {"content": b"x", "headers": text}, 405),
        ("OPTIONS", "/v1/accounts/ann", {"headers": write_headers}, 405),
        ("PATCH", "/v1/accounts/ann?limit=1&limit=2", {"headers": write_headers}, 405),
    ]
    for method, url, kwargs, status in cases:
        r = app_client.request(method, url, **kwargs)
        assert r.status_code == status, (method, url, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        if status == 405:  # no CORS is offered: OPTIONS is a 405 like any unserved method
            assert r.headers["allow"] == "GET, HEAD", (method, url)
    # a served path and method still judges its body first
    served = app_client.post("/v1/accounts", content=b"x", headers=text)
    assert served.status_code == 415, served.text


@sqlite_only
def test_every_v1_route_is_known_to_the_request_middleware(ledger: Ledger) -> None:
    """A /v1 route the middleware did not know would skip its body checks (413, 415)."""
    from tallybook.http.app import create_app
    from tallybook.http.middleware import RequestMiddleware

    app = create_app(ledger)
    (middleware,) = [m for m in app.user_middleware if m.cls is RequestMiddleware]
    api_paths = middleware.kwargs["api_paths"]
    for route in app.routes:
        path = str(getattr(route, "path", ""))
        if path.startswith("/v1/"):
            for method in getattr(route, "methods", None) or ():
                sample = re.sub(r"\{[^}]+\}", "x1", path)
                assert any(method in m and p.match(sample) for p, m in api_paths), (method, sample)
