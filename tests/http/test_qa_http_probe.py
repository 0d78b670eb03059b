"""Black-box QA of the HTTP API against its OpenAPI document (second pass):
concurrency of one Idempotency-Key, bad input, and what each answer declares."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tallybook.errors import StoreUnavailable, StoreValidationError, Throttled, ValidationError
from tallybook.http.app import create_app
from tallybook.http.middleware import JsonFormatter
from tallybook.ledger import Ledger

Headers = dict[str, str]


def _at_once(
    send: Callable[[int], tuple[int, str | None]], n: int = 8
) -> Counter[tuple[int, str | None]]:
    """``send(i)`` from ``n`` threads at once: (status, Idempotent-Replayed) counted."""
    with ThreadPoolExecutor(n) as pool:
        return Counter(pool.map(send, range(n)))


def test_concurrent_identical_subscriptions_create_one_and_replay_it(
    app_client: TestClient, admin_headers: Headers
) -> None:
    headers = {**admin_headers, "Idempotency-Key": "subscribe-once"}

    def send(_: int) -> tuple[int, str | None]:
        r = app_client.post("/v1/webhooks", json={"url": "https://example.com/h"}, headers=headers)
        return r.status_code, r.headers.get("idempotent-replayed")

    assert _at_once(send) == Counter({(201, None): 1, (201, "true"): 7})
    listed = app_client.get("/v1/webhooks", headers=admin_headers).json()["subscriptions"]
    assert len(listed) == 1


def test_concurrent_identical_account_opens_replay_the_first_201(
    app_client: TestClient, write_headers: Headers
) -> None:
    headers = {**write_headers, "Idempotency-Key": "open-ann-once"}

    def send(_: int) -> tuple[int, str | None]:
        r = app_client.post("/v1/accounts", json={"account": "ann"}, headers=headers)
        return r.status_code, r.headers.get("idempotent-replayed")

    assert _at_once(send) == Counter({(201, None): 1, (201, "true"): 7})


def test_concurrent_requests_with_one_key_and_other_bodies_apply_one(
    app_client: TestClient, admin_headers: Headers
) -> None:
    headers = {**admin_headers, "Idempotency-Key": "subscribe-which"}

    def send(i: int) -> tuple[int, str | None]:
        body = {"url": f"https://example.com/h{i}"}
        r = app_client.post("/v1/webhooks", json=body, headers=headers)
        if r.status_code == 409:
            assert r.headers["content-type"] == "application/problem+json"
            assert r.json()["type"].endswith("/idempotency-conflict")
        return r.status_code, r.headers.get("idempotent-replayed")

    assert _at_once(send, 6) == Counter({(201, None): 1, (409, None): 5})
    listed = app_client.get("/v1/webhooks", headers=admin_headers).json()["subscriptions"]
    assert len(listed) == 1


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_time_with_no_utc_equivalent_is_a_422_and_writes_nothing(
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
    when: str,
) -> None:
    open_account("ann")
    writes = [
        ("/v1/accounts/ann/wallet/grants", {"amount": 5, "expires_at": when}),
        ("/v1/accounts/ann/wallet/held-credits", {"fund": "cash", "amount": 5, "release_at": when}),
        (
            "/v1/billing/records",
            {
                "id": "rec-1",
                "partner": "acme",
                "order_id": "o-1",
                "amount": 100,
                "currency": "USD",
                "rate": "0.1",
                "time": when,
            },
        ),
    ]
    for path, body in writes:
        r = app_client.post(path, json=body, headers=idem(write_headers))
        assert r.status_code == 422, (path, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["type"].endswith("/validation")
    wallet = app_client.get("/v1/accounts/ann/wallet", headers=write_headers).json()
    assert wallet["total_available"] == 0
    assert app_client.get("/v1/accounts/ann/wallet/holds", headers=write_headers).json() == []
    assert app_client.get("/v1/billing/records/rec-1", headers=write_headers).status_code == 404


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize(
    ("error", "status"), [(StoreUnavailable("the store is down"), 503), (Throttled("slow"), 429)]
)
def test_a_store_failure_in_the_idempotency_lookup_says_when_to_retry(
    ledger: Ledger,
    write_headers: Headers,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    status: int,
) -> None:
    def failing(*args: object) -> None:
        raise error

    # the lookup is the claim of the key (or, failing that, the read of what is kept)
    monkeypatch.setattr(ledger.responses, "claim", failing)
    with TestClient(create_app(ledger)) as client:
        r = client.post(
            "/v1/accounts",
            json={"account": "ann"},
            headers={**write_headers, "Idempotency-Key": "open-ann"},
        )
        assert r.status_code == status, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert r.headers["retry-after"] == "1"
        assert client.get("/v1/accounts/ann", headers=write_headers).status_code == 404


@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_text_plain_body_outside_the_sns_route_is_a_415(
    app_client: TestClient, write_headers: Headers
) -> None:
    headers = {**write_headers, "Content-Type": "text/plain", "Idempotency-Key": "open-ann"}
    r = app_client.post("/v1/accounts", content=b'{"account": "ann"}', headers=headers)
    assert r.status_code == 415, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"].endswith("/unsupported-media-type")
    assert app_client.get("/v1/accounts/ann", headers=write_headers).status_code == 404
    sns = app_client.post("/v1/events/sns", content=b'{"Type": "Notification"}', headers=headers)
    assert sns.status_code == 422
    assert sns.json()["type"].endswith("/rejected-message")


def test_an_empty_name_in_attributes_or_a_payload_is_a_422_on_every_engine(
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    """DynamoDB refuses an empty map key; SQLite kept it: both now refuse it first."""
    r = app_client.post(
        "/v1/accounts", json={"account": "bob", "attributes": {"": "x"}}, headers=idem()
    )
    assert r.status_code == 422, r.text
    assert r.json()["type"].endswith("/validation")
    assert app_client.get("/v1/accounts/bob", headers=write_headers).status_code == 404
    open_account("ann")
    for payload in ({"": 1}, {"a": {"": 1}}, {"a": [{"": 1}]}):
        body = {"type": "Custom", "payload": payload}
        r = app_client.post("/v1/accounts/ann/notifications", json=body, headers=idem())
        assert r.status_code == 422, (payload, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["type"].endswith("/validation")
    listed = app_client.get("/v1/accounts/ann/notifications", headers=write_headers).json()
    assert listed["notifications"] == []


@pytest.mark.parametrize("engine", ["memory"])
def test_the_python_api_refuses_an_empty_attribute_name(ledger: Ledger) -> None:
    with pytest.raises(ValidationError, match="attribute names"):
        ledger.accounts.open("shop", "bob", attributes={"": "x"})


@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_deleted_subscription_answers_204_without_a_content_type(
    app_client: TestClient, admin_headers: Headers, idem: Callable[..., Headers]
) -> None:
    created = app_client.post(
        "/v1/webhooks", json={"url": "https://example.com/h"}, headers=idem(admin_headers)
    )
    r = app_client.delete(f"/v1/webhooks/{created.json()['id']}", headers=admin_headers)
    assert r.status_code == 204
    assert r.content == b""
    assert "content-type" not in r.headers
    spec = app_client.get("/openapi.json").json()
    assert "content" not in spec["paths"]["/v1/webhooks/{sub_id}"]["delete"]["responses"]["204"]


@pytest.mark.parametrize("engine", ["sqlite"])
def test_an_admin_operation_does_not_say_admin_or_admin(app_client: TestClient) -> None:
    spec = app_client.get("/openapi.json").json()
    webhooks = spec["paths"]["/v1/webhooks"]["post"]["description"]
    assert webhooks.endswith("Needs an API key with the `admin` scope.")
    accounts = spec["paths"]["/v1/accounts"]["post"]["description"]
    assert accounts.endswith("Needs an API key with the `write` scope (or `admin`).")


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize("error", [Throttled("slow down"), StoreValidationError("refused")])
def test_readyz_answers_a_documented_503_whatever_the_store_fails_with(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def failing(key: object) -> None:
        raise error

    monkeypatch.setattr(ledger.store, "get", failing)
    with TestClient(create_app(ledger)) as client:
        r = client.get("/readyz")
        spec = client.get("/openapi.json").json()
    assert r.status_code == 503, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.headers["retry-after"] == "1"
    assert r.json()["type"].endswith("/store-unavailable")
    assert set(spec["paths"]["/readyz"]["get"]["responses"]) == {"200", "503"}


@pytest.mark.parametrize("engine", ["sqlite"])
def test_metrics_documents_the_503_of_a_store_that_cannot_read_the_key(
    ledger: Ledger, admin_headers: Headers, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(secret: str) -> None:
        raise StoreUnavailable("the store is down")

    monkeypatch.setattr(ledger.keys, "authenticate", failing)
    with TestClient(create_app(ledger, key_cache_seconds=0)) as client:
        r = client.get("/metrics", headers=admin_headers)
        spec = client.get("/openapi.json").json()
    assert r.status_code == 503, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert str(r.status_code) in spec["paths"]["/metrics"]["get"]["responses"]


@pytest.mark.parametrize("engine", ["sqlite"])
def test_the_loyalty_schemas_state_the_limits_the_service_applies(app_client: TestClient) -> None:
    """Schemathesis: earn, redeem and the order lookup mostly refused what their schema allowed."""
    spec = app_client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert schemas["EarnIn"]["properties"]["order_id"]["maxLength"] == 122
    order = spec["paths"]["/v1/orders/{order_id}"]["get"]["parameters"][0]["schema"]
    assert order["maxLength"] == 122
    for name in ("EarnIn", "RedeemIn", "LedgerCreditIn"):
        metadata = schemas[name]["properties"]["metadata"]["anyOf"][0]
        assert metadata["maxProperties"] == 16
        assert metadata["propertyNames"] == {"maxLength": 64, "minLength": 1}


def test_dismissing_a_type_on_an_unknown_or_foreign_account_is_a_404(
    app_client: TestClient,
    write_headers: Headers,
    other_headers: Headers,
    open_account: Callable[..., dict[str, Any]],
) -> None:
    open_account("ann")
    path = "/v1/accounts/{}/notifications?type=TopUp"
    r = app_client.delete(path.format("ghost"), headers=write_headers)
    assert r.status_code == 404, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"].endswith("/not-found")
    assert app_client.delete(path.format("ann"), headers=other_headers).status_code == 404
    r = app_client.delete(path.format("ann"), headers=write_headers)
    assert r.status_code == 200
    assert r.json() == {"dismissed": None}


def test_a_lone_surrogate_in_a_notification_payload_is_a_422_not_a_500(
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    open_account("ann")
    headers = {**idem(), "Content-Type": "application/json"}
    for raw in (b'{"a": "\\ud800"}', b'{"\\udfff": 1}', b'{"a": [{"b": "x\\ud800"}]}'):
        body = b'{"type": "Custom", "payload": ' + raw + b"}"
        r = app_client.post("/v1/accounts/ann/notifications", content=body, headers=headers)
        assert r.status_code == 422, (raw, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["type"].endswith("/validation")
    listed = app_client.get("/v1/accounts/ann/notifications", headers=write_headers).json()
    assert listed["notifications"] == []


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize(
    "url",
    [
        "https://sns.amazonaws.com/\\ud800",
        "https://sns.amazonaws.com/\\u0007",
        "http://[::1",
        "https://",
        "https:///path",
    ],
)
def test_a_subscribe_url_that_is_not_plain_text_is_rejected_not_a_500(
    app_client: TestClient, write_headers: Headers, url: str
) -> None:
    envelope = '{"Type": "SubscriptionConfirmation", "MessageId": "m-1", "SubscribeURL": '
    body = envelope + f'"{url}"}}'
    headers = {**write_headers, "Content-Type": "text/plain"}
    r = app_client.post("/v1/events/sns", content=body.encode(), headers=headers)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"].startswith("bad-subscribe-url")


@pytest.mark.parametrize("engine", ["sqlite"])
def test_the_docs_name_every_page_size_default_that_is_not_50(app_client: TestClient) -> None:
    docs = (Path(__file__).parents[2] / "docs" / "http.md").read_text()
    pages = docs[docs.index("- **Pages.**") :].split("\n\n")[0]
    spec = app_client.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            for param in operation.get("parameters", []):
                if param["name"] == "limit" and param["schema"].get("default") != 50:
                    assert param["schema"]["default"] == 100
                    named = path.removeprefix("/v1/accounts/{account}")
                    flat = " ".join(pages.split())
                    assert f"`{named}`" in flat or f"`GET {named}`" in flat, path


@pytest.mark.parametrize("engine", ["sqlite"])
def test_hold_and_grant_keys_are_documented_up_to_the_100_characters_taken(
    app_client: TestClient,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
) -> None:
    """Schemathesis: the OpenAPI said 128 characters, the service refused more than 100."""
    open_account("ann")
    spec = app_client.get("/openapi.json").json()
    writes = {
        "/v1/accounts/{account}/wallet/grants": {"amount": 1, "expires_in_days": 1},
        "/v1/accounts/{account}/wallet/holds": {"amount": 1},
        "/v1/accounts/{account}/wallet/held-credits": {
            "fund": "cash",
            "amount": 1,
            "release_at": "2030-01-01T00:00:00Z",
        },
    }
    for path, body in writes.items():
        params = spec["paths"][path]["post"]["parameters"]
        key = next(p for p in params if p["name"] == "Idempotency-Key")
        assert key["schema"]["maxLength"] == 100
        url = path.format(account="ann")
        r = app_client.post(url, json=body, headers=idem(key="k" * 101))
        assert r.status_code == 422, r.text
    credits = spec["paths"]["/v1/accounts/{account}/wallet/credits"]["post"]["parameters"]
    assert next(p for p in credits if p["name"] == "Idempotency-Key")["schema"]["maxLength"] == 128


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            "/v1/transactions",
            '{"type": "credit", "account": "ann", "fund": "cash", "amount": 1, "amount": 900}',
        ),
        (
            "/v1/transactions",
            '{"type": "credit", "account": "ann", "fund": "cash", "amount": 5,'
            ' "metadata": {"k": "a", "k": "b"}}',
        ),
        ("/v1/accounts/ann/wallet/credits", '{"fund": "bonus", "fund": "cash", "amount": 5}'),
        ("/v1/accounts", '{"account": "bob", "account": "carl"}'),
    ],
    ids=["amount", "nested", "wallet", "account"],
)
def test_a_body_giving_a_key_twice_is_a_422_never_a_guess(
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., dict[str, Any]],
    path: str,
    body: str,
) -> None:
    open_account("ann")
    headers = {**idem(key="dup-1"), "Content-Type": "application/json"}
    r = app_client.post(path, content=body.encode(), headers=headers)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["type"].endswith("/validation")
    assert app_client.get("/v1/transactions/dup-1", headers=write_headers).status_code == 404
    assert app_client.get("/v1/wallet/transactions/dup-1", headers=write_headers).status_code == 404
    for account in ("bob", "carl"):
        assert app_client.get(f"/v1/accounts/{account}", headers=write_headers).status_code == 404


def test_a_billing_record_dated_before_year_1000_reads_back_and_reports_run(
    app_client: TestClient,
    write_headers: Headers,
    admin_headers: Headers,
    idem: Callable[..., Headers],
) -> None:
    """Year 1 was written as "1-01-01T..." (strftime), which reading could not parse:
    the record, its bucket's listing and every report run of the program were 500s."""
    for record_id, when in (("old-1", "0001-01-01T00:00:00Z"), ("old-2", "0999-05-06T07:08:09Z")):
        body = {
            "id": record_id,
            "partner": "acme",
            "order_id": "o-1",
            "amount": 100,
            "currency": "USD",
            "rate": "0.1",
            "time": when,
        }
        assert app_client.post("/v1/billing/records", json=body, headers=idem()).status_code == 201
        r = app_client.get(f"/v1/billing/records/{record_id}", headers=write_headers)
        assert r.status_code == 200, r.text
        assert r.json()["time"] == when.replace("Z", ".000000Z")
    window = {"since": "2000-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z"}
    listed = app_client.get("/v1/billing/records", params=window, headers=write_headers)
    assert listed.status_code in (200, 422), listed.text  # 422: a window too wide, never a 500
    run = app_client.post("/v1/reports/run", json={}, headers=idem(admin_headers))
    assert run.status_code == 200, run.text


