"""API keys: authentication, scopes, program isolation, revocation, hashing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tallybook.errors import NotFound, Unauthorized, ValidationError
from tallybook.http.keycache import DEFAULT_KEY_CACHE_SECONDS
from tallybook.store import keys

sqlite_only = pytest.mark.parametrize("engine", ["sqlite"])


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer tb_nope", "Bearer " + "x" * 300],
)
@sqlite_only
def test_missing_or_bad_key_is_401(app_client, authorization) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    r = app_client.get("/v1/program", headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert r.json()["type"] == "https://tallybook.dev/problems/unauthorized"


def test_wrong_secret_for_a_real_key_id_is_401(app_client, mint_key) -> None:
    secret = mint_key("read")
    forged = secret[:-4] + ("AAAA" if not secret.endswith("AAAA") else "BBBB")
    r = app_client.get("/v1/program", headers={"Authorization": f"Bearer {forged}"})
    assert r.status_code == 401
    ok = app_client.get("/v1/program", headers={"Authorization": f"Bearer {secret}"})
    assert ok.status_code == 200


def test_read_scope_cannot_write(app_client, read_headers, idem, open_account) -> None:
    open_account("alice")
    assert app_client.get("/v1/accounts/alice", headers=read_headers).status_code == 200
    for path, body in (
        ("/v1/accounts", {"account": "bob"}),
        ("/v1/transactions", {"type": "credit", "account": "alice", "fund": "points", "amount": 1}),
        (
            "/v1/transfers",
            {"source": "alice", "destination": "bob", "fund": "points", "amount": 1},
        ),
    ):
        r = app_client.post(path, json=body, headers=idem(read_headers))
        assert r.status_code == 403, path
        assert r.json()["type"] == "https://tallybook.dev/problems/forbidden"
    assert app_client.get("/v1/accounts/bob", headers=read_headers).status_code == 404


@sqlite_only
def test_write_only_key_cannot_read(app_client, auth) -> None:
    assert app_client.get("/v1/program", headers=auth("write")).status_code == 403


@sqlite_only
def test_admin_scope_implies_read_and_write(app_client, admin_headers, idem) -> None:
    r = app_client.post("/v1/accounts", json={"account": "root"}, headers=idem(admin_headers))
    assert r.status_code == 201
    assert app_client.get("/v1/accounts/root", headers=admin_headers).status_code == 200


def test_a_key_sees_only_its_program(
    app_client, write_headers, other_headers, idem, open_account, credit
) -> None:
    open_account("alice")
    credit("alice", 10, txn_id="shop-txn", headers=write_headers)
    for path in (
        "/v1/accounts/alice",
        "/v1/accounts/alice/balances",
        "/v1/accounts/alice/entries?fund=points",
        "/v1/accounts/alice/transactions",
        "/v1/transactions/shop-txn",
    ):
        r = app_client.get(path, headers=other_headers)
        assert r.status_code == 404, path
    assert app_client.get("/v1/program", headers=other_headers).json()["id"] == "other"
    r = app_client.post(
        "/v1/transactions",
        json={"type": "credit", "account": "alice", "fund": "points", "amount": 5},
        headers=idem(other_headers, "shop-txn"),
    )
    assert r.status_code == 404  # the other program has no alice; shop's txn id is not seen
    balances = app_client.get("/v1/accounts/alice/balances", headers=write_headers).json()
    assert balances["balances"][0]["balance"] == 10


def test_same_idempotency_key_in_two_programs_is_independent(
    app_client, write_headers, other_headers, idem, open_account
) -> None:
    open_account("alice")
    open_account("alice", headers=other_headers)
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 3}
    a = app_client.post("/v1/transactions", json=body, headers=idem(write_headers, "k"))
    b = app_client.post("/v1/transactions", json=body, headers=idem(other_headers, "k"))
    assert a.status_code == b.status_code == 201
    assert "idempotent-replayed" not in b.headers
    assert b.json()["program"] == "other"


def test_stored_response_is_not_replayed_to_a_read_key(
    app_client, read_headers, idem, open_account
) -> None:
    open_account("alice")
    body = {"type": "credit", "account": "alice", "fund": "points", "amount": 3}
    assert app_client.post("/v1/transactions", json=body, headers=idem(key="r1")).status_code == 201
    r = app_client.post("/v1/transactions", json=body, headers=idem(read_headers, "r1"))
    assert r.status_code == 403


def test_revocation_takes_effect_within_the_key_cache_time(
    app_client, ledger, clock, mint_key
) -> None:
    secret = mint_key("read")
    headers = {"Authorization": f"Bearer {secret}"}
    assert app_client.get("/v1/program", headers=headers).status_code == 200
    key_id = secret.split("_")[1]
    revoked = ledger.keys.revoke(key_id)
    assert not revoked.active
    # this process authenticated the key a moment ago: it is remembered that long
    assert app_client.get("/v1/program", headers=headers).status_code == 200
    clock.advance(timedelta(seconds=DEFAULT_KEY_CACHE_SECONDS))
    assert app_client.get("/v1/program", headers=headers).status_code == 401
    assert ledger.keys.revoke(key_id).revoked_at == revoked.revoked_at


def test_only_a_hash_is_stored(ledger) -> None:
    key, secret = ledger.keys.create("shop", "read,write", "checkout")
    assert secret.startswith(f"tb_{key.id}_")
    item = ledger.store.get(keys.api_key(key.id))
    assert item is not None
    assert all(secret not in str(v) for v in item.values())
    assert secret.split("_", 2)[2] not in str(item)
    assert ledger.keys.authenticate(secret).scopes == ("read", "write")
    listed = ledger.keys.list("shop")
    assert [(k.id, k.name) for k in listed] == [(key.id, "checkout")]


@sqlite_only
def test_key_service_validation(ledger) -> None:
    with pytest.raises(ValidationError):
        ledger.keys.create("shop", "read,superuser")
    with pytest.raises(ValidationError):
        ledger.keys.create("shop", "")
    with pytest.raises(NotFound):
        ledger.keys.create("nope", "read")
    with pytest.raises(NotFound):
        ledger.keys.revoke("0123456789abcdef")
    with pytest.raises(Unauthorized):
        ledger.keys.authenticate("tb_0123456789abcdef_" + "a" * 43)


def test_another_programs_cursor_is_refused(
    app_client, write_headers, other_headers, open_account, credit
) -> None:
    open_account("alice")
    open_account("alice", headers=other_headers)
    for i in range(2):
        credit("alice", 1, txn_id=f"a{i}")
    page = app_client.get("/v1/accounts/alice/entries?fund=points&limit=1", headers=write_headers)
    cursor = page.json()["cursor"]
    assert cursor
    r = app_client.get(
        f"/v1/accounts/alice/entries?fund=points&cursor={cursor}", headers=other_headers
    )
    assert r.status_code == 400
    assert r.json()["type"] == "https://tallybook.dev/problems/store-validation"
