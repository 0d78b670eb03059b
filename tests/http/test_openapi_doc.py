"""The OpenAPI document is usable by generated clients; /docs and /redoc need no CDN."""

from __future__ import annotations

import json
import re
from collections import Counter
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
    unnamed = [
        f"{method.upper()} {path}"
        for path, method, op in _operations(spec)
        if not op.get("summary") or not op.get("operationId")
    ]
    assert unnamed == []
    assert spec["paths"]["/v1/events/sns"]["post"]["responses"]["401"]["description"].startswith(
        "no or unknown key"
    )


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


def _shape(value: Any, key: str = "") -> Any:
    """An answer with its times, notification ids and cursor made placeholders."""
    if isinstance(value, dict):
        return {k: _shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, str):
        if key == "cursor":
            return "<cursor>"
        if re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", value):
            return "<time>"
        if re.fullmatch(r"n-\d{16}-[0-9a-f]{10}", value):
            return "<notification id>"
    return value


@sqlite_only
def test_main_answers_have_an_example_that_is_the_servers_answer(
    app_client, admin_headers, write_headers
) -> None:
    """The 2xx answers had no example; the main operations' now have one, valid against
    the response schema and, times and generated ids aside, what the server answers to
    the request examples posted in order (so an example cannot drift from the API)."""
    import jsonschema

    from tallybook.http.openapi import REQUEST_EXAMPLES, RESPONSE_EXAMPLES

    spec = app_client.get("/openapi.json").json()
    documented: dict[str, dict[str, Any]] = {}
    for _, _, op in _operations(spec):
        for code, response in op["responses"].items():
            media = response.get("content", {}).get("application/json", {})
            if code.startswith("2") and "example" in media:
                schema = {"components": spec["components"], **media["schema"]}
                jsonschema.validate(media["example"], schema)
                documented[op["operationId"]] = {"schema": schema, "example": media["example"]}
    assert set(documented) == set(RESPONSE_EXAMPLES)
    main = {"ledger_post_transaction", "ledger_post_transfer", "wallet_post_debit"}
    main |= {"ledger_get_account", "ledger_get_entries", "wallet_get_balance"}
    main |= {"wallet_post_hold", "wallet_capture_hold", "wallet_void_hold", "wallet_post_credit"}
    main |= {"loyalty_earn", "loyalty_redeem", "notifications_list_notifications"}
    assert set(documented) == main

    def call(path: str, headers: dict[str, str], op: str = "", key: str = "", **kw: Any) -> None:
        method = kw.pop("method", "POST" if key else "GET")
        sent = {**headers, "Idempotency-Key": key} if key else headers
        r = app_client.request(method, path, json=kw.get("body"), headers=sent)
        assert r.status_code < 300, (path, r.text)
        if op:
            jsonschema.validate(r.json(), documented[op]["schema"])
            assert _shape(r.json()) == _shape(documented.pop(op)["example"]), op

    rq, admin, write = REQUEST_EXAMPLES, admin_headers, write_headers
    call("/v1/program/loyalty", admin, method="PUT", body=rq["loyalty_put_config"])
    call("/v1/accounts", write, key="o1", body={"account": "alice"})
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
    call("/v1/accounts/alice/notifications", write, key="n-1", body=body)
    call("/v1/accounts/alice/notifications", write, "notifications_list_notifications")
    call("/v1/accounts/alice/wallet", write, "wallet_get_balance")
    call("/v1/accounts/alice", write, "ledger_get_account")
    call("/v1/accounts/alice/entries?fund=points&limit=2", write, "ledger_get_entries")
    assert not documented  # every example was compared
