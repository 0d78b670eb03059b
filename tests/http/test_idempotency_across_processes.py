"""One Idempotency-Key sent at once to several server processes (uvicorn
``--workers``, Lambda instances): each process is its own app over the same
store, so waiting for a request running in the same process is not enough."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tallybook.http.app import create_app
from tallybook.ledger import Ledger
from tallybook.services import responses as stored_responses
from tallybook.services.responses import CLAIM_SECONDS
from tallybook.store.records.responses import PENDING, StoredResponse

Headers = dict[str, str]


@pytest.fixture
def servers(ledger: Ledger) -> Iterator[list[TestClient]]:
    """Four apps over one store, as four server processes are."""
    with ExitStack() as stack:
        yield [stack.enter_context(TestClient(create_app(ledger))) for _ in range(4)]


def _at_once(
    servers: list[TestClient], send: Callable[[TestClient, int], tuple[int, str | None]]
) -> Counter[tuple[int, str | None]]:
    """``send(server, i)`` for 8 clients at once, spread over the servers."""
    with ThreadPoolExecutor(8) as pool:
        return Counter(pool.map(lambda i: send(servers[i % len(servers)], i), range(8)))


def test_one_key_sent_to_several_processes_subscribes_once(
    ledger: Ledger, servers: list[TestClient], admin_headers: Headers
) -> None:
    headers = {**admin_headers, "Idempotency-Key": "subscribe-once"}
    bodies: set[str] = set()

    def send(server: TestClient, _: int) -> tuple[int, str | None]:
        r = server.post("/v1/webhooks", json={"url": "https://example.com/h"}, headers=headers)
        bodies.add(r.json()["id"])
        return r.status_code, r.headers.get("idempotent-replayed")

    assert _at_once(servers, send) == Counter({(201, None): 1, (201, "true"): 7})
    assert len(ledger.webhooks.list("shop")) == 1
    assert len(bodies) == 1


def test_one_key_with_other_bodies_on_several_processes_opens_one_and_refuses_the_rest(
    ledger: Ledger, servers: list[TestClient], write_headers: Headers
) -> None:
    headers = {**write_headers, "Idempotency-Key": "open-ann"}

    def send(server: TestClient, i: int) -> tuple[int, str | None]:
        body = {"account": "ann", "attributes": {"i": str(i)}}
        r = server.post("/v1/accounts", json=body, headers=headers)
        return r.status_code, r.headers.get("idempotent-replayed")

    assert _at_once(servers, send) == Counter({(201, None): 1, (409, None): 7})


def test_a_request_that_failed_leaves_its_key_free_for_a_retry(
    ledger: Ledger, servers: list[TestClient], write_headers: Headers
) -> None:
    headers = {**write_headers, "Idempotency-Key": "early-debit"}
    url = "/v1/accounts/bob/wallet/debits"
    assert servers[0].post(url, json={"amount": 5}, headers=headers).status_code == 404
    servers[1].post("/v1/accounts", json={"account": "bob"}, headers=write_headers)
    credit = {"fund": "cash", "amount": 10}
    top_up = {**write_headers, "Idempotency-Key": "top-up-bob"}
    topped = servers[1].post("/v1/accounts/bob/wallet/credits", json=credit, headers=top_up)
    assert topped.is_success
    assert servers[2].post(url, json={"amount": 5}, headers=headers).status_code == 201


def test_a_claim_left_by_a_dead_process_is_taken_over_once_its_lease_ends(
    ledger: Ledger, servers: list[TestClient], write_headers: Headers
) -> None:
    dead = StoredResponse("a request that never ended", PENDING, (), frozenset({"write"}), "")
    assert ledger.responses.claim("shop", "open-cid", dead) is None
    headers = {**write_headers, "Idempotency-Key": "open-cid"}
    now = ledger.responses.wall
    ledger.responses.wall = lambda: now() + CLAIM_SECONDS + 1  # the lease is over
    r = servers[0].post("/v1/accounts", json={"account": "cid"}, headers=headers)
    assert (r.status_code, r.headers.get("idempotent-replayed")) == (201, None)
    again = servers[1].post("/v1/accounts", json={"account": "cid"}, headers=headers)
    assert (again.status_code, again.headers.get("idempotent-replayed")) == (201, "true")


@pytest.mark.parametrize("engine", ["sqlite"])
def test_a_request_running_longer_than_its_lease_keeps_its_claim(
    ledger: Ledger,
    servers: list[TestClient],
    admin_headers: Headers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stored_responses, "CLAIM_SECONDS", 2)
    create = ledger.webhooks.create

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(3.5)  # past the lease, renewed meanwhile
        return create(*args, **kwargs)

    monkeypatch.setattr(ledger.webhooks, "create", slow)
    headers = {**admin_headers, "Idempotency-Key": "slow-subscribe"}
    body = {"url": "https://example.com/slow"}
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(servers[0].post, "/v1/webhooks", json=body, headers=headers)
        time.sleep(0.5)
        second = pool.submit(servers[1].post, "/v1/webhooks", json=body, headers=headers)
        answers = [first.result(), second.result()]
    assert [(r.status_code, r.headers.get("idempotent-replayed")) for r in answers] == [
        (201, None),
        (201, "true"),
    ]
    assert len(ledger.webhooks.list("shop")) == 1


def test_one_keyed_earn_sent_at_once_to_several_processes_earns_once(
    ledger: Ledger, servers: list[TestClient], write_headers: Headers
) -> None:
    """An earn answers its own replays (no claim in the idempotency layer): the
    earn service's exactly-once per order id is what serialises them."""
    ledger.loyalty.configure("shop", {"earn": {"points_per_unit": 1, "unit_size": 100}})
    ledger.accounts.open("shop", "ann")
    headers = {**write_headers, "Idempotency-Key": "earn-o-1"}
    bodies: list[dict[str, Any]] = []

    def send(server: TestClient, _: int) -> tuple[int, str | None]:
        r = server.post(
            "/v1/accounts/ann/earn", json={"order_id": "o-1", "amount": 500}, headers=headers
        )
        bodies.append(r.json())
        return r.status_code, r.headers.get("idempotent-replayed")

    assert _at_once(servers, send) == Counter({(201, None): 1, (200, "true"): 7})
    assert {b["transaction"]["id"] for b in bodies} == {"order:o-1"}
    assert {(b["points"], b["transaction"]["legs"][0]["balance"]) for b in bodies} == {(5, 5)}
    assert [t.id for t in ledger.transactions.for_order("shop", "o-1")] == ["order:o-1"]
    points = ledger.accounts.balances("shop", "ann")
    assert next(b.balance for b in points if b.fund == "points") == 5
