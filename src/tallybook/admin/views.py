"""Account search and the account page (its actions are in ``admin/actions.py``)."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from tallybook.admin import account_view
from tallybook.admin.account_view import HistoryFilter
from tallybook.admin.actions import new_adjust_id
from tallybook.admin.overview import overview
from tallybook.admin.web import (
    AgentDep,
    IdPath,
    account_path,
    error_status,
    ledger_of,
    redirect,
    render,
)
from tallybook.domain.ids import check_id, is_system_account
from tallybook.domain.wallet import BONUS
from tallybook.errors import NotFound, TallybookError, ValidationError

router = APIRouter()

SearchBy = Literal["any", "account", "order"]


@router.get("/", response_class=HTMLResponse)
def home(request: Request, agent: AgentDep) -> Response:
    return render(request, "home.html", agent, **overview(ledger_of(request), agent.program))


@router.get("/search", response_class=HTMLResponse)
def search(
    request: Request,
    agent: AgentDep,
    q: Annotated[str, Query(max_length=128)] = "",
    by: SearchBy = "any",
) -> Response:
    """An account id opens the account; an order id lists the accounts its transactions touched."""
    ledger = ledger_of(request)
    term = q.strip()
    try:
        check_id(term, "an account or order id")
        if by in ("any", "account"):
            try:
                ledger.accounts.get(agent.program, term)
                return redirect(request, account_path(term))
            except NotFound:
                if by == "account":
                    raise
        txns = ledger.transactions.for_order(agent.program, term)
        if not txns:
            raise NotFound(f"no account or order {term!r} in program {agent.program}")
        accounts = sorted(
            {leg.account for t in txns for leg in t.legs if not is_system_account(leg.account)}
        )
        if len(accounts) == 1:
            return redirect(request, account_path(accounts[0]))
        return render(
            request, "search.html", agent, q=term, by=by, order=term, txns=txns, accounts=accounts
        )
    except TallybookError as exc:
        return render(
            request,
            "search.html",
            agent,
            status_code=error_status(exc),
            q=term,
            by=by,
            error=exc.message,
        )


@router.get("/accounts/{account}", response_class=HTMLResponse)
def account_page(
    request: Request,
    agent: AgentDep,
    account: IdPath,
    fund: Annotated[str, Query(max_length=32)] = "",
    since: Annotated[str, Query(max_length=10)] = "",
    until: Annotated[str, Query(max_length=10)] = "",
    order: Literal["newest", "oldest"] = "newest",
    limit: Annotated[int, Query(ge=1, le=100)] = 25,
    cursor: Annotated[str | None, Query(max_length=4000)] = None,
    ncursor: Annotated[str | None, Query(max_length=2000)] = None,
) -> Response:
    ledger = ledger_of(request)
    try:
        program = ledger.programs.get(agent.program)
        funds = [f.name for f in program.funds]
        if fund and fund not in funds and fund != account_view.ALL_FUNDS:
            raise ValidationError(f"program {program.id} has no fund {fund!r}")
        flt = HistoryFilter(
            fund=fund or account_view.ALL_FUNDS,
            since=since,
            until=until,
            oldest_first=order == "oldest",
            limit=limit,
            cursor=cursor or None,
        )
        flt.bounds()  # a malformed date is the whole page's error
        page = account_view.build(ledger, agent.program, account, flt, ncursor or None)
    except TallybookError as exc:
        return render(
            request,
            "error.html",
            agent,
            status_code=error_status(exc),
            title="Account",
            message=exc.message,
        )
    return render(
        request,
        "account.html",
        agent,
        page=page,
        funds=funds,
        page_sizes=account_view.PAGE_SIZES,
        actionable=account_view.actionable,
        dismissal=account_view.dismissal,
        link=lambda **changes: account_path(account, **page.filter.query(**changes)),
        ncursor=ncursor or "",
        adjust_id=new_adjust_id(),
        grant_fund=BONUS,
        all_funds=account_view.ALL_FUNDS,
        view=urlencode(page.filter.query(cursor=None)),
    )
