"""Webhook subscriptions over HTTP (admin scope): the API key's program only.

- ``POST /v1/webhooks``: subscribe a URL; the answer carries the signing
  secret, the only time it is shown;
- ``GET /v1/webhooks``, ``GET /v1/webhooks/{id}``: never the secret;
- ``POST /v1/webhooks/{id}/disable`` and ``/enable``, ``DELETE /v1/webhooks/{id}``;
- ``GET /v1/webhooks/{id}/deliveries``: newest first, with their last attempts;
- ``POST /v1/webhooks/{id}/deliveries/{position}/resend``.

``http://`` URLs (loopback only) are accepted when the request says
``allow_http`` *and* the server runs with ``TALLYBOOK_WEBHOOKS_ALLOW_HTTP=1``,
a development setting.
"""

from __future__ import annotations

import os
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from tallybook.domain.webhooks import POSITION_PATTERN
from tallybook.errors import ValidationError
from tallybook.http.deps import AdminPrincipal, LedgerDep, NoBody, ParsedBodyRoute
from tallybook.http.routers.ledger import Cursor
from tallybook.http.schemas.common import ASCII_DIGITS, ID_PATTERN
from tallybook.http.schemas.webhooks import (
    ALLOW_HTTP_ENV,
    CreatedOut,
    DeliveryOut,
    DeliveryPageOut,
    SubscriptionIn,
    SubscriptionListOut,
    SubscriptionOut,
)
from tallybook.webhooks.service import MAX_PAGE

router = APIRouter(prefix="/v1", tags=["webhooks"], route_class=ParsedBodyRoute)

SubId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="subscription id")
]
Position = Annotated[str, Path(pattern=POSITION_PATTERN, description="delivery position")]
#: a page of delivery records (each keeps its last attempts) is at most MAX_PAGE
DeliveryLimit = Annotated[
    int, Query(ge=1, le=MAX_PAGE, description=f"page size, 1-{MAX_PAGE}"), ASCII_DIGITS
]


@router.post(
    "/webhooks",
    status_code=status.HTTP_201_CREATED,
    summary="Subscribe a URL to events (the secret is in this answer only)",
)
def create_subscription(
    body: SubscriptionIn, principal: AdminPrincipal, ledger: LedgerDep
) -> CreatedOut:
    if body.allow_http and os.environ.get(ALLOW_HTTP_ENV) != "1":
        raise ValidationError(f"allow_http needs the server to run with {ALLOW_HTTP_ENV}=1")
    created = ledger.webhooks.create(
        principal.program,
        body.url,
        types=body.types,
        allow_http=body.allow_http,
        description=body.description,
    )
    return CreatedOut(**created.subscription.public(), secret=created.secret)


@router.get("/webhooks", summary="The program's subscriptions (never their secrets)")
def list_subscriptions(principal: AdminPrincipal, ledger: LedgerDep) -> SubscriptionListOut:
    subs = ledger.webhooks.list(principal.program)
    return SubscriptionListOut(subscriptions=[SubscriptionOut(**s.public()) for s in subs])


@router.get(
    "/webhooks/{sub_id}", summary="One subscription: its URL, types and status (never its secret)"
)
def get_subscription(
    sub_id: SubId, principal: AdminPrincipal, ledger: LedgerDep
) -> SubscriptionOut:
    return SubscriptionOut(**ledger.webhooks.get(principal.program, sub_id).public())


@router.post("/webhooks/{sub_id}/disable", summary="Stop delivering (the queue waits)")
def disable_subscription(
    sub_id: SubId, principal: AdminPrincipal, _: NoBody, ledger: LedgerDep
) -> SubscriptionOut:
    ledger.webhooks.disable(principal.program, sub_id)
    return SubscriptionOut(**ledger.webhooks.get(principal.program, sub_id).public())


@router.post(
    "/webhooks/{sub_id}/enable",
    summary="Resume delivering to a disabled subscription (its queue intact)",
)
def enable_subscription(
    sub_id: SubId, principal: AdminPrincipal, _: NoBody, ledger: LedgerDep
) -> SubscriptionOut:
    ledger.webhooks.enable(principal.program, sub_id)
    return SubscriptionOut(**ledger.webhooks.get(principal.program, sub_id).public())


@router.delete(
    "/webhooks/{sub_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,  # no content, so no Content-Type either
    summary="Delete a subscription (GET then answers 404)",
)
def delete_subscription(
    sub_id: SubId, principal: AdminPrincipal, _: NoBody, ledger: LedgerDep
) -> None:
    ledger.webhooks.delete(principal.program, sub_id)


@router.get("/webhooks/{sub_id}/deliveries", summary="A subscription's deliveries, newest first")
def list_deliveries(
    sub_id: SubId,
    principal: AdminPrincipal,
    ledger: LedgerDep,
    limit: DeliveryLimit = 50,
    cursor: Cursor = None,
) -> DeliveryPageOut:
    found, next_cursor = ledger.webhooks.deliveries(
        principal.program, sub_id, limit=limit, cursor=cursor
    )
    return DeliveryPageOut(
        deliveries=[DeliveryOut(**d.public()) for d in found], cursor=next_cursor
    )


@router.post(
    "/webhooks/{sub_id}/deliveries/{position}/resend",
    summary="Queue a delivery again (the next worker pass sends it)",
)
def resend_delivery(
    sub_id: SubId, position: Position, principal: AdminPrincipal, _: NoBody, ledger: LedgerDep
) -> DeliveryOut:
    return DeliveryOut(**ledger.webhooks.resend(principal.program, sub_id, position).public())
