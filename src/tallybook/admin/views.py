"""Account search, the account page, and its actions (capture, void, dismiss).

Actions are plain HTML form POSTs (they work without JavaScript), checked for
the session's CSRF token, and answer with a redirect back to the page and a
one-time message (post/redirect/get).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, Response

from tallybook.admin import account_view
from tallybook.admin.account_view import HistoryFilter
from tallybook.admin.overview import overview
from tallybook.admin.web import AgentDep, PostingAgent, ledger_of, redirect, render
from tallybook.domain.ids import check_id, is_system_account
from tallybook.errors import NotFound, TallybookError, ValidationError

router = APIRouter()

IdPath = Annotated[
    str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:\-]*$")
]
SearchBy = Literal["any", "account", "order"]
ViewForm = Annotated[str, Form(max_length=300)]
#: the history filter an action keeps when it returns to the account page
_VIEW_KEYS = ("fund", "since", "until", "order", "limit")


def account_path(account: str, **query: str) -> str:
    path = f"/accounts/{quote(account, safe='')}"
    return f"{path}?{urlencode(query)}" if query else path


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
        status = 404 if isinstance(exc, NotFound) else 422
        return render(
            request, "search.html", agent, status_code=status, q=term, by=by, error=exc.message
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
    cursor: Annotated[str | None, Query(max_length=2000)] = None,
    ncursor: Annotated[str | None, Query(max_length=2000)] = None,
) -> Response:
    ledger = ledger_of(request)
    try:
        program = ledger.programs.get(agent.program)
        funds = [f.name for f in program.funds]
        if fund and fund not in funds:
            raise ValidationError(f"program {program.id} has no fund {fund!r}")
        flt = HistoryFilter(
            fund=fund or (funds[0] if funds else "points"),
            since=since,
            until=until,
            oldest_first=order == "oldest",
            limit=limit,
            cursor=cursor or None,
        )
        flt.bounds()  # a malformed date is the whole page's error
        page = account_view.build(ledger, agent.program, account, flt, ncursor or None)
    except TallybookError as exc:
        status = exc.status if exc.status in (404, 422) else 500
        return render(
            request, "error.html", agent, status_code=status, title="Account", message=exc.message
        )
    return render(
        request,
        "account.html",
        agent,
        page=page,
        funds=funds,
        page_sizes=account_view.PAGE_SIZES,
        actionable=account_view.actionable,
        link=lambda **changes: account_path(account, **page.filter.query(**changes)),
        ncursor=ncursor or "",
        view=urlencode(page.filter.query(cursor=None)),
    )


def _view_query(view: str) -> dict[str, str]:
    """The known history-filter fields of a form's ``view`` field (anything else dropped)."""
    return {k: v for k, v in parse_qsl(view)[:10] if k in _VIEW_KEYS and len(v) <= 32}


def _act(
    request: Request,
    account: str,
    anchor: str,
    action: str,
    run: Callable[[], str],
    view: str = "",
) -> Response:
    """Run an action and go back to the account page (same filter) with what happened."""
    back = account_path(account, **_view_query(view)) + anchor
    try:
        message = run()
    except TallybookError as exc:
        return redirect(request, back, ("error", f"{action} failed: {exc.message}"))
    return redirect(request, back, ("ok", message))


def _own_hold(request: Request, program: str, account: str, hold_id: str) -> None:
    """Refuse a hold of another account (the form names both)."""
    if ledger_of(request).wallet.hold(program, hold_id).account != account:
        raise NotFound(f"hold {hold_id} is not on account {account}")


@router.post("/accounts/{account}/holds/{hold_id}/void")
def void_hold(
    request: Request, agent: PostingAgent, account: IdPath, hold_id: IdPath, view: ViewForm = ""
) -> Response:
    def run() -> str:
        _own_hold(request, agent.program, account, hold_id)
        hold = ledger_of(request).wallet.void(agent.program, hold_id).hold
        return f"Hold {hold_id} is {hold.status}."

    return _act(request, account, "#holds", "Void", run, view)


@router.post("/accounts/{account}/holds/{hold_id}/capture")
def capture_hold(
    request: Request,
    agent: PostingAgent,
    account: IdPath,
    hold_id: IdPath,
    amount: Annotated[str, Form(max_length=20)] = "",
    view: ViewForm = "",
) -> Response:
    def run() -> str:
        value = None
        if amount.strip():
            if not amount.strip().isdigit():
                raise ValidationError("the amount must be a whole number of minor units")
            value = int(amount.strip())
        _own_hold(request, agent.program, account, hold_id)
        result = ledger_of(request).wallet.capture(agent.program, hold_id, value)
        return f"Hold {hold_id} is {result.hold.status}: {result.hold.captured:,} captured."

    return _act(request, account, "#holds", "Capture", run, view)


@router.post("/accounts/{account}/notifications/{notification_id}/dismiss")
def dismiss_notification(
    request: Request,
    agent: PostingAgent,
    account: IdPath,
    notification_id: IdPath,
    view: ViewForm = "",
) -> Response:
    def run() -> str:
        n = ledger_of(request).notifications.dismiss(agent.program, account, notification_id)
        return f"Notification {n.type} dismissed."

    return _act(request, account, "#notifications", "Dismiss", run, view)
