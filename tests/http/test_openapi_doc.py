"""The OpenAPI document is usable by generated clients; /docs and /redoc need no CDN."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, m, op) for path, ops in spec["paths"].items() for m, op in ops.items()]


@sqlite_only
def test_operation_ids_are_stable_unique_and_readable(app_client) -> None:
    spec = app_client.get("/openapi.json").json()
    ids = [op["operationId"] for _, _, op in _operations(spec)]
    assert Counter(ids).most_common(1)[0][1] == 1
    assert all(re.fullmatch(r"[a-z]+_[a-z0-9_]+", i) for i in ids), ids
    by_path = {(path, m): op["operationId"] for path, m, op in _operations(spec)}
    assert by_path[("/v1/transactions", "post")] == "ledger_post_transaction"
    assert by_path[("/v1/accounts/{account}/balances", "get")] == "ledger_get_balances"
    assert by_path[("/healthz", "get")] == "system_healthz"


@sqlite_only
def test_schema_names_are_clean_and_every_ref_resolves(app_client) -> None:
    spec = app_client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name) for name in schemas), list(schemas)
    assert {"LedgerCreditIn", "LedgerDebitIn", "WalletCreditIn", "WalletDebitIn"} <= set(schemas)
    text = json.dumps(spec)
    for ref in set(re.findall(r'"#/components/schemas/([^"]+)"', text)):
        assert ref in schemas, ref


@sqlite_only
def test_bearer_scheme_on_every_keyed_route(app_client) -> None:
    spec = app_client.get("/openapi.json").json()
    scheme = spec["components"]["securitySchemes"]["ApiKey"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    for path, method, op in _operations(spec):
        if path.startswith("/v1/") and path != "/v1/events/sns":  # SNS: HTTP Basic password
            assert op.get("security") == [{"ApiKey": []}], (method, path)
            assert "scope" in op["description"], (method, path)


@sqlite_only
def test_idempotency_key_is_required_where_the_server_requires_it(
    app_client, write_headers, open_account
) -> None:
    spec = app_client.get("/openapi.json").json()

    def header(path: str) -> dict[str, Any]:
        params = spec["paths"][path]["post"]["parameters"]
        return next(p for p in params if p["name"] == "Idempotency-Key")

    assert header("/v1/transactions")["required"] is True
    assert header("/v1/transfers")["required"] is True
    assert header("/v1/accounts")["required"] is False  # opening is idempotent by itself
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 5}
    r = app_client.post("/v1/transactions", json=body, headers=write_headers)
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["errors"][0]["loc"] == ["header", "Idempotency-Key"]


@sqlite_only
def test_docs_and_redoc_load_their_assets_from_the_app(app_client) -> None:
    for page in ("/docs", "/redoc"):
        html = app_client.get(page).text
        sources = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert sources, page
        assert all(s.startswith("/docs-assets/") for s in sources), sources
        for source in sources:
            asset = app_client.get(source)
            assert asset.status_code == 200, source
            assert len(asset.content) > 1000, source
    assert "https://" not in app_client.get("/docs").text


HTTP_MD = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
#: the scope docs/http.md gives a method before naming the routes that differ
_SCOPE_OF_METHOD = {"get": "read", "post": "write", "delete": "write", "put": "admin"}


def _scope(op: dict[str, Any]) -> str | None:
    needs = r"Needs an API key with the `(read|write|admin)` scope"
    found = re.search(needs, op.get("description", ""))
    return None if found is None else found.group(1)


@sqlite_only
def test_http_md_names_every_route_whose_scope_is_not_its_methods(app_client) -> None:
    """docs/http.md's "Auth" rule (read for GET, write for POST, ...) and the routes
    it names as exceptions, and its table of ledger endpoints, are the scopes the
    OpenAPI document states (and the server requires)."""
    spec = app_client.get("/openapi.json").json()
    auth = HTTP_MD[HTTP_MD.index("- **Auth.**") : HTTP_MD.index("- **Revocation")]
    auth = " ".join(auth.split())
    assert "`DELETE` of a notification" in auth
    for path, method, op in _operations(spec):
        scope = _scope(op)
        if scope is None or scope == _SCOPE_OF_METHOD[method]:
            continue
        named = path.removesuffix("/{sub_id}").split("/{sub_id}/")[0].split("/{account}")[0]
        if method == "delete":
            assert ("notification" in path and scope == "write") or named in auth, (method, path)
        else:
            assert named in auth, (method, path, scope)
    ledger = HTTP_MD[HTTP_MD.index("## Ledger endpoints") : HTTP_MD.index("## Generated clients")]
    rows = [line.replace("\\|", "").split(" | ") for line in ledger.splitlines()]
    table = [(r[0].strip("| `"), r[1]) for r in rows if r[0].startswith("| `")]
    assert len(table) == 13
    for cell, scopes in table:
        verbs, path = cell.replace("`", "").rsplit(" ", 1)
        for verb, scope in zip(verbs.split(" / "), scopes.split(" / "), strict=True):
            assert _scope(spec["paths"][path.split("?")[0]][verb.lower()]) == scope, cell


@sqlite_only
def test_problem_bodies_have_the_fields_http_md_lists(app_client, write_headers) -> None:
    r = app_client.post(
        "/v1/transactions",
        json={"type": "credit", "account": "alice", "fund": "points", "amount": 1.5},
        headers={**write_headers, "Idempotency-Key": "t-1"},
    )
    assert r.status_code == 422
    listed = '{"type": "https://tallybook.dev/problems/<code>", "title", "status", "detail", '
    assert f'{listed}"instance", "request_id"}}' in HTTP_MD
    fields = {"type", "title", "status", "detail", "instance", "request_id", "errors"}
    assert set(r.json()) == fields
    assert r.json()["instance"] == "/v1/transactions"
    assert 'one `{"loc", "msg", "type"}` per field' in " ".join(HTTP_MD.split())
    assert all(set(e) == {"loc", "msg", "type"} for e in r.json()["errors"])
    headers = {**write_headers, "Idempotency-Key": "-x"}
    r = app_client.post("/v1/accounts", json={"account": "alice"}, headers=headers)
    assert r.status_code == 422  # the pattern's first character
    assert "starting with a letter or digit" in HTTP_MD


#: the fields that hold a list endpoint's items (a resource's own lists, such as a
#: program's funds or a transaction's legs, are not pages)
LISTS = {
    "entries", "transactions", "changes", "lots", "members", "notifications",
    "records", "reports", "subscriptions", "deliveries",
}  # fmt: skip


@sqlite_only
def test_http_md_says_what_an_unknown_query_parameter_does(
    app_client, write_headers, open_account, credit
) -> None:
    """A misspelt query parameter (`?limit=5&lmit=3`) was answered as if absent, and
    http.md, which says a parameter given twice is a 422, said nothing of it."""
    open_account("alice")
    for _ in range(3):
        credit("alice", 10)
    r = app_client.get(
        "/v1/accounts/alice/entries?fund=points&limit=2&lmit=3", headers=write_headers
    )
    assert r.status_code == 200, r.text
    assert len(r.json()["entries"]) == 2
    query = HTTP_MD[HTTP_MD.index("- **Query parameters**") : HTTP_MD.index("- **Request bodies**")]
    assert "`?limit=5&lmit=3`) is ignored" in query


@sqlite_only
def test_http_md_says_which_lists_are_paged_and_their_default_limit(app_client) -> None:
    spec = app_client.get("/openapi.json").json()
    pages = HTTP_MD[HTTP_MD.index("- **Pages.**") : HTTP_MD.index("## Ledger endpoints")]
    pages = " ".join(pages.split())
    hundred = pages[pages.index("100 for") : pages.index(") and return")]
    listed = 0
    for path, method, op in _operations(spec):
        params = {p["name"]: p.get("schema", {}) for p in op.get("parameters", [])}
        schema = op["responses"].get("200", {}).get("content", {}).get("application/json", {})
        ref = schema.get("schema", {}).get("$ref", "")
        fields = spec["components"]["schemas"].get(ref.rsplit("/", 1)[-1], {}).get("properties", {})
        is_list = schema.get("schema", {}).get("type") == "array" or bool(LISTS & set(fields))
        if method != "get" or not (is_list or "limit" in params):
            continue
        listed += 1
        short = path.removeprefix("/v1/accounts/{account}")
        if "cursor" in params:
            default = params["limit"]["default"]
            maximum = params["limit"]["maximum"]
            at_most = f"at most {maximum} for `{path.replace('{sub_id}', '{id}')}`"
            assert maximum == 1000 or at_most in pages, (path, maximum)
            assert (default == 100) == (short in hundred), (path, default)
            assert default in (50, 100), path
        elif "limit" in params:
            assert f"`GET {path}` takes `limit` (default {params['limit']['default']})" in pages
        else:
            assert f"`{short}`" in pages or f"`{path}`" in pages, path
    assert listed == 15


@sqlite_only
def test_every_operation_has_a_summary_and_its_error_answers_are_problems(app_client) -> None:
    """Each operation names itself (summary, operationId) and documents its 4xx and 5xx
    answers as problem+json. `POST /v1/events/sns` described its own 401, 403 and 422
    without the body, so a generated client typed those answers as empty."""
    spec = app_client.get("/openapi.json").json()
    bare = [
        f"{method.upper()} {path} {status}"
        for path, method, op in _operations(spec)
        for status, answer in op["responses"].items()
        if status[0] in "45" and "application/problem+json" not in answer.get("content", {})
    ]
    assert bare == []
    # each also listed application/json, which the server never sends for an error
    also_json = [
        f"{method.upper()} {path} {status}"
        for path, method, op in _operations(spec)
        for status, answer in op["responses"].items()
        if status[0] in "45" and set(answer.get("content", {})) != {"application/problem+json"}
    ]
    assert also_json == []
    unnamed = [
        f"{method.upper()} {path}"
        for path, method, op in _operations(spec)
        if not op.get("summary") or not op.get("operationId")
    ]
    assert unnamed == []
    # /healthz and /readyz had a summary only: /docs said nothing of their key or answers
    undescribed = [
        f"{method.upper()} {path}"
        for path, method, op in _operations(spec)
        if not op.get("description")
    ]
    assert undescribed == []
    # "Delete it", "Deliver again", "One subscription" said too little in a client's list
    terse = [
        f"{method.upper()} {path}: {op['summary']}"
        for path, method, op in _operations(spec)
        if len(op["summary"].split()) < 4
    ]
    assert terse == []
    assert spec["paths"]["/v1/events/sns"]["post"]["responses"]["401"]["description"].startswith(
        "no or unknown key"
    )


@sqlite_only
def test_every_parameter_says_what_it_is(app_client) -> None:
    """15 parameters had no description (`order` of the entries and the notification
    history, `fund` of the threshold, the wallet transactions' and billing records'
    `limit` and `cursor`, the reports' `kind`, `window` and `file`, ...), so /docs and
    a generated client showed them bare."""
    spec = app_client.get("/openapi.json").json()
    bare = [
        f"{method.upper()} {path} {param['in']} {param['name']}"
        for path, method, op in _operations(spec)
        for param in op.get("parameters", [])
        if not param.get("description")
    ]
    assert bare == []


@sqlite_only
def test_every_problem_answer_has_an_example_of_its_status(app_client) -> None:
    """No 4xx or 5xx answer had an example, so /docs showed an empty problem and a
    client author had to guess its shape; each now has one, valid against `Problem`,
    whose `status` is the answer's."""
    import jsonschema

    spec = app_client.get("/openapi.json").json()
    missing = []
    for path, method, op in _operations(spec):
        for status, answer in op["responses"].items():
            if status[0] not in "45":
                continue
            media = answer["content"]["application/problem+json"]
            if "example" not in media:
                missing.append(f"{method.upper()} {path} {status}")
                continue
            example = media["example"]
            jsonschema.validate(example, {"components": spec["components"], **media["schema"]})
            assert example["status"] == int(status), (path, status)
            assert example["type"].startswith("https://tallybook.dev/problems/")
    assert missing == []


@sqlite_only
def test_every_request_body_has_an_example_the_server_accepts(
    app_client, admin_headers, write_headers, tmp_path, monkeypatch
) -> None:
    """Each operation's request body carries an example (none had one), valid against
    its schema; posted in this order, the server accepts every one."""
    import jsonschema

    monkeypatch.setenv("TALLYBOOK_REPORTS_OUT", str(tmp_path / "reports"))
    spec = app_client.get("/openapi.json").json()
    examples: dict[str, dict[str, Any]] = {}
    for path, method, op in _operations(spec):
        for media_type, media in op.get("requestBody", {}).get("content", {}).items():
            assert "example" in media, (method, path, media_type)
            if media_type == "application/json":
                schema = {"components": spec["components"], **media["schema"]}
                jsonschema.validate(media["example"], schema)
                examples[op["operationId"]] = {"path": path, "method": method, **media}
    assert len(examples) == 19

    def send(operation: str, path: str, headers: dict[str, str], key: str = "") -> None:
        example = examples[operation]
        sent = {**headers, "Idempotency-Key": key or f"example-{operation}"}
        r = app_client.request(example["method"], path, json=example["example"], headers=sent)
        assert r.status_code < 300, (operation, r.text)

    admin, write = admin_headers, write_headers
    send("ledger_put_low_balance_threshold", "/v1/program/funds/cash/low-balance-threshold", admin)
    send("ledger_open_account", "/v1/accounts", write)
    app_client.post("/v1/accounts", json={"account": "bob"}, headers=write)
    send("ledger_post_transaction", "/v1/transactions", write)
    send("ledger_post_transfer", "/v1/transfers", write)
    send("wallet_post_credit", "/v1/accounts/alice/wallet/credits", write)
    send("wallet_post_grant", "/v1/accounts/alice/wallet/grants", write)
    send("wallet_post_hold", "/v1/accounts/alice/wallet/holds", write, key="h-1")
    send("wallet_capture_hold", "/v1/holds/h-1/capture", write)
    send("wallet_post_held_credit", "/v1/accounts/bob/wallet/held-credits", write)
    send("wallet_post_debit", "/v1/accounts/alice/wallet/debits", write)
    send("loyalty_put_config", "/v1/program/loyalty", admin)
    send("loyalty_earn", "/v1/accounts/alice/earn", write)
    send("loyalty_redeem", "/v1/accounts/alice/redeem", write)
    send("notifications_put_rules", "/v1/program/notification-rules", admin)
    send("notifications_add_notification", "/v1/accounts/alice/notifications", write)
    send("notifications_ingest_sns", "/v1/events/sns", write)
    text = spec["paths"]["/v1/events/sns"]["post"]["requestBody"]["content"]["text/plain"]
    assert json.loads(text["example"]) == examples["notifications_ingest_sns"]["example"]
    send("billing_ingest_record", "/v1/billing/records", write)
    send("billing_run_reports", "/v1/reports/run", admin)
    send("webhooks_create_subscription", "/v1/webhooks", admin)


#: answer fields made of random ids or of the wall clock (webhook positions)
_RANDOM = {"secret": "<secret>", "secret_hint": "<secret>", "position": "<position>"}


def _shape(value: Any, key: str = "") -> Any:
    """An answer with its random ids, wall-clock positions and cursors made placeholders
    (its times are the ledger clock's, which the test sets)."""
    if isinstance(value, dict):
        return {k: _shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if key == "at_us":
        return "<time>"
    if isinstance(value, str):
        if key == "cursor":
            return "<cursor>"
        if key in _RANDOM:
            return _RANDOM[key]
        if re.fullmatch(r"n-\d{16}-[0-9a-f]{10}", value):
            return "<notification id>"
        if re.fullmatch(r"(sub|evt)_[0-9a-f]+", value):
            return f"<{value[:3]} id>"
    return value


def _answers_with_json(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(operationId, status, media) of every 2xx JSON answer in the document."""
    return [
        (op["operationId"], code, response["content"]["application/json"])
        for _, _, op in _operations(spec)
        for code, response in op["responses"].items()
        if code.startswith("2") and "application/json" in response.get("content", {})
    ]


@sqlite_only
def test_every_2xx_json_answer_has_an_example_valid_against_its_schema(app_client) -> None:
    """About 20 answers (most reads, the jobs, webhooks, billing) had no example."""
    import jsonschema

    spec = app_client.get("/openapi.json").json()
    missing = [(op, code) for op, code, media in _answers_with_json(spec) if "example" not in media]
    assert not missing
    for _, _, media in _answers_with_json(spec):
        schema = {"components": spec["components"], **media.get("schema", {})}
        jsonschema.validate(media["example"], schema)


@sqlite_only
def test_every_answer_example_is_the_servers_answer(
    app_client, admin_headers, write_headers, ledger, clock
) -> None:
    """Each 2xx answer's example is valid against the response schema and, random ids
    and cursors aside, what the server answers to the request examples posted in
    order, one second apart from 2026-01-31T12:00:00Z (so an example cannot drift
    from the API)."""
    import jsonschema

    from tallybook.http.openapi import REQUEST_EXAMPLES, RESPONSE_EXAMPLES
    from tallybook.webhooks.sender import Response as Sent

    clock.set(datetime(2026, 1, 31, 12, tzinfo=UTC))
    spec = app_client.get("/openapi.json").json()
    documented: dict[str, dict[str, Any]] = {}
    for op, _, media in _answers_with_json(spec):
        schema = {"components": spec["components"], **media.get("schema", {})}
        documented[op] = {"schema": schema, "example": media["example"]}
    assert set(documented) == set(RESPONSE_EXAMPLES)

    def call(path: str, headers: dict[str, str], op: str = "", key: str = "", **kw: Any) -> Any:
        method = kw.pop("method", "POST" if key else "GET")
        sent = {**headers, "Idempotency-Key": key} if key else headers
        r = app_client.request(method, path, json=kw.get("body"), headers=sent)
        assert r.status_code < 300, (path, r.text)
        if method != "GET":
            clock.advance(timedelta(seconds=1))
        if op:
            jsonschema.validate(r.json(), documented[op]["schema"])
            example = documented.pop(op)["example"]
            answer = r.json()
            if op == "ledger_get_program":  # the fixture made it before the clock was set
                answer["created_at"] = example["created_at"]
            assert _shape(answer) == _shape(example), op
        return r.json()

    rq, admin, write = REQUEST_EXAMPLES, admin_headers, write_headers
    call(
        "/v1/program/loyalty",
        admin,
        "loyalty_put_config",
        method="PUT",
        body=rq["loyalty_put_config"],
    )
    call("/v1/accounts", write, "ledger_open_account", key="o1", body=rq["ledger_open_account"])
    call("/v1/accounts", write, key="o2", body={"account": "bob"})
    for op, path, key in [
        ("ledger_post_transaction", "/v1/transactions", "txn-1001"),
        ("ledger_post_transfer", "/v1/transfers", "tr-1"),
        ("wallet_post_credit", "/v1/accounts/alice/wallet/credits", "topup-1"),
        ("wallet_post_hold", "/v1/accounts/alice/wallet/holds", "h-1"),
        ("wallet_capture_hold", "/v1/holds/h-1/capture", "cap-1"),
    ]:
        call(path, write, op, key, body=rq[op])
    call("/v1/accounts/alice/wallet/holds", write, key="h-2", body={"amount": 100})
    call("/v1/holds/h-2/void", write, "wallet_void_hold", "void-1")
    for op, path, key in [
        ("wallet_post_debit", "/v1/accounts/alice/wallet/debits", "debit-77"),
        ("loyalty_earn", "/v1/accounts/alice/earn", "earn-1002"),
        ("loyalty_redeem", "/v1/accounts/alice/redeem", "redeem-1"),
    ]:
        call(path, write, op, key, body=rq[op])
    body = rq["notifications_add_notification"]
    op = "notifications_add_notification"
    added = call("/v1/accounts/alice/notifications", write, op, key="n-1", body=body)
    call("/v1/accounts/alice/notifications", write, "notifications_list_notifications")
    call("/v1/accounts/alice/wallet", write, "wallet_get_balance")
    call("/v1/accounts/alice", write, "ledger_get_account")
    call("/v1/accounts/alice/entries?fund=points&limit=2", write, "ledger_get_entries")
    call("/v1/accounts/alice/balances", write, "ledger_get_balances")
    call("/v1/transactions/txn-1001", write, "ledger_get_transaction")
    call("/v1/wallet/transactions/debit-77", write, "wallet_get_transaction")
    call("/v1/holds/h-1", write, "wallet_get_hold")
    call("/v1/orders/order-1002", write, "loyalty_get_order")
    call("/v1/accounts/alice/tier", write, "loyalty_get_tier")
    call("/v1/program", write, "ledger_get_program")
    call("/v1/program/loyalty", write, "loyalty_get_config")
    call("/v1/accounts/alice/wallet/holds", write, "wallet_list_holds")
    call("/v1/orders/order-1002/transactions", write, "ledger_get_order_transactions")
    # the other answers, after every write the answers above show
    call("/healthz", {}, "system_healthz")
    call("/readyz", {}, "system_readyz")
    call("/v1/accounts/alice/transactions?limit=2", write, "ledger_get_account_transactions")
    call("/v1/system-accounts/@issuance", admin, "ledger_get_system_balance")
    call("/v1/accounts/alice/tier/history", write, "loyalty_get_tier_history")
    call("/v1/accounts/alice/expiring?days=800", write, "loyalty_get_expiring")
    call("/v1/tiers/member/members", write, "loyalty_get_members")
    path = f"/v1/accounts/alice/notifications/{added['id']}"
    call(path, write, "notifications_get_notification")
    call("/v1/accounts/alice/notifications/history", write, "notifications_notification_history")
    call(path, write, "notifications_dismiss_notification", method="DELETE")
    body = {"type": "TierChanged", "payload": {"tier": "member"}}
    call("/v1/accounts/alice/notifications", write, key="n-2", body=body)
    path = "/v1/accounts/alice/notifications?type=TierChanged"
    call(path, write, "notifications_dismiss_type", method="DELETE")
    op = "ledger_put_low_balance_threshold"
    call("/v1/program/funds/cash/low-balance-threshold", admin, op, method="PUT", body=rq[op])
    op = "notifications_put_rules"
    call("/v1/program/notification-rules", admin, op, method="PUT", body=rq[op])
    call("/v1/program/notification-rules", write, "notifications_get_rules")
    for op, path, key in [
        ("wallet_post_grant", "/v1/accounts/alice/wallet/grants", "grant-1"),
        ("wallet_post_held_credit", "/v1/accounts/alice/wallet/held-credits", "held-1"),
    ]:
        call(path, write, op, key, body=rq[op])
    call("/v1/accounts/alice/wallet/grants", write, "wallet_list_grants")
    call("/v1/accounts/alice/wallet/transactions?limit=2", write, "wallet_list_transactions")
    call("/v1/wallet/reconcile", admin, "wallet_post_reconcile", method="POST")
    call("/v1/loyalty/expire", admin, "loyalty_run_expire", method="POST")
    call("/v1/loyalty/downgrade", admin, "loyalty_run_downgrade", method="POST")
    sns = rq["notifications_ingest_sns"]["application/json"]
    call("/v1/events/sns", write, "notifications_ingest_sns", method="POST", body=sns)
    call("/v1/events/stats", admin, "notifications_ingest_stats")
    op = "billing_ingest_record"
    call("/v1/billing/records", write, op, key="r1", body=rq[op])
    q = "since=2026-01-31T00:00:00Z&until=2026-02-01T00:00:00Z"
    call(f"/v1/billing/records?{q}", write, "billing_list_records")
    call("/v1/billing/records/r1", write, "billing_get_record")
    op = "webhooks_create_subscription"
    sub = call("/v1/webhooks", admin, op, key="sub-1", body=rq[op])["id"]
    call(f"/v1/webhooks/{sub}/disable", admin, "webhooks_disable_subscription", method="POST")
    call(f"/v1/webhooks/{sub}/enable", admin, "webhooks_enable_subscription", method="POST")
    posting = {**rq["ledger_post_transaction"], "order_id": "order-1003"}
    call("/v1/transactions", write, key="txn-1003", body=posting)
    call("/v1/webhooks", admin, "webhooks_list_subscriptions")
    call(f"/v1/webhooks/{sub}", admin, "webhooks_get_subscription")

    class Accepting:
        def post(self, url: str, headers: Any, body: bytes, timeout: float) -> Sent:
            return Sent(200, 12)

    ledger.webhooks.worker(sender=Accepting()).run_once()
    page = call(f"/v1/webhooks/{sub}/deliveries?limit=2", admin, "webhooks_list_deliveries")
    position = page["deliveries"][0]["position"]
    path = f"/v1/webhooks/{sub}/deliveries/{position}/resend"
    call(path, admin, "webhooks_resend_delivery", method="POST")
    clock.advance(timedelta(hours=2))
    op = "billing_run_reports"
    window = call("/v1/reports/run", admin, op, method="POST", body=rq[op])["reports"][0]["window"]
    call("/v1/reports?limit=2", write, "billing_list_reports")
    call(f"/v1/reports/{window}/billing.json", write, "billing_download_report")
    assert not documented  # every example was compared


#: where each operation with a request body or a numeric query parameter is sent
#: (a path filled in for the state the test sets up) and with which key
_LIMIT_PATHS = {
    "ledger_put_low_balance_threshold": ("/v1/program/funds/cash/low-balance-threshold", "admin"),
    "ledger_post_transaction": ("/v1/transactions", "write"),
    "ledger_post_transfer": ("/v1/transfers", "write"),
    "wallet_post_grant": ("/v1/accounts/alice/wallet/grants", "write"),
    "wallet_post_hold": ("/v1/accounts/alice/wallet/holds", "write"),
    "wallet_post_credit": ("/v1/accounts/alice/wallet/credits", "write"),
    "wallet_post_held_credit": ("/v1/accounts/alice/wallet/held-credits", "write"),
    "wallet_post_debit": ("/v1/accounts/alice/wallet/debits", "write"),
    "wallet_capture_hold": ("/v1/holds/h-1/capture", "write"),
    "loyalty_put_config": ("/v1/program/loyalty", "admin"),
    "loyalty_earn": ("/v1/accounts/alice/earn", "write"),
    "loyalty_redeem": ("/v1/accounts/alice/redeem", "write"),
    "notifications_put_rules": ("/v1/program/notification-rules", "admin"),
    "billing_ingest_record": ("/v1/billing/records", "write"),
}
#: a body field that, given, excludes another (``expiry``: days or months)
_EXCLUDES = {("expiry", "days"): ("expiry", "months")}
#: a number within its limits that the state refuses (422 ``validation`` naming the
#: state, not the limit): a capture of more than the hold holds
_REFUSED_BY_THE_STATE = {"wallet_capture_hold ('amount',)": "hold h-1 holds 400"}
#: bodies beside the examples, for the bounded numbers those leave out
_MORE_BODIES: dict[str, list[dict[str, Any]]] = {
    "ledger_post_transaction": [
        {"type": "adjust", "account": "alice", "fund": "points", "amount": -5}
    ],
    "loyalty_put_config": [
        {
            "tiers": [{"name": "member", "threshold": 0}, {"name": "gold", "threshold": 5000}],
            "qualification": {"window": "rolling", "months": 12},
            "downgrade": {"rule": "after_hold", "hold_months": 12, "max_steps": 1},
            "campaigns": [
                {
                    "id": "c1",
                    "starts": "2026-01-01",
                    "ends": "2027-01-01",
                    "multiplier": 2,
                    "bonus": 10,
                    "min_amount": 0,
                }
            ],
        }
    ],
}
#: fields that name what a request creates: each variant takes a new one
_IDENTITIES = ("id", "order_id")


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].split("/")[-1]]
    return schema


def _branch(spec: dict[str, Any], schema: dict[str, Any], value: Any) -> dict[str, Any]:
    """The alternative of a union (anyOf, oneOf) that ``value`` takes."""
    schema = _resolve(spec, schema)
    for alt in schema.get("anyOf", schema.get("oneOf", [])):
        alt = _resolve(spec, alt)
        consts = {k: p["const"] for k, p in alt.get("properties", {}).items() if "const" in p}
        if isinstance(value, dict) and "properties" in alt:
            if all(value.get(k) == v for k, v in consts.items()):
                return alt
            continue
        kind = alt.get("type")
        if isinstance(value, list) and kind == "array":
            return alt
        if (value is None or isinstance(value, int | float)) and kind in ("integer", "number"):
            return alt
    return schema


def _numeric_fields(
    spec: dict[str, Any], schema: dict[str, Any], value: Any, path: tuple[Any, ...] = ()
) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """(path in the body, its number schema) of every number the schema bounds, in the
    example or beside its fields (an optional field the example leaves out)."""
    schema = _branch(spec, schema, value)
    if schema.get("type") in ("integer", "number"):
        bounds = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
        return [(path, schema)] if bounds & set(schema) else []
    found = []
    if isinstance(value, list) and value:
        found += _numeric_fields(spec, schema.get("items", {}), value[0], (*path, 0))
    if isinstance(value, dict):
        children = dict(schema.get("properties", {}))
        extra = schema.get("additionalProperties")
        for name in value:
            if name not in children and isinstance(extra, dict):
                children[name] = extra
        for name, child in children.items():
            found += _numeric_fields(spec, child, value.get(name), (*path, name))
    return found


def _with(body: Any, path: tuple[Any, ...], number: Any) -> Any:
    body = json.loads(json.dumps(body))
    target = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = number
    excluded = _EXCLUDES.get(tuple(p for p in path if not isinstance(p, int)))
    if excluded is not None:
        target.pop(excluded[-1], None)
    return body


def _limits(schema: dict[str, Any]) -> list[tuple[Any, bool]]:
    """(value, inside the schema's limits) at each bound and one step beyond it."""
    step = 1 if schema["type"] == "integer" else 0.5
    out: list[tuple[Any, bool]] = []
    for name, sign in (("minimum", -1), ("maximum", 1)):
        if name in schema:
            bound = int(schema[name]) if schema["type"] == "integer" else schema[name]
            out += [(bound, True), (bound + sign * step, False)]
    for name, sign in (("exclusiveMinimum", -1), ("exclusiveMaximum", 1)):
        if name in schema:
            bound = int(schema[name]) if schema["type"] == "integer" else schema[name]
            out += [(bound - sign * step, True), (bound, False)]
    return out


@sqlite_only
def test_the_server_agrees_with_every_numeric_limit_the_schema_states(
    app_client, admin_headers, write_headers, monkeypatch, tmp_path
) -> None:
    """Every bounded number of a request body (config bodies included) or query: the
    bound is not refused as invalid, one step beyond is (422 ``validation``; 400
    ``invalid-config`` for the loyalty rules, as every bad rule). The notification
    and loyalty rules stated none of the limits the server enforces."""
    monkeypatch.setenv("TALLYBOOK_REPORTS_OUT", str(tmp_path / "reports"))
    spec = app_client.get("/openapi.json").json()
    headers = {"write": write_headers, "admin": admin_headers}
    rules = spec["paths"]["/v1/program/loyalty"]["put"]["requestBody"]["content"]
    app_client.put("/v1/program/loyalty", json=rules["application/json"]["example"],
                   headers=admin_headers)  # fmt: skip
    for account in ("alice", "bob"):
        app_client.post("/v1/accounts", json={"account": account}, headers=write_headers)
    topup = {"fund": "cash", "amount": 10_000}
    credited = app_client.post(
        "/v1/accounts/alice/wallet/credits",
        json=topup,
        headers={**write_headers, "Idempotency-Key": "topup-1"},
    )
    assert credited.status_code == 201, credited.text
    hold = {"amount": 400, "expires_in": 3600}
    held = app_client.post(
        "/v1/accounts/alice/wallet/holds",
        json=hold,
        headers={**write_headers, "Idempotency-Key": "h-1"},
    )
    assert held.status_code == 201, held.text
    made = app_client.post(
        "/v1/webhooks", json={"url": "https://example.com/hooks"}, headers=admin_headers
    )
    sub = made.json()["id"]
    invalid = {"validation", "invalid-config"}
    checked: list[str] = []
    n = 0

    def judged(r: Any, inside: bool, what: str) -> None:
        kind = r.json().get("type", "").rsplit("/", 1)[-1] if r.status_code >= 400 else ""
        if inside:
            by_state = _REFUSED_BY_THE_STATE.get(what.rsplit("=", 1)[0])
            if by_state is not None and kind == "validation":
                assert by_state in r.json()["detail"], (what, r.text)
            else:
                assert kind not in invalid, (what, r.status_code, r.text)
        else:
            expected = (
                (400, "invalid-config") if "loyalty_put_config" in what else (422, "validation")
            )
            assert (r.status_code, kind) == expected, (what, r.text)
        checked.append(what)

    for _path, method, op in _operations(spec):
        media = op.get("requestBody", {}).get("content", {}).get("application/json")
        if media is None:
            continue
        for example in [media["example"], *_MORE_BODIES.get(op["operationId"], [])]:
            fields = _numeric_fields(spec, media["schema"], example)
            for field, schema in fields:
                url, scope = _LIMIT_PATHS[op["operationId"]]
                for number, inside in _limits(schema):
                    n += 1
                    body = _with(example, field, number)
                    for name in _IDENTITIES:
                        if isinstance(body, dict) and name in body:
                            body[name] = f"{body[name]}-{n}"
                    sent = {**headers[scope], "Idempotency-Key": f"limit-{n}"}
                    r = app_client.request(method, url, json=body, headers=sent)
                    judged(r, inside, f"{op['operationId']} {field}={number}")
    fills = {"account": "alice", "tier": "member", "sub_id": sub}
    for path, method, op in _operations(spec):
        for param in op.get("parameters", []):
            schema = _branch(spec, param["schema"], 1)
            if param["in"] != "query" or schema.get("type") not in ("integer", "number"):
                continue
            url = re.sub(r"\{([a-z_]+)\}", lambda m: fills[m.group(1)], path)
            required = [p for p in op["parameters"] if p.get("required") and p["in"] == "query"]
            base = "&".join(f"{p['name']}=points" for p in required if p["name"] == "fund")
            if "/billing/records" in path:
                base = "since=2026-01-01T00:00:00Z&until=2026-01-01T01:00:00Z"
            for number, inside in _limits(schema):
                query = "&".join(q for q in (base, f"{param['name']}={number}") if q)
                r = app_client.request(method, f"{url}?{query}", headers=admin_headers)
                if inside and r.status_code == 403:  # a read the admin key may not do
                    r = app_client.request(method, f"{url}?{query}", headers=write_headers)
                judged(r, inside, f"{op['operationId']} ?{param['name']}={number}")
    # the config bodies' limits are in the document now
    assert any("loyalty_put_config ('expiry', 'warn_days')" in c for c in checked)
    assert any("notifications_put_rules ('retention_days',)" in c for c in checked)
    assert any("loyalty_put_config ('campaigns', 0, 'bonus')" in c for c in checked)
    assert len(checked) > 60


@sqlite_only
def test_the_postings_are_matched_first_and_the_document_keeps_the_routers_order(
    app_client,
) -> None:
    """The app tries the postings' routes first (FastAPI matches a request route
    by route, and the transactions route was 20 tries in); the document still
    lists the paths as the routers declare them, health checks first."""
    from tallybook.http.app import DOCUMENT_ORDER, HOT_ROUTES

    app = app_client.app
    routers = [c.original_router for c in app.router.routes if hasattr(c, "original_router")]
    matched = [
        (method, route.path)
        for router in routers
        for route in router.routes
        for method in sorted(getattr(route, "methods", None) or ())
    ]
    assert matched[0] == ("POST", "/v1/transactions")
    assert matched[1] == ("GET", "/v1/accounts/{account}/balances")
    assert set(HOT_ROUTES) <= set(matched)  # every hot route names a real route
    spec = app_client.get("/openapi.json").json()
    first_seen = list(dict.fromkeys(path for _, path in DOCUMENT_ORDER))
    assert list(spec["paths"]) == [p for p in first_seen if p in spec["paths"]]
    assert list(spec["paths"])[:3] == ["/healthz", "/readyz", "/metrics"]
    ids = {(m, p): op["operationId"] for p, m, op in _operations(spec)}
    assert ids[("post", "/v1/transactions")] == "ledger_post_transaction"
