r"""Request dependencies shared by every router: the ledger, the caller, limits.

Conventions every router follows:

- paths live under ``/v1``; the program is the API key's program, never in the
  path (``/v1/accounts/{account}/...``), so a key only ever sees its own program;
- ``Depends(require("read"|"write"|"admin"))`` gives the :class:`Principal`;
- a POST that writes takes the ``Idempotency-Key`` header (:data:`IdempotencyKey`);
- a POST or DELETE that takes no body says so with a :data:`NoBody` parameter
  (after the principal, so that a missing key is still a 401 first);
- errors are raised as :mod:`tallybook.errors` classes and rendered as RFC 9457
  problem+json by the app; never build error responses by hand;
- a router's routes are :class:`ParsedBodyRoute`\s (``route_class``), which take
  the JSON body the request middleware parsed instead of parsing it again.

The dependencies are ``async`` and shallow on purpose: FastAPI runs a sync
dependency in its thread pool (a thread hop per dependency per request) and
solves nested ``Depends`` one by one, which together cost more than a posting.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from fastapi import Depends, Header, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from tallybook.domain.ids import MAX_ID_LENGTH
from tallybook.errors import Forbidden, Unauthorized
from tallybook.http.keycache import KeyCache, Principal
from tallybook.http.openapi import SCOPE_ATTRIBUTE
from tallybook.http.schemas.common import ID_PATTERN
from tallybook.ledger import Ledger
from tallybook.store.sqlite import SqliteStore

__all__ = [
    "AdminPrincipal",
    "IdempotencyKey",
    "LedgerDep",
    "NoBody",
    "ParsedBodyRoute",
    "Principal",
    "ReadPrincipal",
    "WritePrincipal",
    "authenticate",
    "authorization",
    "key_header",
    "require",
    "run_blocking",
]

SCOPES = ("read", "write", "admin")
T = TypeVar("T")
#: ``scope["state"]`` key of a ``/v1`` JSON body as the request middleware read it
#: (checking that no object gives a key twice); absent where it did not parse one
PARSED_BODY = "parsed_body"


class ParsedBodyRoute(APIRoute):
    """A route that validates the JSON body the request middleware already
    parsed (:data:`PARSED_BODY`) instead of parsing the bytes a second time
    (FastAPI reads a body through ``request.json()``, which this fills in)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            state = request.scope.get("state")
            if state is not None and PARSED_BODY in state:
                request._json = state[PARSED_BODY]  # what request.json() returns
            return await handler(request)

        return route


async def get_ledger(request: Request) -> Ledger:
    ledger: Ledger = request.app.state.ledger
    return ledger


LedgerDep = Annotated[Ledger, Depends(get_ledger)]


async def run_blocking(ledger: Ledger, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``: inline when the store answers from this machine without
    waiting on a network (SQLite), in a worker thread otherwise (DynamoDB), so
    that a slow store never stalls the event loop and a fast one pays no hop."""
    if isinstance(ledger.store, SqliteStore):
        return fn(*args)
    return await anyio.to_thread.run_sync(fn, *args)


async def authenticate(request: Request) -> Principal:
    """The caller of ``request`` from its bearer key (cached for a few seconds)."""
    state = request.state
    cached = getattr(state, "principal", None)
    if isinstance(cached, Principal):  # authenticated earlier in this request
        return cached
    scheme, _, token = authorization(request).partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    keys: KeyCache = request.app.state.keys
    principal = keys.cached(token)
    if principal is None:
        principal = await run_blocking(keys.ledger, keys.authenticate, token)
    state.principal = principal
    return principal


def authorization(request: Request) -> str:
    """The request's one ``Authorization`` header ("" without one). Given twice
    (or, behind API Gateway's HTTP API, two joined by a comma, which no key or
    Basic credential holds), which one is the caller's would be a guess: 401."""
    values = request.headers.getlist("authorization")
    if len(values) > 1 or (values and "," in values[0]):
        raise Unauthorized("the Authorization header is given more than once: send one API key")
    return values[0] if values else ""


def require(scope: str) -> Any:
    """Dependency: the caller must hold ``scope`` (admin implies all)."""
    if scope not in SCOPES:
        raise ValueError(scope)
    missing = f"this API key lacks the '{scope}' scope"

    async def dependency(request: Request) -> Principal:
        principal = await authenticate(request)
        if scope not in principal.scopes and "admin" not in principal.scopes:
            raise Forbidden(missing)
        return principal

    setattr(dependency, SCOPE_ATTRIBUTE, scope)  # documented in the OpenAPI
    return Depends(dependency)


def key_header(description: str, *, max_length: int = MAX_ID_LENGTH) -> Any:
    """The ``Idempotency-Key`` header, validated like any id (1 to ``max_length``
    of A-Z a-z 0-9 . _ : -, starting with a letter or digit): one outside that is
    a 422, whether the route requires the header or not."""
    return Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=max_length,
        pattern=ID_PATTERN,
        description=description,
    )


#: the ``Idempotency-Key`` header where a route requires it: a plain header
#: parameter (no dependency to solve), validated like any id (1-128 of
#: A-Z a-z 0-9 . _ : -, starting with a letter or digit); missing or invalid: 422
IdempotencyKey = Annotated[
    str,
    key_header(
        "Unique per logical request (1-128 of A-Z a-z 0-9 . _ : -): a replay "
        "returns the original response, another body with the same key is a 409"
    ),
]
ReadPrincipal = Annotated[Principal, require("read")]
WritePrincipal = Annotated[Principal, require("write")]
AdminPrincipal = Annotated[Principal, require("admin")]


async def no_body(request: Request) -> None:
    """A route that takes no body refuses one, as a route that takes a body
    refuses a field it does not know: none, ``{}`` or ``null`` is fine,
    malformed JSON a 400 ``malformed-json``, anything else a 422."""
    body = await request.body()
    if not body:
        return
    try:
        value = json.loads(body)
    except RecursionError:  # as FastAPI answers a body route's
        raise HTTPException(400, "There was an error parsing the body") from None
    except ValueError:
        error = {"type": "json_invalid", "loc": ("body",), "msg": "JSON decode error"}
        raise RequestValidationError([error]) from None
    if value is not None and value != {}:
        error = {"type": "no_body", "loc": ("body",), "msg": "this route takes no request body"}
        raise RequestValidationError([error])


#: a parameter of a POST or DELETE route that takes no body (see :func:`no_body`)
NoBody = Annotated[None, Depends(no_body)]