@pytest.mark.parametrize("engine", ["memory"])
def test_a_billing_time_written_with_an_unpadded_year_still_parses(engine: str) -> None:
    from datetime import UTC, datetime

    from tallybook.domain.billing import parse_iso

    assert parse_iso("1-01-01T00:00:00.000000Z") == datetime(1, 1, 1, tzinfo=UTC)
    assert parse_iso("999-05-06T07:08:09.000123Z") == datetime(999, 5, 6, 7, 8, 9, 123, tzinfo=UTC)


@pytest.mark.parametrize("engine", ["memory"])
def test_the_store_codec_writes_years_before_1000_so_it_can_read_them(engine: str) -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from tallybook.store.records.codec import iso, parse_iso

    for t in (
        datetime(5, 1, 1, tzinfo=timezone(timedelta(hours=1))),
        datetime(999, 5, 6, tzinfo=UTC),
    ):
        assert parse_iso(iso(t)) == t
    assert iso(datetime(5, 1, 1, tzinfo=UTC)) == "0005-01-01T00:00:00.000000Z"


def _subscribe(ledger: Ledger, n: int) -> None:
    for i in range(n):
        ledger.webhooks.create("shop", f"https://example.com/hook{i}")


def test_concurrent_subscribes_never_pass_the_limit_of_49(
    ledger: Ledger, app_client: TestClient, admin_headers: Headers
) -> None:
    """Each event fans out in one transaction of 2 actions per subscription: a 50th
    subscription would break every later fan-out of the program."""
    _subscribe(ledger, 45)

    def send(i: int) -> tuple[int, str | None]:
        headers = {**admin_headers, "Idempotency-Key": f"race-{i}"}
        body = {"url": f"https://example.com/race{i}"}
        return app_client.post("/v1/webhooks", json=body, headers=headers).status_code, None

    assert _at_once(send) == Counter({(201, None): 4, (422, None): 4})
    assert len(ledger.webhooks.list("shop")) == 49


