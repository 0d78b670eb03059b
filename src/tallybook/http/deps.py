"""Request dependencies shared by every router: the ledger, the caller, limits.

Conventions every router follows:

- paths live under ``/v1``; the program is the API key's program, never in the
  path (``/v1/accounts/{account}/...``), so a key only ever sees its own program;
- ``Depends(require("read"|"write"|"admin"))`` gives the :class:`Principal`;
- a POST that writes takes the ``Idempotency-Key`` header (:data:`IdempotencyKey`);
- errors are raised as :mod:`tallybook.errors` classes and rendered as RFC 9457
  problem+json by the app; never build error responses by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request

from tallybook.errors import Forbidden, Unauthorized, ValidationError
from tallybook.ledger import Ledger

SCOPES = ("read", "write", "admin")


@dataclass(frozen=True, slots=True)
class Principal:
    key_id: str
    program: str
    scopes: frozenset[str]


async def get_ledger(request: Request) -> Ledger:
    # async: FastAPI runs a sync dependency in the thread pool, a hop per request
    ledger: Ledger = request.app.state.ledger
    return ledger


LedgerDep = Annotated[Ledger, Depends(get_ledger)]


def _authenticate(request: Request, ledger: Ledger) -> Principal:
    cached = getattr(request.state, "principal", None)
    if isinstance(cached, Principal):  # authenticated earlier in this request (idempotency)
        return cached
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    key = ledger.keys.authenticate(token.strip())
    principal = Principal(key.id, key.program, frozenset(key.scopes))
    request.state.principal = principal
    return principal


def require(scope: str):  # type: ignore[no-untyped-def]
    """Dependency factory: the caller must hold ``scope`` (admin implies all)."""
    if scope not in SCOPES:
        raise ValueError(scope)

    def dependency(request: Request, ledger: LedgerDep) -> Principal:
        principal = _authenticate(request, ledger)
        if scope not in principal.scopes and "admin" not in principal.scopes:
            raise Forbidden(f"this API key lacks the '{scope}' scope")
        return principal

    return Depends(dependency)


async def idempotency_key(
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=128,
            pattern=r"^[A-Za-z0-9][A-Za-z0-9._:\-]*$",
            description="Unique per logical request (1-128 of A-Z a-z 0-9 . _ : -); "
            "a replay returns the original response, another body with the same key is a 409",
        ),
    ] = None,
) -> str:
    from tallybook.domain.ids import check_id

    if idempotency_key is None:
        raise ValidationError("the Idempotency-Key header is required on this request")
    return check_id(idempotency_key, "Idempotency-Key")


IdempotencyKey = Annotated[str, Depends(idempotency_key)]
ReadPrincipal = Annotated[Principal, require("read")]
WritePrincipal = Annotated[Principal, require("write")]
AdminPrincipal = Annotated[Principal, require("admin")]
