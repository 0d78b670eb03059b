"""Stripe-style ``Idempotency-Key`` handling for every POST under ``/v1``.

The first successful (2xx) response of a POST is stored by (program,
Idempotency-Key) with a fingerprint of method, path, query and the body
(canonical JSON, so whitespace and key order do not matter) and a 24 h TTL.
A later request with the same key and fingerprint gets the stored status and
body back with ``Idempotent-Replayed: true`` (and the body's ``replay`` flags
set, so body and header agree); the same key with another
fingerprint is a 409 ``idempotency-conflict``. Error responses are not stored
here: retrying after a 4xx or 5xx re-executes, and writes stay at-most-once
because the services are idempotent themselves (ledger postings use the key as
the transaction id, whose record never expires). A refusal that reached the
ledger (insufficient funds) is final all the same: the posting engine stores it
under the transaction id and answers every retry with it
(:mod:`tallybook.services.ledger.refusals`).

Replays are only served to a caller holding the scopes of the original caller
(or ``admin``); anyone else goes through to the route, which checks scopes.

Requests with one (program, Idempotency-Key) that arrive while an earlier one
is still running wait for it (up to :data:`IN_FLIGHT_WAIT` seconds, then a 409
``idempotency-conflict`` with ``Retry-After``), and are then answered from its
stored response: concurrent identical requests run the route once, the others
are replays (another body: a 409). In this process they wait on a set of keys;
across processes (uvicorn ``--workers``, Lambda instances) on the claim a
request writes at its key before it runs (a pending stored response, replaced
by the answer, or deleted when there is none to keep; a claim whose process
died lapses after ``CLAIM_SECONDS``; a running request renews its claim).

A route whose service answers its own replays declares it next to its
definition with ``openapi_extra=replays_answered_by(...)`` (shown in the
OpenAPI document as ``x-idempotency``), and no HTTP response is stored for it:

* ``"ledger"``: ``POST /v1/transactions`` and ``/v1/transfers``, whose key is
  the transaction id; the transaction record already is the idempotency record,
  so the route answers a replay (same status and body, ``Idempotent-Replayed:
  true``) or a 409 for another body. That saves a read and a write per posting.
* ``"service"``: notification adds, billing records and earns, idempotent in
  their service (the notification's idempotency key is the ``Idempotency-Key``;
  a billing record's is its id, an earn's its order id, kept for ever); their
  routes answer a replay themselves, 200 with ``Idempotent-Replayed: true``.

Stored responses are kept through :class:`tallybook.services.responses.StoredResponses`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterable
from typing import Any, Literal, cast

import anyio
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tallybook.domain.ids import check_id
from tallybook.errors import TallybookError
from tallybook.http.deps import PARSED_BODY, Principal, authenticate, run_blocking
from tallybook.http.metrics import Metrics
from tallybook.http.problems import scope_problem
from tallybook.ledger import Ledger
from tallybook.services import responses as stored_responses
from tallybook.store.records.responses import PENDING, StoredResponse

REPLAYED_HEADER = "Idempotent-Replayed"
#: responses larger than this are not stored (a replay then re-executes)
MAX_STORED_BODY = 256 * 1024
_KEPT_HEADERS = (b"content-type", b"location")
#: the ``openapi_extra`` key by which a POST route declares who answers its replays
REPLAYS = "x-idempotency"
_REPLAYED = REPLAYED_HEADER.lower().encode()
#: how long a request waits for one running with its Idempotency-Key (seconds)
IN_FLIGHT_WAIT = 30.0
_IN_FLIGHT_POLL = 0.005
#: how often a request polls the store for one running with its key in another process
_CLAIM_POLL = 0.05


def replays_answered_by(owner: Literal["ledger", "service"]) -> dict[str, Any]:
    """``openapi_extra`` for a POST route that answers its own replays: ``"ledger"``
    (the Idempotency-Key is the transaction id) or ``"service"`` (the service is
    idempotent by itself). The middleware stores no response for such a route."""
    return {REPLAYS: owner}


def _self_answering(routes: Iterable[Any]) -> tuple[re.Pattern[str], ...]:
    """Path patterns of the POST routes that declared :func:`replays_answered_by`
    (walking into included routers, as :func:`_find_route` does)."""
    found: list[re.Pattern[str]] = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            found += _self_answering(inner.routes)
        elif (
            isinstance(route, APIRoute)
            and "POST" in (route.methods or ())
            and (route.openapi_extra or {}).get(REPLAYS)
        ):
            found.append(route.path_regex)
    return tuple(found)


_UNPARSED = object()


def fingerprint(method: str, path: str, query: bytes, body: bytes, parsed: Any = _UNPARSED) -> str:
    """The digest a replay must match: method, path, query and the body as
    canonical JSON; ``parsed`` is the body already parsed, if it was."""
    try:
        value = json.loads(body) if parsed is _UNPARSED else parsed
        canonical = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=True
        ).encode()
    except (ValueError, UnicodeDecodeError, RecursionError):
        canonical = body  # the route answers 400 malformed-json for it
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), query, canonical):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k.lower() == name:
            return cast(bytes, v).decode("latin-1")
    return None


def replay_receive(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app an already-read body, then the server's messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class IdempotencyMiddleware:
    """Expects the body already read and limited (``scope["state"]["body"]``)."""

    def __init__(self, app: ASGIApp, ledger: Ledger, metrics: Metrics) -> None:
        self.app = app
        self.ledger = ledger
        self.metrics = metrics
        self._answering: tuple[re.Pattern[str], ...] | None = None
        # (program, Idempotency-Key) of the requests running in this process; a
        # thread lock, as test clients may serve requests on several event loops
        self._in_flight: set[tuple[str, str]] = set()
        self._in_flight_lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not scope["path"].startswith("/v1/")
        ):
            await self.app(scope, receive, send)
            return
        if self._answering is None:
            self._answering = _self_answering(getattr(scope.get("app"), "routes", ()))
        if any(pattern.match(scope["path"]) for pattern in self._answering):
            await self.app(scope, receive, self._count_replays(send))
            return
        idem_key = _header(scope, b"idempotency-key")
        principal = await self._principal(scope) if idem_key is not None else None
        if idem_key is None or principal is None:
            await self.app(scope, receive, send)
            return
        problem = _invalid(idem_key)
        if problem is not None:  # never run a write its caller thinks is idempotent
            field = {"loc": ["header", "Idempotency-Key"], "msg": problem, "type": "value_error"}
            body = scope_problem(
                scope, 422, "validation", f"invalid request: {problem}", errors=[field]
            )
            await _send(send, 422, [(b"content-type", b"application/problem+json")], body)
            return
        claim = (principal.program, idem_key)
        if not await self._claim(claim):
            await _send_in_progress(scope, send)
            return
        try:
            await self._run(scope, receive, send, principal, idem_key)
        finally:
            with self._in_flight_lock:
                self._in_flight.discard(claim)

    async def _claim(self, claim: tuple[str, str]) -> bool:
        """Mark ``claim`` as running here, once no other request runs it
        (False after waiting :data:`IN_FLIGHT_WAIT` seconds in vain)."""
        deadline = time.monotonic() + IN_FLIGHT_WAIT
        while True:
            with self._in_flight_lock:
                if claim not in self._in_flight:
                    self._in_flight.add(claim)
                    return True
            if time.monotonic() >= deadline:
                return False
            await anyio.sleep(_IN_FLIGHT_POLL)

    async def _run(
        self, scope: Scope, receive: Receive, send: Send, principal: Principal, idem_key: str
    ) -> None:
        """Replay the stored response for ``idem_key``, or run the route and store its answer."""
        state = scope.setdefault("state", {})
        body = cast(bytes, state.get("body", b""))
        parsed = state.get(PARSED_BODY, _UNPARSED)
        query = scope.get("query_string", b"")
        fp = fingerprint(scope["method"], scope["path"], query, body, parsed)
        responses = self.ledger.responses
        program = principal.program
        mine = StoredResponse(fp, PENDING, (), frozenset(principal.scopes), "")
        stored = await self._claim_everywhere(program, idem_key, mine)
        if stored is not None:
            if stored.pending and stored.fingerprint == fp:
                await _send_in_progress(scope, send)
                return
            _match_route(scope)
            if not _may_replay(principal, stored):
                await self.app(scope, receive, send)
                return
            await self._answer_stored(scope, send, stored, fp)
            return

        status = 0
        headers: list[tuple[bytes, bytes]] = []
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal status, headers
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        kept = False
        renewing = asyncio.get_running_loop().create_task(self._renew(program, idem_key, mine))
        try:
            await self.app(scope, receive, capture)
            response = _to_keep(fp, status, headers, b"".join(chunks), principal)
            if response is not None:
                await run_blocking(self.ledger, responses.remember, program, idem_key, response)
                kept = True
        finally:
            renewing.cancel()
            if not kept:  # a retry runs the request again
                await run_blocking(self.ledger, responses.release, program, idem_key)

    async def _renew(self, program: str, idem_key: str, mine: StoredResponse) -> None:
        """Keep the claim of a request running longer than a third of its lease."""
        while True:
            await anyio.sleep(claim_seconds() / 3)
            await run_blocking(self.ledger, self.ledger.responses.renew, program, idem_key, mine)

    async def _claim_everywhere(
        self, program: str, idem_key: str, mine: StoredResponse
    ) -> StoredResponse | None:
        """Claim the key in the store, for every process (``None`` once claimed), or
        what is kept there: an answer, another body's claim, or after waiting
        :data:`IN_FLIGHT_WAIT` seconds in vain the claim of the same request."""
        responses = self.ledger.responses
        deadline = time.monotonic() + IN_FLIGHT_WAIT
        while True:
            stored = await run_blocking(self.ledger, responses.claim, program, idem_key, mine)
            if (
                stored is None
                or not stored.pending
                or stored.fingerprint != mine.fingerprint
                or time.monotonic() >= deadline
            ):
                return stored
            await anyio.sleep(_CLAIM_POLL)

    def _count_replays(self, send: Send) -> Send:
        """``send``, counting responses the route marked as replays in the metrics."""

        async def counting(message: Message) -> None:
            if message["type"] == "http.response.start" and any(
                k.lower() == _REPLAYED and v == b"true" for k, v in message.get("headers", ())
            ):
                self.metrics.observe_replay()
            await send(message)

        return counting

    async def _principal(self, scope: Scope) -> Principal | None:
        """The caller, as the routes authenticate it (the same key cache)."""
        try:
            return await authenticate(Request(scope))
        except TallybookError:
            return None  # the route answers 401 / 503 itself

    async def _answer_stored(
        self, scope: Scope, send: Send, stored: StoredResponse, fp: str
    ) -> None:
        if stored.fingerprint != fp:
            body = scope_problem(
                scope,
                409,
                "idempotency-conflict",
                "this Idempotency-Key was used before with a different request",
            )
            await _send(send, 409, [(b"content-type", b"application/problem+json")], body)
            return
        self.metrics.observe_replay()
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in stored.headers]
        headers.append((REPLAYED_HEADER.lower().encode(), b"true"))
        content = _marked_replay(stored.body).encode("utf-8")
        await _send(send, stored.status, headers, content)


def claim_seconds() -> float:
    """The lease of a claim (read when used, so tests may shorten it)."""
    return float(stored_responses.CLAIM_SECONDS)


def _to_keep(
    fp: str,
    status: int,
    headers: list[tuple[bytes, bytes]],
    content: bytes,
    principal: Principal,
) -> StoredResponse | None:
    """The answer to keep for replays: a 2xx whose body is small enough and text."""
    if not 200 <= status < 300 or len(content) > MAX_STORED_BODY:
        return None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None
    kept = tuple(
        (k.decode("latin-1"), v.decode("latin-1")) for k, v in headers if k.lower() in _KEPT_HEADERS
    )
    return StoredResponse(fp, status, kept, frozenset(principal.scopes), text)


async def _send_in_progress(scope: Scope, send: Send) -> None:
    body = scope_problem(
        scope,
        409,
        "idempotency-conflict",
        "a request with this Idempotency-Key is still in progress; retry it later",
    )
    headers = [(b"content-type", b"application/problem+json"), (b"retry-after", b"1")]
    await _send(send, 409, headers, body)


def _marked_replay(text: str) -> str:
    """The stored body with its ``replay`` flags set, to agree with ``Idempotent-Replayed``.

    The flags sit at the top level (a wallet transaction) or one level down (the
    ``transaction`` of a hold result); other bodies come back unchanged.
    """
    try:
        body = json.loads(text)
    except ValueError:
        return text
    if not isinstance(body, dict):
        return text
    for part in (body, *body.values()):
        if isinstance(part, dict) and part.get("replay") is False:
            part["replay"] = True
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def _match_route(scope: Scope) -> None:
    """Name the route a replayed request would have hit (for metrics and logs)."""
    router = getattr(scope.get("app"), "router", None)
    route = _find_route(getattr(router, "routes", ()), scope)
    if route is not None:
        scope["route"] = route


def _find_route(routes: Iterable[Any], scope: Scope) -> Any:
    for route in routes:
        inner = getattr(route, "original_router", None)  # FastAPI's included routers
        if inner is not None:
            found = _find_route(inner.routes, scope)
            if found is not None:
                return found
            continue
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
    return None


def _invalid(idem_key: str) -> str | None:
    """Why ``idem_key`` is not a valid Idempotency-Key, or None."""
    try:
        check_id(idem_key, "Idempotency-Key")
    except TallybookError as exc:
        return exc.message
    return None


def _may_replay(principal: Principal, stored: StoredResponse) -> bool:
    return "admin" in principal.scopes or stored.scopes <= principal.scopes


async def _send(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
