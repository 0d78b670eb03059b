"""Webhooks on the admin page: the program's subscriptions, each one's
deliveries (newest first, optionally of one account) and "resend"."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, Response

from tallybook.admin.web import AgentDep, IdPath, PostingAgent, ledger_of, redirect, render
from tallybook.domain.ids import check_id
from tallybook.domain.webhooks import POSITION_PATTERN
from tallybook.errors import TallybookError
from tallybook.webhooks.service import MAX_PAGE

router = APIRouter()

PositionPath = Annotated[str, Path(pattern=POSITION_PATTERN)]


@router.get("/webhooks", response_class=HTMLResponse)
def subscriptions(request: Request, agent: AgentDep) -> Response:
    subs = ledger_of(request).webhooks.list(agent.program)
    return render(request, "webhooks.html", agent, subscriptions=subs)


@router.get("/webhooks/{sub_id}", response_class=HTMLResponse)
def deliveries(
    request: Request,
    agent: AgentDep,
    sub_id: IdPath,
    account: Annotated[str, Query(max_length=128)] = "",
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
) -> Response:
    """One page of deliveries; with ``account``, those of the page that concern it."""
    webhooks = ledger_of(request).webhooks
    try:
        sub = webhooks.get(agent.program, sub_id)
        if account:
            check_id(account, "account")
        found, next_cursor = webhooks.deliveries(
            agent.program, sub_id, limit=MAX_PAGE if account else 50, cursor=cursor
        )
    except TallybookError as exc:
        return render(
            request,
            "error.html",
            agent,
            status_code=exc.status,
            title="Webhook deliveries",
            message=exc.message,
        )
    if account:
        found = [d for d in found if account in d.accounts]
    return render(
        request,
        "webhook_deliveries.html",
        agent,
        sub=sub,
        deliveries=found,
        account=account,
        cursor=next_cursor,
    )


@router.post("/webhooks/{sub_id}/deliveries/{position}/resend")
def resend(
    request: Request, agent: PostingAgent, sub_id: IdPath, position: PositionPath
) -> Response:
    back = f"/webhooks/{sub_id}"
    try:
        delivery = ledger_of(request).webhooks.resend(agent.program, sub_id, position)
    except TallybookError as exc:
        return redirect(request, back, ("error", f"Resend failed: {exc.message}"))
    return redirect(
        request, back, ("ok", f"Event {delivery.event_id} queued again; the worker sends it next.")
    )
