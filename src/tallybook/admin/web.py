"""What every admin view shares: templates, the signed-in agent, CSRF, flash messages.

Views depend on :func:`current_agent` (GET) or :func:`posting_agent` (POST, CSRF
checked). Both raise :class:`LoginRequired` when there is no valid session or
the key behind it is no longer an active admin key of the session's program;
the handler ``install`` registers turns that into a redirect to the login page.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import Depends, Form, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, select_autoescape

from tallybook.admin.money import example, format_amount
from tallybook.admin.session import SESSION_COOKIE, Session, SessionSigner
from tallybook.domain.model import Program
from tallybook.domain.notifications import HOLD_EXPIRED, LOW_BALANCE
from tallybook.errors import NotFound, TallybookError
from tallybook.ledger import Ledger
from tallybook.services.apikeys import ApiKey

HERE = Path(__file__).parent
FLASH_COOKIE = "tb_admin_flash"
ADMIN_SCOPE = "admin"

_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else ""


def _num(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def _instant(text: str) -> str:
    """An ISO timestamp (a webhook event's time) as ``YYYY-MM-DD HH:MM:SS`` UTC, like
    every other time on the pages."""
    try:
        return _when(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return text


def _stamp(text: str) -> str:
    """An ISO timestamp (report window bounds) as ``YYYY-MM-DD HH:MM`` UTC."""
    try:
        return _when(datetime.fromisoformat(text.replace("Z", "+00:00")))[:16]
    except ValueError:
        return text


def _money(value: int | None, unit: str, signed: bool = False) -> str:
    return "" if value is None else format_amount(value, unit, signed=signed)


#: the money amounts in the payloads of notifications the ledger raises: their keys,
#: and the payload key naming the fund whose unit they are in (``None``: the
#: program's currency, as a hold's amount)
_MONEY_KEYS: dict[str, tuple[tuple[str, ...], str | None]] = {
    HOLD_EXPIRED: (("amount",), None),
    LOW_BALANCE: (("balance", "available", "threshold"), "fund"),
}


def _money_unit(payload: dict[str, Any], kind: str, program: Program | None) -> str | None:
    """The unit the money amounts of ``payload`` are in, if ``kind`` has any."""
    if program is None or kind not in _MONEY_KEYS:
        return None
    fund_key = _MONEY_KEYS[kind][1]
    if fund_key is None:
        return program.currency
    fund = payload.get(fund_key)
    spec = program.fund(fund) if isinstance(fund, str) else None
    return spec.unit if spec else None


def _readable(
    payload: Any, kind: str = "", program: Program | None = None
) -> list[tuple[str, str, str]]:
    """A notification payload as (key, text, raw) lines: strings as they are, anything
    else as JSON with its characters unescaped (the page escapes them for HTML itself).
    The money amounts of a notification the ledger raises (``kind`` HoldExpired,
    LowBalance) read in their unit (``$3.00``, not ``300``); ``raw`` keeps the value as
    stored (minor units) for those, and is empty for the rest."""
    if not isinstance(payload, dict):
        return [("", json.dumps(payload, ensure_ascii=False), "")]
    unit = _money_unit(payload, kind, program)
    money = _MONEY_KEYS[kind][0] if unit is not None else ()
    lines = []
    for k, v in payload.items():
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        if unit is not None and k in money and isinstance(v, int) and not isinstance(v, bool):
            lines.append((str(k), format_amount(v, unit), f"{text} minor units"))
        else:
            lines.append((str(k), text, ""))
    return lines


_env.filters.update(
    when=_when,
    instant=_instant,
    num=_num,
    stamp=_stamp,
    money=_money,
    readable=_readable,
    example=example,
)
templates = Jinja2Templates(env=_env)

#: sent with every admin page: no framing, no inline script, nothing cached
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


IdPath = Annotated[
    str, PathParam(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:\-]*$")
]


def account_path(account: str, **query: str) -> str:
    """``/accounts/{account}`` under the admin prefix, with a query string."""
    path = f"/accounts/{quote(account, safe='')}"
    return f"{path}?{urlencode(query)}" if query else path


class LoginRequired(Exception):
    """No valid session: the agent is sent to the login page with ``message``."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class CsrfFailed(Exception):
    """A POST without the session's CSRF token."""


@dataclass(frozen=True, slots=True)
class Agent:
    """The signed-in support agent: their session and the (re-checked) key."""

    session: Session
    key: ApiKey
    csrf: str

    @property
    def program(self) -> str:
        return self.session.program


def base_path(request: Request) -> str:
    """``/admin`` under the app's root path; under a mount (``/admin/static``) the
    scope's ``root_path`` holds the mount too, ``app_root_path`` the app's own."""
    scope = request.scope
    return f"{scope.get('app_root_path', scope.get('root_path', ''))}/admin"


def signer_of(request: Request) -> SessionSigner:
    state = request.app.state
    signer = getattr(state, "admin_signer", None)
    if not isinstance(signer, SessionSigner):
        signer = SessionSigner()
        state.admin_signer = signer
    return signer


def ledger_of(request: Request) -> Ledger:
    ledger: Ledger = request.app.state.ledger
    return ledger


def is_admin_key(key: ApiKey) -> bool:
    return key.active and ADMIN_SCOPE in key.scopes


def current_agent(request: Request) -> Agent:
    """The agent of a valid session whose key is still an active admin key."""
    signer = signer_of(request)
    session = signer.loads(request.cookies.get(SESSION_COOKIE))
    if session is None:
        raise LoginRequired("please sign in" if SESSION_COOKIE in request.cookies else "")
    try:
        key = ledger_of(request).keys.get(session.key_id)
    except NotFound:  # a store error is not a sign-out: it is shown, the session kept
        raise LoginRequired("your API key no longer exists; sign in again") from None
    if not is_admin_key(key) or key.program != session.program:
        raise LoginRequired("your API key was revoked or lost its admin scope")
    return Agent(session, key, signer.csrf_token(session))


def _repeated_field(request: Request) -> str | None:
    """A field a form body gives twice (which one counts would be a guess; the API
    refuses the same in a JSON body). The body is the one the HTTP middleware read."""
    body = request.scope.get("state", {}).get("body")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not isinstance(body, bytes) or kind != "application/x-www-form-urlencoded":
        return None
    seen: set[str] = set()
    for name, _ in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
        if name in seen:
            return name
        seen.add(name)
    return None


def posting_agent(
    request: Request,
    agent: Annotated[Agent, Depends(current_agent)],
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Agent:
    """:func:`current_agent`, for a form POST that must carry the session's CSRF token
    and give each field once."""
    repeated = _repeated_field(request)
    if repeated is not None:
        raise RequestValidationError(
            [{"loc": ("body", repeated[:64]), "msg": "given more than once", "type": "duplicate"}]
        )
    if not signer_of(request).check_csrf(agent.session, csrf):
        raise CsrfFailed
    return agent


AgentDep = Annotated[Agent, Depends(current_agent)]
PostingAgent = Annotated[Agent, Depends(posting_agent)]


# -- responses -------------------------------------------------------------------


def error_status(exc: TallybookError) -> int:
    """The status of a page that shows ``exc``: its own when it says what happened
    (404, 409, 422; 429 and 503: the store could not answer, try again), 422 for
    another refusal, 500 for a fault."""
    if exc.status in (404, 409, 422, 429, 503):
        return exc.status
    return 422 if exc.status < 500 else 500


def secure(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    return response


def set_flash(response: Response, request: Request, kind: str, text: str) -> None:
    """A one-time message shown on the next page (``kind``: ok or error)."""
    value = base64.urlsafe_b64encode(json.dumps([kind, text[:500]]).encode()).decode()
    response.set_cookie(
        FLASH_COOKIE,
        value,
        path=base_path(request),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _read_flash(request: Request) -> tuple[str, str] | None:
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    try:
        kind, text = json.loads(base64.urlsafe_b64decode(raw.encode()))
    except (ValueError, TypeError):
        return None
    return ("error" if kind == "error" else "ok"), str(text)


def redirect(request: Request, path: str, flash: tuple[str, str] | None = None) -> Response:
    """A 303 to ``/admin{path}``, optionally with a flash message."""
    response = RedirectResponse(base_path(request) + path, status_code=303)
    if flash is not None:
        set_flash(response, request, *flash)
    return secure(response)


def render(
    request: Request,
    template: str,
    agent: Agent | None = None,
    *,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """A page: ``context`` plus ``base``, ``agent``, ``csrf`` and the pending flash message."""
    flash = _read_flash(request)
    response = templates.TemplateResponse(
        request,
        template,
        {
            "base": base_path(request),
            "agent": agent,
            "csrf": agent.csrf if agent else "",
            "flash": flash,
            **context,
        },
        status_code=status_code,
    )
    if flash is not None:
        response.delete_cookie(FLASH_COOKIE, path=base_path(request))
    secure(response)
    return response
