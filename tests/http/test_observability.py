"""Observability over HTTP: /metrics access, liveness and readiness, trace context,
JSON logs, and what a posting costs in storage calls (both engines where storage is used)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tallybook.errors import ValidationError
from tallybook.http.app import create_app
from tallybook.http.middleware import JsonFormatter
from tallybook.ledger import Ledger
from tallybook.store.sqlite import SqliteStore

sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@sqlite_only
def test_metrics_need_an_admin_key_by_default(
    app_client, read_headers, write_headers, admin_headers
) -> None:
    assert app_client.get("/metrics").status_code == 401
    assert app_client.get("/metrics", headers=read_headers).status_code == 403
    assert app_client.get("/metrics", headers=write_headers).status_code == 403
    r = app_client.get("/metrics", headers=admin_headers)
    assert r.status_code == 200
    assert "# TYPE tallybook_http_requests_total counter" in r.text


@sqlite_only
def test_metrics_open_or_off_as_configured(ledger) -> None:
    with TestClient(create_app(ledger, metrics_access="open")) as client:
        assert client.get("/metrics").status_code == 200
    with TestClient(create_app(ledger, metrics_access="off")) as client:
        r = client.get("/metrics")
        assert r.status_code == 404
        assert r.headers["content-type"].startswith("application/problem+json")
    with pytest.raises(ValidationError, match="key, open or off"):
        create_app(ledger, metrics_access="public")


def test_a_posting_costs_two_storage_calls_once_the_key_is_known(
    ledger, idem, open_account, monkeypatch: pytest.MonkeyPatch
) -> None:
    # caches long enough that a slow engine under load cannot expire them mid-test
    monkeypatch.setattr("tallybook.services.ledger.programs.CACHE_SECONDS", 3600.0)
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 5}
    with TestClient(create_app(ledger, key_cache_seconds=3600)) as client:
        assert client.post("/v1/transactions", json=body, headers=idem()).status_code == 201
        before = ledger.store.metrics.requests
        for _ in range(3):
            assert client.post("/v1/transactions", json=body, headers=idem()).status_code == 201
        assert ledger.store.metrics.requests - before == 3 * 2


def test_readiness_reads_the_store_and_liveness_does_not(app_client, ledger) -> None:
    before = ledger.store.metrics.requests
    assert app_client.get("/healthz").status_code == 200
    assert ledger.store.metrics.requests == before
    r = app_client.get("/readyz")
    assert (r.status_code, r.json()) == (200, {"status": "ready"})
    assert ledger.store.metrics.requests == before + 1


def test_readiness_is_503_while_the_store_is_unusable(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    ledger = Ledger(SqliteStore(path))
    for file in tmp_path.iterdir():  # the server thread opens its own connection
        file.unlink()
    path.write_bytes(b"not a database" * 100)
    with TestClient(create_app(ledger)) as client:
        assert client.get("/healthz").status_code == 200
        r = client.get("/readyz")
        assert r.status_code == 503
        assert r.json()["type"] == "https://tallybook.dev/problems/store-unavailable"


@sqlite_only
def test_traceparent_is_honoured(app_client, read_headers, caplog) -> None:
    with caplog.at_level(logging.INFO, "tallybook"):
        r = app_client.get("/v1/program", headers={**read_headers, "traceparent": TRACEPARENT})
    assert r.status_code == 200
    assert r.headers["x-request-id"] == TRACE_ID  # no X-Request-Id given: the trace id
    version, trace_id, span_id, flags = r.headers["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
    assert span_id != "00f067aa0ba902b7"
    access = [
        json.loads(JsonFormatter().format(rec))
        for rec in caplog.records
        if rec.name == "tallybook.http.access"
    ]
    assert access[-1]["trace_id"] == TRACE_ID
    assert access[-1]["request_id"] == TRACE_ID
    # docs/http.md: the parent span and this request's span are on every line too
    assert access[-1]["parent_span_id"] == "00f067aa0ba902b7"
    assert access[-1]["span_id"] == span_id


@sqlite_only
@pytest.mark.parametrize(
    "value",
    [
        "garbage",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
    ],
)
def test_an_invalid_traceparent_is_ignored(app_client, read_headers, value) -> None:
    r = app_client.get("/v1/program", headers={**read_headers, "traceparent": value})
    assert r.status_code == 200
    assert "traceparent" not in r.headers
    assert len(r.headers["x-request-id"]) == 32


@sqlite_only
def test_json_log_lines_carry_time_level_logger_and_request_id(app_client, caplog) -> None:
    with caplog.at_level(logging.INFO, "tallybook"):
        app_client.get("/v1/nothing", headers={"X-Request-Id": "rid-7"})
    (record,) = [r for r in caplog.records if r.name == "tallybook.http.access"]
    line = json.loads(JsonFormatter().format(record))
    assert {"time", "level", "logger", "message", "request_id"} <= set(line)
    assert (line["level"], line["logger"], line["request_id"]) == (
        "info",
        "tallybook.http.access",
        "rid-7",
    )
    assert (line["status"], line["route"]) == (404, "unmatched")


def test_emf_lines_for_lambda(ledger, engine, mint_key, capsys) -> None:
    secret = mint_key("read,write")
    headers = {"Authorization": f"Bearer {secret}", "Idempotency-Key": "emf-1"}
    ledger.accounts.open("shop", "alice")
    with TestClient(create_app(ledger, emf=True)) as client:
        capsys.readouterr()
        before = ledger.store.metrics.requests
        body = {"type": "credit", "account": "alice", "fund": "points", "amount": 5}
        assert client.post("/v1/transactions", json=body, headers=headers).status_code == 201
        used = ledger.store.metrics.requests - before
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    request = next(line for line in lines if "Requests" in line)
    assert request["route"] == "POST /v1/transactions"
    assert (request["status"], request["Requests"]) == ("201", [1.0])
    assert request["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "tallybook"
    by_operation = {line["operation"]: line for line in lines if "operation" in line}
    assert sum(line["StoreRequests"][0] for line in by_operation.values()) == used
    if engine == "dynamodb":
        assert by_operation["transact_write"]["PricedWriteUnits"][0] >= 4


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--metrics", "public"], "choose key, open or off"),
        (["--metrics-bind", "9100"], "give HOST:PORT"),
    ],
)
def test_serve_refuses_bad_metrics_options(tmp_path: Path, option, message) -> None:
    tallybook = Path(sys.executable).parent / "tallybook"
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    result = subprocess.run(
        [str(tallybook), "serve", "--store", store, *option],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
