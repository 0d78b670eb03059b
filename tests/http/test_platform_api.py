"""Cross-cutting HTTP behaviour: problem+json, limits, request ids, logs, metrics, Lambda."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import tallybook
from tallybook.errors import StoreUnavailable, Throttled, ValidationError
from tallybook.http import app as app_module
from tallybook.http.app import create_app
from tallybook.http.keycache import key_cache_seconds_from_env
from tallybook.http.metrics import MetricsAccess, metrics_access_from_env
from tallybook.http.middleware import JsonFormatter
from tallybook.ledger import Ledger

sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])


def _is_problem(r, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["type"] == f"https://tallybook.dev/problems/{code}"
    assert body["status"] == status
    assert body["title"]
    assert body["detail"]
    # one encoding whichever layer answered (handlers or ASGI middleware)
    assert r.content == json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


@sqlite_only
def test_unknown_route_and_method(app_client, read_headers) -> None:
    _is_problem(app_client.get("/v1/nothing-here", headers=read_headers), 404, "not-found")
    _is_problem(app_client.delete("/v1/program", headers=read_headers), 405, "method-not-allowed")


@sqlite_only
def test_malformed_json_is_400(app_client, idem) -> None:
    r = app_client.post(
        "/v1/transactions",
        content=b'{"type": "credit",',
        headers={**idem(), "content-type": "application/json"},
    )
    _is_problem(r, 400, "malformed-json")


@sqlite_only
def test_validation_problem_lists_fields(app_client, idem) -> None:
    r = app_client.post("/v1/accounts", json={"account": ""}, headers=idem())
    _is_problem(r, 422, "validation")
    assert r.json()["errors"][0]["loc"] == ["body", "account"]


@sqlite_only
def test_body_over_the_limit_is_413(ledger, write_headers) -> None:
    with TestClient(create_app(ledger, max_body=200)) as client:
        big = {"account": "alice", "attributes": {"note": "x" * 250}}
        h = {**write_headers, "Idempotency-Key": "big"}
        _is_problem(client.post("/v1/accounts", json=big, headers=h), 413, "payload-too-large")

        def chunks():  # no Content-Length: the limit applies while reading
            yield b'{"account": "alice", "attributes": {"note": "'
            yield b"x" * 300
            yield b'"}}'

        r = client.post(
            "/v1/accounts", content=chunks(), headers={**h, "content-type": "application/json"}
        )
        _is_problem(r, 413, "payload-too-large")
        assert client.get("/v1/accounts/alice", headers=write_headers).status_code == 404


@sqlite_only
def test_wrong_content_type_is_415(app_client, idem) -> None:
    r = app_client.post(
        "/v1/accounts",
        content=b"account=alice",
        headers={**idem(), "content-type": "application/x-www-form-urlencoded"},
    )
    _is_problem(r, 415, "unsupported-media-type")


@sqlite_only
def test_ledger_errors_map_to_their_status(ledger, read_headers) -> None:
    app = create_app(ledger)

    @app.get("/v1/test/throttled")
    def throttled() -> None:
        raise Throttled("slow down")

    @app.get("/v1/test/unavailable")
    def unavailable() -> None:
        raise StoreUnavailable("the store is down")

    with TestClient(app) as client:
        r = client.get("/v1/test/throttled")
        _is_problem(r, 429, "throttled")
        assert r.headers["retry-after"] == "1"
        _is_problem(client.get("/v1/test/unavailable"), 503, "store-unavailable")


@sqlite_only
def test_unexpected_error_is_a_500_problem_without_internals(ledger, caplog) -> None:
    app = create_app(ledger)

    @app.get("/v1/test/boom")
    def boom() -> None:
        raise RuntimeError("secret internal detail /etc/passwd")

    with TestClient(app) as client, caplog.at_level(logging.ERROR, "tallybook"):
        r = client.get("/v1/test/boom")
    _is_problem(r, 500, "internal")
    assert "secret internal detail" not in r.text
    assert "Traceback" not in r.text
    assert any("secret internal detail" in (rec.exc_text or "") for rec in caplog.records)


@sqlite_only
def test_request_id_is_echoed_or_generated(app_client, read_headers) -> None:
    r = app_client.get("/v1/program", headers={**read_headers, "X-Request-Id": "req-123"})
    assert r.headers["x-request-id"] == "req-123"
    generated = app_client.get("/v1/nope", headers={"X-Request-Id": "bad id with spaces"})
    rid = generated.headers["x-request-id"]
    assert rid != "bad id with spaces"
    assert generated.json()["request_id"] == rid


@sqlite_only
def test_json_access_logs_carry_request_id_and_no_key_material(
    app_client, mint_key, idem, open_account, caplog
) -> None:
    secret = mint_key("read,write")
    headers = {"Authorization": f"Bearer {secret}"}
    forged = secret[:-3] + "zzz"
    with caplog.at_level(logging.DEBUG):
        open_account("alice", headers=headers)
        app_client.get("/v1/accounts/alice", headers={**headers, "X-Request-Id": "trace-1"})
        app_client.get("/v1/accounts/alice", headers={"Authorization": f"Bearer {forged}"})
        app_client.get(f"/v1/accounts/alice?key={secret}", headers=headers)
    formatter = JsonFormatter()
    ours = [rec for rec in caplog.records if rec.name.startswith("tallybook")]
    lines = [formatter.format(rec) for rec in ours]
    access = [
        json.loads(line)
        for line, rec in zip(lines, ours, strict=True)
        if rec.name == "tallybook.http.access"
    ]
    assert any(a.get("request_id") == "trace-1" and a["status"] == 200 for a in access)
    assert {a["status"] for a in access} >= {201, 200, 401}
    assert all(a["route"] for a in access)
    random_part = secret.split("_", 2)[2]
    for line in lines:
        assert random_part not in line
        assert forged.split("_", 2)[2] not in line


def test_healthz_and_metrics(app_client, read_headers, admin_headers, idem, open_account) -> None:
    r = app_client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "version": tallybook.__version__}
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 1}
    app_client.post("/v1/transactions", json=body, headers=idem(key="m1"))
    app_client.post("/v1/transactions", json=body, headers=idem(key="m1"))
    app_client.post("/v1/transactions", json={**body, "amount": 2}, headers=idem(key="m1"))
    app_client.get("/v1/accounts/alice/balances", headers=read_headers)
    m = app_client.get("/metrics", headers=admin_headers)
    assert m.status_code == 200
    assert m.headers["content-type"].startswith("text/plain")
    text = m.text
    assert (
        'tallybook_http_requests_total{method="GET",route="/v1/accounts/{account}/balances",'
        'status="200"} 1.0' in text
    )
    assert 'route="/v1/transactions",status="409"} 1.0' in text
    assert "tallybook_http_request_duration_seconds_bucket" in text
    assert "tallybook_http_idempotent_replays_total 1.0" in text
    assert 'tallybook_http_problems_total{code="idempotency-conflict",status="409"} 1.0' in text
    assert 'tallybook_store_requests_total{operation="transact_write"}' in text
    for family in (
        "tallybook_store_read_capacity_units_total",
        "tallybook_store_write_capacity_units_total",
        "tallybook_store_retries_total",
        "tallybook_store_conflicts_total",
        "tallybook_posting_retries_total",
    ):
        assert f"# TYPE {family} counter" in text


@sqlite_only
def test_openapi_and_docs(app_client) -> None:
    spec = app_client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in (
        "/v1/program",
        "/v1/accounts",
        "/v1/accounts/{account}",
        "/v1/accounts/{account}/balances",
        "/v1/accounts/{account}/entries",
        "/v1/accounts/{account}/transactions",
        "/v1/transactions",
        "/v1/transactions/{txn_id}",
        "/v1/orders/{order_id}/transactions",
        "/v1/transfers",
        "/healthz",
        "/metrics",
    ):
        assert path in paths, path
    post = paths["/v1/transactions"]["post"]
    assert "application/problem+json" in post["responses"]["422"]["content"]
    assert "Problem" in spec["components"]["schemas"]
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    docs = app_client.get("/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()


def _api_gateway_event(method: str, path: str, headers: dict[str, str], body: str | None) -> dict:
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": f"/prod{path}",
            "stage": "prod",
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "identity": {"sourceIp": "203.0.113.7", "userAgent": "pytest"},
            "accountId": "123456789012",
            "apiId": "1234567890",
            "protocol": "HTTP/1.1",
        },
        "body": body,
        "isBase64Encoded": False,
    }


@sqlite_only
def test_lambda_handler_serves_api_gateway_events(ledger, mint_key, store, monkeypatch) -> None:
    from tallybook import lambda_handler
    from tallybook.http import app as app_module

    monkeypatch.setenv("TALLYBOOK_STORE", store.describe())
    monkeypatch.setattr(app_module, "_app", None)
    monkeypatch.setattr(lambda_handler, "_adapter", None)
    secret = mint_key("read,write")
    auth = {"authorization": f"Bearer {secret}", "content-type": "application/json"}

    health = lambda_handler.handler(_api_gateway_event("GET", "/healthz", {}, None), None)
    assert health["statusCode"] == 200
    opened = lambda_handler.handler(
        _api_gateway_event(
            "POST", "/v1/accounts", {**auth, "idempotency-key": "l-1"}, '{"account": "lam"}'
        ),
        None,
    )
    assert opened["statusCode"] == 201, opened
    assert json.loads(opened["body"])["account"] == "lam"
    denied = lambda_handler.handler(_api_gateway_event("GET", "/v1/program", {}, None), None)
    assert denied["statusCode"] == 401
    assert denied["headers"]["content-type"] == "application/problem+json"
    assert ledger.accounts.get("shop", "lam").id == "lam"
    app_module._app = None


@pytest.mark.parametrize(("value", "seconds"), [(None, 5.0), ("", 5.0), ("0", 0.0), (" 2.5 ", 2.5)])
def test_key_cache_seconds_from_env(
    monkeypatch: pytest.MonkeyPatch, value: str | None, seconds: float
) -> None:
    if value is None:
        monkeypatch.delenv("TALLYBOOK_KEY_CACHE_SECONDS", raising=False)
    else:
        monkeypatch.setenv("TALLYBOOK_KEY_CACHE_SECONDS", value)
    assert key_cache_seconds_from_env() == seconds


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_bad_key_cache_variable_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # was: float() of it in get_app, a ValueError (a 500 on the first request under uvicorn)
    monkeypatch.setenv("TALLYBOOK_KEY_CACHE_SECONDS", value)
    with pytest.raises(ValidationError, match="TALLYBOOK_KEY_CACHE_SECONDS must be"):
        key_cache_seconds_from_env()


@pytest.mark.parametrize(
    ("value", "access"),
    [(None, MetricsAccess.KEY), ("", MetricsAccess.KEY), (" open ", MetricsAccess.OPEN)],
)
def test_metrics_access_from_env(
    monkeypatch: pytest.MonkeyPatch, value: str | None, access: MetricsAccess
) -> None:
    if value is None:
        monkeypatch.delenv("TALLYBOOK_METRICS", raising=False)
    else:
        monkeypatch.setenv("TALLYBOOK_METRICS", value)
    assert metrics_access_from_env() is access


@pytest.mark.parametrize("value", ["bogus", "OPEN", "keys"])
def test_a_bad_metrics_variable_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    # was: MetricsAccess(value) in get_app, a ValueError when uvicorn or Lambda built the app
    monkeypatch.setenv("TALLYBOOK_METRICS", value)
    monkeypatch.setenv("TALLYBOOK_STORE", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.setattr(app_module, "_app", None)
    with pytest.raises(ValidationError, match="TALLYBOOK_METRICS must be key, open or off"):
        app_module.get_app()
    with pytest.raises(ValidationError, match="metrics access must be key, open or off"):
        create_app(Ledger.open(f"sqlite:///{tmp_path / 'n.db'}"), metrics_access=value)
