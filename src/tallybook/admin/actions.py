"""What an agent changes from the account page: capture and void a hold (each behind a
confirmation page), dismiss a notification, adjust a balance.

Every change is a plain HTML form POST carrying the session's CSRF token (no
JavaScript), answered with a redirect back to the account page and a one-time
message (post/redirect/get). Capture and void are asked for first with a GET:
the confirmation page says what will happen in the customer's currency, and its
button makes the POST. Amounts are typed in the fund's currency (``14.50``) or
whole points, never in minor units.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Annotated, Literal
from urllib.parse import parse_qsl

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response

from tallybook.admin.account_view import actionable
from tallybook.admin.money import format_amount, parse_amount
from tallybook.admin.web import (
    Agent,
    AgentDep,
    IdPath,
    PostingAgent,
    account_path,
    ledger_of,
    redirect,
    render,
)
from tallybook.domain.wallet import BONUS, Hold
from tallybook.errors import InsufficientFunds, NotFound, TallybookError, ValidationError

router = APIRouter()

ViewForm = Annotated[str, Form(max_length=300)]
AmountForm = Annotated[str, Form(max_length=32)]
HoldAction = Literal["capture", "void"]
#: the history filter an action keeps when it returns to the account page
_VIEW_KEYS = ("fund", "since", "until", "order", "limit")
MAX_REASON = 200
#: adjustment ids the form draws (the form's own id makes a double submit a replay)
ADJUST_PREFIX = "admin-adjust-"
_ADJUST_ID = re.compile(ADJUST_PREFIX + "[0-9a-f]{16}")


def new_adjust_id() -> str:
    return ADJUST_PREFIX + secrets.token_hex(8)


def view_query(view: str) -> dict[str, str]:
    """The known history-filter fields of a form's ``view`` field (anything else dropped)."""
    return {k: v for k, v in parse_qsl(view)[:10] if k in _VIEW_KEYS and len(v) <= 32}


def _back(account: str, view: str, anchor: str) -> str:
    return account_path(account, **view_query(view)) + anchor


def _act(
    request: Request,
    account: str,
    anchor: str,
    action: str,
    run: Callable[[], str],
    view: str = "",
) -> Response:
    """Run an action and go back to the account page (same filter) with what happened."""
    try:
        message = run()
    except TallybookError as exc:
        return redirect(
            request, _back(account, view, anchor), ("error", f"{action} failed: {exc.message}")
        )
    return redirect(request, _back(account, view, anchor), ("ok", message))


def _own_hold(request: Request, program: str, account: str, hold_id: str) -> Hold:
    """The hold, refused when it belongs to another account (the form names both)."""
    hold = ledger_of(request).wallet.hold(program, hold_id)
    if hold.account != account:
        raise NotFound(f"hold {hold_id} is not on account {account}")
    return hold


def _currency(request: Request, agent: Agent) -> str:
    return ledger_of(request).programs.get(agent.program).currency


def _capture_amount(text: str, currency: str) -> int | None:
    """``None`` (capture all) for an empty field, else minor units of the currency."""
    return parse_amount(text, currency, "the amount to capture") if text.strip() else None


def _within(hold: Hold, value: int | None, currency: str) -> None:
    """Refuse capturing more than is held, in the customer's currency (the wallet's
    own refusal names minor units)."""
    if value is not None and value > hold.amount:
        raise ValidationError(
            f"the amount to capture is more than the {format_amount(hold.amount, currency)} held"
        )


@router.get("/accounts/{account}/holds/{hold_id}/{action}", response_class=HTMLResponse)
def confirm_hold_action(
    request: Request,
    agent: AgentDep,
    account: IdPath,
    hold_id: IdPath,
    action: HoldAction,
    amount: Annotated[str, Query(max_length=32)] = "",
    view: Annotated[str, Query(max_length=300)] = "",
) -> Response:
    """The confirmation step of capture and void: what will happen, and the button."""
    try:
        currency = _currency(request, agent)
        value = _capture_amount(amount, currency) if action == "capture" else None
        hold = _own_hold(request, agent.program, account, hold_id)
        if not actionable(hold):
            raise ValidationError(f"hold {hold_id} is {hold.status}; nothing to {action}")
        _within(hold, value, currency)
    except TallybookError as exc:
        verb = action.capitalize()
        return redirect(
            request, _back(account, view, "#holds"), ("error", f"{verb} failed: {exc.message}")
        )
    captured = hold.amount if value is None else value
    return render(
        request,
        "confirm.html",
        agent,
        account=account,
        hold=hold,
        action=action,
        currency=currency,
        captured=captured,
        released=hold.amount - captured if action == "capture" else hold.amount,
        amount=amount.strip(),
        view=view,
        back=_back(account, view, "#holds"),
    )


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
    amount: AmountForm = "",
    view: ViewForm = "",
) -> Response:
    def run() -> str:
        currency = _currency(request, agent)
        value = _capture_amount(amount, currency)
        _within(_own_hold(request, agent.program, account, hold_id), value, currency)
        hold = ledger_of(request).wallet.capture(agent.program, hold_id, value).hold
        return (
            f"Hold {hold_id} is {hold.status}: {format_amount(hold.captured, currency)} captured."
        )

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


@router.post("/accounts/{account}/adjust")
def adjust_balance(
    request: Request,
    agent: PostingAgent,
    account: IdPath,
    fund: Annotated[str, Form(max_length=32)] = "",
    direction: Annotated[Literal["add", "remove"], Form()] = "add",
    amount: AmountForm = "",
    reason: Annotated[str, Form(max_length=1000)] = "",
    txn: Annotated[str, Form(max_length=64)] = "",
    view: ViewForm = "",
) -> Response:
    """A signed correction against ``@adjustment``; the reason and the agent's key are
    recorded in the transaction's metadata. The form's own id makes a resubmit a replay."""

    def run() -> str:
        program = ledger_of(request).programs.get(agent.program)
        spec = program.fund(fund)
        if spec is None:
            raise ValidationError(f"program {program.id} has no fund {fund!r}")
        if fund == BONUS:
            raise ValidationError(
                f"{BONUS} is made of expiring grants, which an adjustment would not "
                "create or spend (the wallet would neither count nor use it); "
                "grant bonus instead (tallybook wallet grant)"
            )
        why = " ".join(reason.split())
        if not why:
            raise ValidationError("a reason is required")
        if len(why) > MAX_REASON:
            raise ValidationError(f"the reason is longer than {MAX_REASON} characters")
        if not _ADJUST_ID.fullmatch(txn):
            raise ValidationError("the form has no valid adjustment id; reload the page")
        value = parse_amount(amount, spec.unit)
        signed = value if direction == "add" else -value
        metadata = {"reason": why, "agent_key": agent.key.id}
        if agent.key.name:
            metadata["agent"] = agent.key.name[:64]
        ledger = ledger_of(request)
        try:
            t = ledger.transactions.adjust(
                agent.program,
                account,
                fund,
                signed,
                txn_id=txn,
                description="balance adjustment",
                metadata=metadata,
            )
        except InsufficientFunds:  # the ledger's refusal names minor units
            state = ledger.accounts.get(agent.program, account).funds.get(fund)
            available = format_amount(state.available if state else 0, spec.unit)
            raise InsufficientFunds(
                f"{fund} has {available} available; "
                f"{format_amount(value, spec.unit)} cannot be taken from it"
            ) from None
        again = " (already applied)" if t.replay else ""
        change = format_amount(signed, spec.unit, signed=True)
        return f"{fund} adjusted by {change}{again}: {why}"

    return _act(request, account, "#history", "Adjust", run, view)
