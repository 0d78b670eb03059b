"""Notifications over HTTP and the SNS endpoint, on both engines."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient

from tallybook.ledger import Ledger
from tallybook.services.clock import ManualClock
from tallybook.store import keys

Headers = dict[str, str]
URL = "/v1/accounts/alice/notifications"


def test_add_list_supersede_dismiss(
    app_client: TestClient,
    write_headers: Headers,
    read_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
) -> None:
    open_account("alice")
    r = app_client.post(
        URL,
        json={"type": "TierChanged", "payload": {"tier": "silver"}},
        headers=idem(write_headers, "n-add-1"),
    )
    assert r.status_code == 201, r.text
    first = r.json()
    assert r.headers["location"] == f"{URL}/{first['id']}"
    assert first["status"] == "active"
    r = app_client.post(
        URL, json={"type": "TierChanged", "payload": {"tier": "gold"}}, headers=idem(write_headers)
    )
    second = r.json()

    listed = app_client.get(URL, headers=read_headers).json()["notifications"]
    assert [n["id"] for n in listed] == [second["id"]]

    old = app_client.get(f"{URL}/{first['id']}", headers=read_headers).json()
    assert (old["status"], old["dismissed_by"]) == ("superseded", second["id"])

    r = app_client.delete(f"{URL}/{second['id']}", headers=write_headers)
    assert r.status_code == 200
    assert r.json()["status"] == "dismissed"
    assert app_client.delete(f"{URL}/{second['id']}", headers=write_headers).status_code == 200
    assert app_client.get(URL, headers=read_headers).json() == {"notifications": []}

    history = app_client.get(f"{URL}/history", headers=read_headers).json()
    assert [n["id"] for n in history["notifications"]] == [second["id"], first["id"]]
    page = app_client.get(f"{URL}/history?limit=1&order=oldest", headers=read_headers).json()
    assert [n["id"] for n in page["notifications"]] == [first["id"]]
    assert page["cursor"]

    # read keys cannot write; unknown ids are 404 problems
    denied = app_client.post(URL, json={"type": "X"}, headers=idem(read_headers))
    assert denied.status_code == 403
    missing = app_client.delete(f"{URL}/n-0000000000000001-0000000000", headers=write_headers)
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/problem+json")


def test_idempotent_add_and_dismiss_by_type(
    ledger: Ledger,
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
) -> None:
    open_account("alice")
    body = {"type": "LowBalance", "payload": {"fund": "cash"}}
    a = app_client.post(URL, json=body, headers=idem(write_headers, "lb-1"))
    assert a.status_code == 201
    # a replay is 200, at once or later: the notification's key holds, no response is cached
    for _ in range(2):
        b = app_client.post(URL, json=body, headers=idem(write_headers, "lb-1"))
        assert b.status_code == 200
        assert b.headers["idempotent-replayed"] == "true"
        assert b.json()["id"] == a.json()["id"]
    assert ledger.store.get(keys.idempotent_response("shop", "lb-1")) is None
    other = {"type": "LowBalance", "payload": {"fund": "points"}}
    conflict = app_client.post(URL, json=other, headers=idem(write_headers, "lb-1"))
    assert conflict.status_code == 409

    r = app_client.delete(f"{URL}?type=LowBalance", headers=write_headers)
    assert r.json()["dismissed"]["id"] == a.json()["id"]
    assert app_client.delete(f"{URL}?type=LowBalance", headers=write_headers).json() == {
        "dismissed": None
    }
    bad = app_client.post(URL, json={"type": "T", "payload": {"x": 1.5}}, headers=idem())
    assert bad.status_code == 422


def sns(message_id: str, **event: Any) -> str:
    inner = {"account": "alice", "type": "TopUp", "payload": {"amount": 100}, **event}
    return json.dumps(
        {"Type": "Notification", "MessageId": message_id, "Message": json.dumps(inner)}
    )


def test_sns_endpoint(
    app_client: TestClient,
    write_headers: Headers,
    read_headers: Headers,
    open_account: Callable[..., Any],
) -> None:
    open_account("alice")
    text = {**write_headers, "Content-Type": "text/plain; charset=UTF-8"}
    r = app_client.post("/v1/events/sns", content=sns("m-1"), headers=text)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "added"
    as_json = {**write_headers, "Content-Type": "application/json"}
    again = app_client.post("/v1/events/sns", content=sns("m-1"), headers=as_json)
    assert again.json()["status"] == "replayed"
    assert again.json()["notification"]["id"] == r.json()["notification"]["id"]

    bad = app_client.post("/v1/events/sns", content="{not json", headers=text)
    assert bad.status_code == 422
    assert bad.json()["type"].endswith("/rejected-message")
    assert bad.json()["detail"].startswith("not-json:")
    ghost = app_client.post("/v1/events/sns", content=sns("m-2", account="ghost"), headers=text)
    assert ghost.status_code == 422

    confirm = {
        "Type": "SubscriptionConfirmation",
        "MessageId": "s-1",
        "SubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription",
    }
    pending = app_client.post("/v1/events/sns", content=json.dumps(confirm), headers=text)
    assert pending.json()["status"] == "pending_confirmation"

    stats = app_client.get("/v1/events/stats", headers=read_headers).json()
    assert stats["added"] == 1
    assert stats["replayed"] == 1
    assert stats["rejected"] == 2
    assert (stats["pending_confirmation"], stats["ignored"]) == (1, 0)  # was (absent, 1)
    assert stats["reasons"] == {"not-json": 1, "not-found": 1}
    history = app_client.get(f"{URL}/history", headers=read_headers).json()["notifications"]
    assert [n["type"] for n in history] == ["TopUp"]


def test_other_program_sees_nothing(
    app_client: TestClient,
    write_headers: Headers,
    other_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
) -> None:
    open_account("alice")
    app_client.post(URL, json={"type": "TierChanged"}, headers=idem(write_headers))
    assert app_client.get(URL, headers=other_headers).status_code == 404


def test_sns_takes_the_key_as_basic_password(
    app_client: TestClient,
    mint_key: Callable[..., str],
    open_account: Callable[..., Any],
) -> None:
    """SNS posts without credentials, then with those of the subscription URL
    (https://sns:KEY@host/...) after a 401 that asks for Basic."""
    open_account("alice")
    text = {"Content-Type": "text/plain; charset=UTF-8"}
    challenge = app_client.post("/v1/events/sns", content=sns("b-1"), headers=text)
    assert challenge.status_code == 401
    assert challenge.headers["www-authenticate"].startswith("Basic realm=")
    assert challenge.headers["content-type"].startswith("application/problem+json")

    def basic(secret: str, user: str = "sns") -> Headers:
        token = base64.b64encode(f"{user}:{secret}".encode()).decode()
        return {**text, "Authorization": f"Basic {token}"}

    secret = mint_key("write")
    r = app_client.post("/v1/events/sns", content=sns("b-1"), headers=basic(secret))
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "added"
    again = app_client.post("/v1/events/sns", content=sns("b-1"), headers=basic(secret, "x"))
    assert again.json()["status"] == "replayed"
    wrong = app_client.post("/v1/events/sns", content=sns("b-2"), headers=basic("tb_nope"))
    assert wrong.status_code == 401
    garbled = {**text, "Authorization": "Basic !!!"}
    assert app_client.post("/v1/events/sns", content=sns("b-2"), headers=garbled).status_code == 401
    reader = app_client.post("/v1/events/sns", content=sns("b-2"), headers=basic(mint_key("read")))
    assert reader.status_code == 403


def test_delivery_status_is_the_same_in_every_answer(
    app_client: TestClient,
    write_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
) -> None:
    """Issue 17 defect 8: the add said ``delivered``, the list and the first dismissal
    said ``delivery: null``, the single read said ``delivered``."""
    open_account("alice")
    r = app_client.post(URL, json={"type": "LowBalance"}, headers=idem(write_headers))
    assert r.status_code == 201, r.text
    added = r.json()
    assert added["delivery"] == "delivered"
    assert added["delivered_at"] is not None
    facts = {"delivery": added["delivery"], "delivered_at": added["delivered_at"]}

    def seen(n: dict[str, Any]) -> dict[str, Any]:
        return {"delivery": n["delivery"], "delivered_at": n["delivered_at"]}

    listed = app_client.get(URL, headers=write_headers).json()["notifications"]
    assert [seen(n) for n in listed] == [facts]
    one = app_client.get(f"{URL}/{added['id']}", headers=write_headers).json()
    assert seen(one) == facts
    dismissed = app_client.delete(f"{URL}/{added['id']}", headers=write_headers).json()
    assert seen(dismissed) == facts
    history = app_client.get(f"{URL}/history", headers=write_headers).json()["notifications"]
    assert [seen(n) for n in history] == [facts]


def test_sns_refuses_a_key_given_twice(
    app_client: TestClient,
    write_headers: Headers,
    read_headers: Headers,
    open_account: Callable[..., Any],
) -> None:
    """A repeated MessageId (or any key) in the envelope or its Message is refused,
    never resolved by guessing which one counts; nothing is added."""
    open_account("alice")
    text = {**write_headers, "Content-Type": "text/plain; charset=UTF-8"}
    inner = json.dumps({"account": "alice", "type": "TopUp", "payload": {}})
    envelope = (
        '{"Type": "Notification", "MessageId": "d-1", "MessageId": "d-2", '
        f'"Message": {json.dumps(inner)}}}'
    )
    r = app_client.post("/v1/events/sns", content=envelope, headers=text)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("duplicate-key:")
    twice = '{"account": "alice", "account": "bob", "type": "TopUp", "payload": {}}'
    envelope = json.dumps({"Type": "Notification", "MessageId": "d-3", "Message": twice})
    r = app_client.post("/v1/events/sns", content=envelope, headers=text)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("duplicate-key:")
    history = app_client.get(f"{URL}/history", headers=read_headers).json()["notifications"]
    assert history == []
    stats = app_client.get("/v1/events/stats", headers=read_headers).json()
    assert stats["reasons"] == {"duplicate-key": 2}


def test_add_refuses_an_expires_at_already_past(
    clock: ManualClock,
    app_client: TestClient,
    write_headers: Headers,
    read_headers: Headers,
    idem: Callable[..., Headers],
    open_account: Callable[..., Any],
) -> None:
    """An add that would be expired at once is a 422: it neither supersedes the
    active one of its type nor lands in history; a replay of an add made while
    its expires_at was ahead still answers the original."""
    open_account("alice")
    active = app_client.post(URL, json={"type": "Promo", "payload": {"n": 1}}, headers=idem())
    assert active.status_code == 201
    past = (clock.now() - timedelta(seconds=1)).isoformat()
    r = app_client.post(
        URL, json={"type": "Promo", "payload": {"n": 2}, "expires_at": past}, headers=idem()
    )
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    listed = app_client.get(URL, headers=read_headers).json()["notifications"]
    assert [n["id"] for n in listed] == [active.json()["id"]]
    history = app_client.get(f"{URL}/history", headers=read_headers).json()["notifications"]
    assert [n["id"] for n in history] == [active.json()["id"]]

    soon = (clock.now() + timedelta(minutes=5)).isoformat()
    body = {"type": "Promo", "payload": {"n": 3}, "expires_at": soon}
    first = app_client.post(URL, json=body, headers=idem(write_headers, "promo-3"))
    assert first.status_code == 201, first.text
    clock.advance(timedelta(minutes=10))
    again = app_client.post(URL, json=body, headers=idem(write_headers, "promo-3"))
    assert again.status_code == 200, again.text
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["status"] == "expired"


def test_sns_message_id_is_a_key_of_the_events_account(
    app_client: TestClient,
    write_headers: Headers,
    read_headers: Headers,
    open_account: Callable[..., Any],
) -> None:
    """As docs/notifications.md says: a redelivery replays, another payload under
    the MessageId is an idempotency-conflict, another account is its own key."""
    open_account("alice")
    open_account("bob")
    text = {**write_headers, "Content-Type": "text/plain; charset=UTF-8"}
    first = app_client.post("/v1/events/sns", content=sns("k-1"), headers=text)
    assert first.json()["status"] == "added"
    again = app_client.post("/v1/events/sns", content=sns("k-1"), headers=text)
    assert again.json()["status"] == "replayed"
    other = app_client.post("/v1/events/sns", content=sns("k-1", payload={"x": 1}), headers=text)
    assert other.status_code == 422
    assert other.json()["detail"].startswith("idempotency-conflict:")
    bob = app_client.post("/v1/events/sns", content=sns("k-1", account="bob"), headers=text)
    assert bob.json()["status"] == "added"
    assert bob.json()["notification"]["account"] == "bob"
