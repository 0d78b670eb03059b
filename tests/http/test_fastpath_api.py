"""The lean path of ``POST /v1/transactions`` answers exactly as FastAPI's generic handler.

Each request goes to two apps over the same ledger: one as served (the fast
path answers well-formed requests) and one with a dependency override, which
sends every request through FastAPI's generic handler. Their answers must be
the same: status, headers (but the request id) and body, for postings,
replays, conflicts, refusals and every kind of malformed request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.requests import Request
from starlette.responses import Response

from tallybook.http.app import create_app
from tallybook.http.fastpath import FastPathRoute, json_body
from tallybook.http.routers import ledger as ledger_routes
from tallybook.ledger import Ledger

Headers = dict[str, str]


@pytest.fixture
def clients(ledger: Ledger) -> Iterator[tuple[TestClient, TestClient]]:
    fast = create_app(ledger)
    generic = create_app(ledger)
    # any override sends every request of this app through FastAPI's own handler
    generic.dependency_overrides[json_body] = json_body
    with TestClient(fast) as a, TestClient(generic) as b:
        yield a, b


def _answer(response: httpx.Response) -> tuple[int, list[tuple[str, str]], Any]:
    headers = sorted(
        (k, v) for k, v in response.headers.items() if k not in ("x-request-id", "content-length")
    )
    body = response.json()
    if isinstance(body, dict):
        body.pop("request_id", None)
    return response.status_code, headers, body


@pytest.fixture
def both(
    clients: tuple[TestClient, TestClient],
) -> Callable[..., tuple[int, list[tuple[str, str]], Any]]:
    """Send the same POST to both apps; assert the same answer and return it."""

    def send(
        content: bytes, headers: Headers, *, txn_ids: tuple[str, str] | None = None
    ) -> tuple[int, list[tuple[str, str]], Any]:
        fast, generic = clients
        answers = []
        for client, txn_id in zip((fast, generic), txn_ids or (None, None), strict=True):
            h = dict(headers)
            if txn_id is not None:
                h["Idempotency-Key"] = txn_id
            answers.append(_answer(client.post("/v1/transactions", content=content, headers=h)))
        if txn_ids is not None:  # two new postings: their ids and balances differ
            for (_, headers_, body), txn_id in zip(answers, txn_ids, strict=True):
                headers_[:] = [(k, v.replace(txn_id, "ID")) for k, v in headers_]
                if isinstance(body, dict) and "id" in body:  # posted one after the other
                    body["id"] = "ID"
                    for leg in body["legs"]:
                        leg["balance"] = leg["seq"] = None
        assert answers[0] == answers[1]
        return answers[0]

    return send


JSON = {"Content-Type": "application/json"}
CREDIT = b'{"type":"credit","account":"alice","fund":"points","amount":5}'


def test_new_postings_replays_and_conflicts_answer_alike(
    both: Callable[..., Any], open_account: Callable[..., Any], write_headers: Headers
) -> None:
    open_account("alice")
    status, headers, body = both(CREDIT, {**write_headers, **JSON}, txn_ids=("f-1", "g-1"))
    assert status == 201
    assert ("location", "/v1/transactions/ID") in headers
    assert body["legs"][0]["amount"] == 5
    # replays of one posting, then the same id with another body
    for txn in ("f-1", "g-1"):
        status, headers, body = both(CREDIT, {**write_headers, **JSON, "Idempotency-Key": txn})
        assert status == 201
        assert ("idempotent-replayed", "true") in headers
        other = CREDIT.replace(b"5", b"6")
        status, _, body = both(other, {**write_headers, **JSON, "Idempotency-Key": txn})
        assert status == 409
        assert body["type"].endswith("/idempotency-conflict")


def test_refusals_answer_alike(
    both: Callable[..., Any], open_account: Callable[..., Any], write_headers: Headers
) -> None:
    open_account("alice")
    debit = b'{"type":"debit","account":"alice","fund":"points","amount":500}'
    status, _, body = both(debit, {**write_headers, **JSON}, txn_ids=("f-d", "g-d"))
    assert status == 422
    assert body["type"].endswith("/insufficient-funds")
    missing = b'{"type":"credit","account":"nobody","fund":"points","amount":5}'
    status, _, _ = both(missing, {**write_headers, **JSON}, txn_ids=("f-m", "g-m"))
    assert status == 404


@pytest.mark.parametrize(
    ("content", "extra"),
    [
        (b"{not json", {}),
        (b"null", {}),
        (b"[]", {}),
        (b'{"type":"credit","account":"alice","fund":"points","amount":5.0}', {}),
        (b'{"type":"credit","account":"alice","fund":"points","amount":"5"}', {}),
        (b'{"type":"bogus","account":"alice","fund":"points","amount":5}', {}),
        (b'{"type":"credit","account":"alice","fund":"points","amount":5,"x":1}', {}),
        (CREDIT, {"Idempotency-Key": ""}),
        (CREDIT, {"Idempotency-Key": "-starts-with-dash"}),
        (CREDIT, {"Idempotency-Key": "x" * 129}),
        (CREDIT, {"Idempotency-Key": None}),
        (CREDIT, {"Content-Type": "text/plain"}),
        (CREDIT, {"Content-Type": "application/vnd.tally+json"}),
        (CREDIT, {"Content-Type": "application/json; charset=utf-8"}),
        (CREDIT, {"Authorization": None}),
        (CREDIT, {"Authorization": "Bearer wrong"}),
        (b"{not json", {"Authorization": "Bearer wrong"}),
        (b'{"type":"credit"}', {"Authorization": None}),
        (b"", {}),
    ],
)
def test_unusual_requests_answer_alike(
    both: Callable[..., Any],
    open_account: Callable[..., Any],
    write_headers: Headers,
    content: bytes,
    extra: dict[str, str | None],
) -> None:
    open_account("alice")
    headers: dict[str, str | None] = {**write_headers, **JSON, **extra}
    sent = {k: v for k, v in headers.items() if v is not None}
    if "Idempotency-Key" in extra:
        both(content, sent)
    else:
        both(content, sent, txn_ids=("f-u", "g-u"))


def test_read_only_key_is_refused_alike(
    both: Callable[..., Any], open_account: Callable[..., Any], read_headers: Headers
) -> None:
    open_account("alice")
    status, _, body = both(CREDIT, {**read_headers, **JSON}, txn_ids=("f-r", "g-r"))
    assert status == 403
    assert body["type"].endswith("/forbidden")


def test_well_formed_postings_take_the_fast_path(
    app_client: TestClient,
    open_account: Callable[..., Any],
    write_headers: Headers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    route = next(
        r for r in ledger_routes.router.routes if getattr(r, "path", "") == "/v1/transactions"
    )
    assert isinstance(route, FastPathRoute)
    answered: list[bool] = []
    handler = type(route).fast

    async def counting(route: FastPathRoute, request: Request) -> Response | None:
        response = await handler(route, request)
        answered.append(response is not None)
        return response

    monkeypatch.setattr(type(route), "fast", staticmethod(counting))
    open_account("alice")
    headers = {**write_headers, **JSON, "Idempotency-Key": "fast-1"}
    assert app_client.post("/v1/transactions", content=CREDIT, headers=headers).status_code == 201
    assert app_client.post("/v1/transactions", content=CREDIT, headers=headers).status_code == 201
    bad = app_client.post("/v1/transactions", content=b"{", headers=headers)
    assert bad.status_code == 400
    assert answered == [True, True, False]


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "POST"])
@pytest.mark.parametrize("path", ["/v1/transactions", "/v1/transactions/", "/v1/transactions/t-1"])
def test_matching_the_posting_route_first_changes_no_answer(
    ledger: Ledger, write_headers: Headers, method: str, path: str
) -> None:
    """The posting route is tried first (``match_first``); without that copy the
    app answers every method on the neighbouring paths the same."""
    first = create_app(ledger)
    declared = create_app(ledger)
    copy = declared.router.routes.pop(0)
    assert getattr(copy, "path", None) == "/v1/transactions"
    assert not getattr(copy, "include_in_schema", True)
    headers = {**write_headers, **JSON, "Idempotency-Key": "m-1"}
    answers = []
    for app in (first, declared):
        with TestClient(app) as client:
            r = client.request(
                method, path, content=CREDIT, headers=headers, follow_redirects=False
            )
            answers.append(_answer(r) if r.content else (r.status_code, [], None))
    assert answers[0] == answers[1]
