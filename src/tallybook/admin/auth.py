"""Sign in with an admin API key, sign out; the handlers that send agents to the login page."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from tallybook.admin.session import LOGIN_COOKIE, LOGIN_TTL, SESSION_COOKIE, SESSION_TTL
from tallybook.admin.web import (
    CsrfFailed,
    LoginRequired,
    PostingAgent,
    base_path,
    is_admin_key,
    ledger_of,
    redirect,
    render,
    set_flash,
    signer_of,
)
from tallybook.errors import TallybookError, Unauthorized

router = APIRouter()

_UNAVAILABLE = "The ledger could not answer just now; try again in a moment"


def _login_page(request: Request, error: str = "", status_code: int = 200) -> HTMLResponse:
    signer = signer_of(request)
    nonce = signer.login_nonce()
    response = render(
        request,
        "login.html",
        status_code=status_code,
        error=error,
        login_csrf=signer.login_token(nonce),
    )
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        max_age=LOGIN_TTL,
        path=base_path(request),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> Response:
    return _login_page(request)


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    api_key: Annotated[str, Form(max_length=200)] = "",
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    signer = signer_of(request)
    if not signer.check_login(request.cookies.get(LOGIN_COOKIE), csrf):
        return _login_page(request, "The form expired; please try again.", 403)
    try:
        key = ledger_of(request).keys.authenticate(api_key.strip())
    except Unauthorized:
        return _login_page(request, "Unknown or revoked API key.", 401)
    except TallybookError as exc:  # the store, not the key: say so, and that it may pass
        return _login_page(request, f"{_UNAVAILABLE} ({exc.message}).", exc.status)
    if not is_admin_key(key):
        return _login_page(request, "This API key lacks the admin scope.", 403)
    session = signer.new_session(key.id, key.program)
    response = redirect(request, "/")
    response.set_cookie(
        SESSION_COOKIE,
        signer.dumps(session),
        max_age=SESSION_TTL,
        path=base_path(request),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    response.delete_cookie(LOGIN_COOKIE, path=base_path(request))
    return response


@router.post("/logout")
def logout(request: Request, agent: PostingAgent) -> Response:
    response = redirect(request, "/login", ("ok", "Signed out."))
    response.delete_cookie(SESSION_COOKIE, path=base_path(request))
    return response


def on_page(request: Request) -> bool:
    """Whether ``request`` asks for an admin page (the API's routes answer problem+json)."""
    path = str(request.scope.get("path", ""))
    return path.startswith((base_path(request), "/admin"))


def too_large_page(scope: Scope, limit: int) -> Response | None:
    """The page answering a body over the server's ``limit`` (bytes) sent to an admin
    page, or ``None`` for the API's paths (their 413 stays problem+json)."""
    request = Request(scope)
    if not on_page(request):
        return None
    return render(
        request,
        "error.html",
        status_code=413,
        title="Request refused",
        message=f"This form is larger than the {limit:,} bytes the server takes. "
        "Go back, shorten what you typed and try again.",
    )


def install_handlers(app: FastAPI) -> None:
    """Unauthenticated admin requests go to the login page; a bad CSRF token is a 403."""

    async def login_required(request: Request, exc: Exception) -> Response:
        message = exc.message if isinstance(exc, LoginRequired) else ""
        response = redirect(request, "/login", ("error", message) if message else None)
        response.delete_cookie(SESSION_COOKIE, path=base_path(request))
        return response

    async def csrf_failed(request: Request, exc: Exception) -> Response:
        return render(
            request,
            "error.html",
            status_code=403,
            title="Request refused",
            message="This form is stale or did not come from this page. "
            "Go back, reload and try again.",
        )

    async def ledger_error(request: Request, exc: Exception) -> Response:
        """A ledger or store error no view handled (the store busy or unavailable while
        the agent's key or the program is read) is a page saying so; the session stays.
        The API's routes keep their problem+json."""
        if not on_page(request) or not isinstance(exc, TallybookError):
            return await api_answer(api_ledger_error, request, exc)
        busy = exc.status in (429, 503)
        response = render(
            request,
            "error.html",
            status_code=exc.status,
            title="Not available" if busy else "Request refused",
            message=f"{_UNAVAILABLE} ({exc.message})." if busy else exc.message,
        )
        if busy:
            response.headers["Retry-After"] = "1"
        return response

    api_ledger_error = app.exception_handlers.get(TallybookError)
    api_validation_error = app.exception_handlers.get(RequestValidationError)
    api_http_error = app.exception_handlers.get(StarletteHTTPException)

    async def api_answer(handler: Any, request: Request, exc: Exception) -> Response:
        if handler is None:  # pragma: no cover - the API installs one
            raise exc
        answer = handler(request, exc)
        result: Response = await answer if inspect.isawaitable(answer) else answer
        return result

    async def invalid_input(request: Request, exc: Exception) -> Response:
        """A page's bad query or form value is an HTML page an agent can read;
        the API's routes keep their problem+json."""
        if not on_page(request):
            return await api_answer(api_validation_error, request, exc)
        errors = exc.errors() if isinstance(exc, RequestValidationError) else []
        what = (
            "; ".join(f"{e['loc'][-1]}: {e['msg']}" for e in errors[:3] if e.get("loc"))
            or "a value on this page is not valid"
        )
        return render(
            request,
            "error.html",
            status_code=422,
            title="Not a valid request",
            message=f"{what}. Go back, correct it and try again.",
        )

    async def no_such_page(request: Request, exc: Exception) -> Response:
        """An unknown address under /admin (or a method it does not take) is an HTML
        page too; the API's routes keep their problem+json."""
        if not on_page(request) or not isinstance(exc, StarletteHTTPException):
            return await api_answer(api_http_error, request, exc)
        title, message = (
            ("Not found", "There is no such page.")
            if exc.status_code == 404
            else ("Request refused", "This page cannot be asked for this way.")
        )
        response = render(
            request, "error.html", status_code=exc.status_code, title=title, message=message
        )
        for name, value in (exc.headers or {}).items():
            response.headers.setdefault(name, value)
        return response

    app.add_exception_handler(LoginRequired, login_required)
    app.add_exception_handler(CsrfFailed, csrf_failed)
    app.add_exception_handler(TallybookError, ledger_error)
    app.add_exception_handler(RequestValidationError, invalid_input)
    app.add_exception_handler(StarletteHTTPException, no_such_page)


__all__ = ["install_handlers", "router", "set_flash", "too_large_page"]
