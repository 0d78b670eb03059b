"""Wallet resources: balance view, grants, credits, debits, holds, records, reconcile.

Writes take the ``Idempotency-Key`` header as their id: the transaction id of
a grant, credit or debit, the hold id of an authorisation or held credit.
Capture and void are idempotent by themselves (the key is optional there).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response, status

from tallybook.domain.wallet import MAX_HOLD_ID
from tallybook.errors import ValidationError
from tallybook.http.deps import (
    AdminPrincipal,
    IdempotencyKey,
    LedgerDep,
    NoBody,
    ParsedBodyRoute,
    ReadPrincipal,
    WritePrincipal,
    key_header,
)
from tallybook.http.idempotency import REPLAYED_HEADER
from tallybook.http.problems import problem_responses
from tallybook.http.schemas.common import ASCII_DIGITS, ID_PATTERN
from tallybook.http.schemas.wallet import (
    AuthorizeIn,
    CaptureIn,
    CreditIn,
    DebitIn,
    GrantIn,
    GrantOut,
    HeldCreditIn,
    HoldOut,
    HoldResultOut,
    ReconcileOut,
    WalletBalanceOut,
    WalletTransactionOut,
    WalletTransactionPageOut,
)

#: a charged debit whose processor declined or timed out (nothing was applied)
PAYMENT_DECLINED: dict[int | str, dict[str, Any]] = {
    402: {
        **problem_responses(402)[402],
        "description": "`payment-declined`: the processor declined or timed out the charge "
        "of the shortfall; nothing was applied",
    }
}

router = APIRouter(prefix="/v1", tags=["wallet"], route_class=ParsedBodyRoute)

AccountId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="account id")
]
HoldId = Annotated[
    str, Path(min_length=1, max_length=100, pattern=ID_PATTERN, description="hold id")
]
TxnId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="transaction id")
]
#: the ``Idempotency-Key`` of a write whose key is a hold or grant id: at most
#: 100 characters, so the ids derived from it (``{id}:capture``, ...) fit in 128
HoldKey = Annotated[
    str,
    key_header(
        f"Unique per logical request (1-{MAX_HOLD_ID} of A-Z a-z 0-9 . _ : -), "
        "the hold or grant id: a replay returns the original response, another body with "
        "the same key is a 409",
        max_length=MAX_HOLD_ID,
    ),
]


def _aware(value: datetime, name: str) -> datetime:
    if value.tzinfo is None:
        raise ValidationError(f"'{name}' needs a time zone (for example 2026-05-01T00:00:00Z)")
    return value


def _mark(response: Response, replay: bool, location: str) -> None:
    response.headers["Location"] = location
    if replay:
        response.headers[REPLAYED_HEADER] = "true"


# --- reads ---------------------------------------------------------------------


@router.get("/accounts/{account}/wallet", summary="Wallet balance per fund")
def get_balance(
    account: AccountId, principal: ReadPrincipal, ledger: LedgerDep
) -> WalletBalanceOut:
    """Per fund: total, withheld (pending) and available; bonus counts unexpired grants."""
    return WalletBalanceOut.of(ledger.wallet.balance(principal.program, account))


@router.get("/accounts/{account}/wallet/grants", summary="Bonus grants, earliest expiry first")
def list_grants(
    account: AccountId,
    principal: ReadPrincipal,
    ledger: LedgerDep,
    expired: Annotated[bool, Query(description="include expired grants")] = False,
) -> list[GrantOut]:
    found = ledger.wallet.grants(principal.program, account, include_expired=expired)
    return [GrantOut.of(g) for g in found]


@router.get("/accounts/{account}/wallet/holds", summary="Holds and held credits, newest first")
def list_holds(
    account: AccountId,
    principal: ReadPrincipal,
    ledger: LedgerDep,
    active: Annotated[bool, Query(description="only active holds")] = False,
) -> list[HoldOut]:
    found = ledger.wallet.holds(principal.program, account, active_only=active)
    return [HoldOut.of(h) for h in found]


@router.get(
    "/accounts/{account}/wallet/transactions",
    summary="Transaction records of an owner, newest first",
)
def list_transactions(
    account: AccountId,
    principal: ReadPrincipal,
    ledger: LedgerDep,
    limit: Annotated[int, Query(ge=1, le=1000, description="page size, 1-1000"), ASCII_DIGITS] = 50,
    cursor: Annotated[
        str | None, Query(max_length=2048, description="the `cursor` of the previous page")
    ] = None,
) -> WalletTransactionPageOut:
    page = ledger.wallet.transactions(principal.program, account, limit=limit, cursor=cursor)
    return WalletTransactionPageOut(
        transactions=[WalletTransactionOut.of(t) for t in page.transactions], cursor=page.cursor
    )


@router.get(
    "/wallet/transactions/{txn_id}",
    summary="One wallet transaction record by its transaction id",
)
def get_transaction(
    txn_id: TxnId, principal: ReadPrincipal, ledger: LedgerDep
) -> WalletTransactionOut:
    return WalletTransactionOut.of(ledger.wallet.transaction(principal.program, txn_id))


@router.get("/holds/{hold_id}", summary="One hold (expired on the way if past its deadline)")
def get_hold(hold_id: HoldId, principal: ReadPrincipal, ledger: LedgerDep) -> HoldOut:
    return HoldOut.of(ledger.wallet.hold(principal.program, hold_id))


# --- writes --------------------------------------------------------------------


@router.post(
    "/accounts/{account}/wallet/grants",
    status_code=status.HTTP_201_CREATED,
    summary="Award a bonus grant (the Idempotency-Key is the grant id)",
)
def post_grant(
    account: AccountId,
    body: GrantIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    txn_id: HoldKey,
    response: Response,
) -> WalletTransactionOut:
    t = ledger.wallet.grant(
        principal.program,
        account,
        body.amount,
        expires_at=_aware(body.expires_at, "expires_at") if body.expires_at else None,
        expires_in_days=body.expires_in_days,
        txn_id=txn_id,
        description=body.description,
    )
    _mark(response, t.replay, f"/v1/wallet/transactions/{t.id}")
    return WalletTransactionOut.of(t)


@router.post(
    "/accounts/{account}/wallet/credits",
    status_code=status.HTTP_201_CREATED,
    summary="Credit cash or store credit from outside the program",
)
def post_credit(
    account: AccountId,
    body: CreditIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    txn_id: IdempotencyKey,
    response: Response,
) -> WalletTransactionOut:
    t = ledger.wallet.credit(
        principal.program,
        account,
        body.fund,
        body.amount,
        txn_id=txn_id,
        description=body.description,
    )
    _mark(response, t.replay, f"/v1/wallet/transactions/{t.id}")
    return WalletTransactionOut.of(t)


@router.post(
    "/accounts/{account}/wallet/held-credits",
    status_code=status.HTTP_201_CREATED,
    summary="Credit now, pending until a date (the Idempotency-Key is the hold id)",
)
def post_held_credit(
    account: AccountId,
    body: HeldCreditIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    txn_id: HoldKey,
    response: Response,
) -> HoldResultOut:
    r = ledger.wallet.credit_held(
        principal.program,
        account,
        body.fund,
        body.amount,
        release_at=_aware(body.release_at, "release_at"),
        txn_id=txn_id,
        description=body.description,
    )
    _mark(response, bool(r.transaction and r.transaction.replay), f"/v1/holds/{r.hold.id}")
    return HoldResultOut.of(r)


@router.post(
    "/accounts/{account}/wallet/debits",
    status_code=status.HTTP_201_CREATED,
    summary="Spend bonus, then store credit, then cash; reject or charge a shortfall",
    responses=PAYMENT_DECLINED,
)
def post_debit(
    account: AccountId,
    body: DebitIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    txn_id: IdempotencyKey,
    response: Response,
) -> WalletTransactionOut:
    t = ledger.wallet.debit(
        principal.program,
        account,
        body.amount,
        txn_id=txn_id,
        on_shortfall=body.on_shortfall,
        order_id=body.order_id,
        description=body.description,
    )
    _mark(response, t.replay, f"/v1/wallet/transactions/{t.id}")
    return WalletTransactionOut.of(t)


@router.post(
    "/accounts/{account}/wallet/holds",
    status_code=status.HTTP_201_CREATED,
    summary="Authorize: withhold an amount (the Idempotency-Key is the hold id)",
)
def post_hold(
    account: AccountId,
    body: AuthorizeIn,
    principal: WritePrincipal,
    ledger: LedgerDep,
    hold_id: HoldKey,
    response: Response,
) -> HoldResultOut:
    r = ledger.wallet.authorize(
        principal.program,
        account,
        body.amount,
        hold_id=hold_id,
        expires_in=body.expires_in,
        description=body.description,
    )
    _mark(response, bool(r.transaction and r.transaction.replay), f"/v1/holds/{r.hold.id}")
    return HoldResultOut.of(r)


@router.post("/holds/{hold_id}/capture", summary="Capture all or part of a hold (idempotent)")
def capture_hold(
    hold_id: HoldId,
    principal: WritePrincipal,
    ledger: LedgerDep,
    response: Response,
    body: CaptureIn | None = None,
) -> HoldResultOut:
    r = ledger.wallet.capture(principal.program, hold_id, body.amount if body else None)
    _mark(response, bool(r.transaction and r.transaction.replay), f"/v1/holds/{hold_id}")
    return HoldResultOut.of(r)


@router.post("/holds/{hold_id}/void", summary="Release a hold (idempotent)")
def void_hold(
    hold_id: HoldId, principal: WritePrincipal, _: NoBody, ledger: LedgerDep, response: Response
) -> HoldResultOut:
    r = ledger.wallet.void(principal.program, hold_id)
    _mark(response, bool(r.transaction and r.transaction.replay), f"/v1/holds/{hold_id}")
    return HoldResultOut.of(r)


@router.post("/wallet/reconcile", summary="Run the wallet reconcile job (admin)")
def post_reconcile(principal: AdminPrincipal, _: NoBody, ledger: LedgerDep) -> ReconcileOut:
    report = ledger.wallet.reconcile(principal.program)
    return ReconcileOut(actions=report.lines(), refunds_failed=len(report.failed_refunds))