@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_subscribe_that_finds_the_limit_passed_once_written_removes_itself(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's create can land between the count and the write."""
    _subscribe(ledger, 49)
    listed = ledger.webhooks.subs.list
    calls = iter([[], None])  # the first count is stale: it saw none

    def stale(program: str) -> list[Any]:
        seen = next(calls, None)
        return listed(program) if seen is None else seen

    monkeypatch.setattr(ledger.webhooks.subs, "list", stale)
    with pytest.raises(ValidationError, match="at most 49"):
        ledger.webhooks.create("shop", "https://example.com/late")
    monkeypatch.undo()
    assert len(ledger.webhooks.list("shop")) == 49
    assert "https://example.com/late" not in {s.url for s in ledger.webhooks.list("shop")}


@pytest.mark.parametrize("engine", ["sqlite"])
@pytest.mark.parametrize("key", ["a b", "-x", "k" * 129])
def test_a_malformed_idempotency_key_on_a_billing_record_is_a_422_not_ignored(
    app_client: TestClient, write_headers: Headers, key: str
) -> None:
    body = {
        "id": "rec-1",
        "partner": "acme",
        "order_id": "o-1",
        "amount": 100,
        "currency": "USD",
        "rate": "0.1",
        "time": "2026-01-01T00:00:00Z",
    }
    r = app_client.post(
        "/v1/billing/records", json=body, headers={**write_headers, "Idempotency-Key": key}
    )
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"] == ["header", "Idempotency-Key"]
    assert app_client.get("/v1/billing/records/rec-1", headers=write_headers).status_code == 404


@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_problem_quotes_a_huge_input_and_never_repeats_it_whole(
    app_client: TestClient, admin_headers: Headers, write_headers: Headers
) -> None:
    """A 100,000-character value came back whole in the detail (and again in
    ``errors``): a posting's ``type``, a loyalty rule, a webhook event type, an unknown
    or repeated field's name. Each problem now quotes at most a few hundred characters."""
    big = "Z" * 100_000
    assert app_client.post("/v1/accounts", json={"account": "ann"}, headers=write_headers)
    posting = {"type": big, "account": "ann", "fund": "points", "amount": 1}
    repeated = f'{{"account": "bob", "{big}": 1, "{big}": 2}}'.encode()
    json_body = {**admin_headers, "content-type": "application/json"}
    sent = [
        ("POST", "/v1/transactions", {"json": posting}, {"Idempotency-Key": "t-1"}),
        ("PUT", "/v1/program/loyalty", {"json": {"earn": {"rounding": big}}}, {}),
        ("POST", "/v1/webhooks", {"json": {"url": "https://example.com/h", "types": [big]}}, {}),
        ("POST", "/v1/accounts", {"json": {"account": "bob", big: 1}}, {}),
        ("POST", "/v1/accounts", {"content": repeated}, json_body),
    ]
    for method, path, body, extra in sent:
        r = app_client.request(method, path, headers={**admin_headers, **extra}, **body)
        assert 400 <= r.status_code < 500, r.text[:300]
        assert r.headers["content-type"] == "application/problem+json"
        assert len(r.content) < 3000, (path, r.text[:300])
        assert "ZZZZZZZZZZ" in r.json()["detail"]  # still says what was refused


def test_a_problem_and_the_access_log_cut_a_huge_path(
    app_client: TestClient, write_headers: Headers, caplog: pytest.LogCaptureFixture
) -> None:
    """A 30,000-character path came back whole as the problem's ``instance`` (a
    30 KB answer, whatever the status) and whole in the access log line; both now
    hold at most 1,000 characters of it, ending in ``…``."""
    huge = "a" * 30_000
    sent = [
        ("GET", f"/v1/accounts/{huge}"),  # 422: the account id is too long
        ("GET", f"/v1/{huge}"),  # 404
        ("PATCH", f"/v1/accounts/{huge}/notifications"),  # 405
        ("POST", f"/v1/accounts/{huge}/wallet/grants"),  # 415 (a text body)
    ]
    for method, path in sent:
        with caplog.at_level(logging.INFO, "tallybook.http.access"):
            r = app_client.request(method, path, headers=write_headers, content=b"x")
        assert 400 <= r.status_code < 500, r.text[:300]
        assert r.headers["content-type"] == "application/problem+json"
        assert len(r.content) < 3000, (method, r.status_code, len(r.content))
        instance = r.json()["instance"]
        assert len(instance) == 1000, len(instance)
        assert instance.endswith("…")
        assert path.startswith(instance[:-1])  # still the request's path
        (record,) = [rec for rec in caplog.records if rec.name == "tallybook.http.access"]
        line = JsonFormatter().format(record)
        assert len(line) < 2000, len(line)
        assert json.loads(line)["path"] == instance
        caplog.clear()
    # a path of any route's length is repeated whole
    r = app_client.get("/v1/accounts/nobody/balances", headers=write_headers)
    assert r.json()["instance"] == "/v1/accounts/nobody/balances"


def test_a_validation_problem_lists_the_first_20_errors_and_counts_the_rest(
    app_client: TestClient, admin_headers: Headers
) -> None:
    """A body with 10,000 unknown fields was answered with 10,000 ``errors`` (an
    889 KB answer); the problem now lists the first 20 and counts the others."""
    fields = {"account": "bob", **{f"f{i}": 1 for i in range(10_000)}}
    sent = [
        ("/v1/accounts", fields),
        ("/v1/reports/run", {"kinds": ["nope"] * 10_000}),
    ]
    for path, body in sent:
        r = app_client.post(path, json=body, headers={**admin_headers, "Idempotency-Key": "k-1"})
        assert r.status_code == 422, r.text[:300]
        problem = r.json()
        assert len(r.content) < 6000, (path, len(r.content))
        assert len(problem["errors"]) == 20
        assert problem["errors_omitted"] == 10_000 - 20
        assert "(and 9995 more)" in problem["detail"]
    assert app_client.get("/v1/accounts/bob", headers=admin_headers).status_code == 404
    # 20 errors or fewer: all listed, no count
    few = {"account": "bob", **{f"f{i}": 1 for i in range(20)}}
    r = app_client.post(
        "/v1/accounts", json=few, headers={**admin_headers, "Idempotency-Key": "k-2"}
    )
    assert len(r.json()["errors"]) == 20
    assert "errors_omitted" not in r.json()


def test_an_unknown_posting_type_is_refused_naming_the_accepted_types(
    app_client: TestClient, write_headers: Headers
) -> None:
    """The 422 quoted the unknown ``type`` first and was cut at 200 characters
    before it named the accepted types; it now names them first."""
    accepted = "'credit', 'debit', 'adjust', 'raw'"
    for given in ("bogus", "Z" * 300):
        posting = {"type": given, "account": "ann", "fund": "points", "amount": 1}
        r = app_client.post(
            "/v1/transactions", json=posting, headers={**write_headers, "Idempotency-Key": "t-1"}
        )
        assert r.status_code == 422, r.text[:300]
        (error,) = r.json()["errors"]
        assert error["msg"].startswith(f"'type' must be one of {accepted}, not '{given[:10]}")
        assert accepted in r.json()["detail"]
