"""The admin page for support agents, served by ``tallybook serve`` at ``/admin``.

``router`` (prefix ``/admin``) and ``install(app)`` are what
:func:`tallybook.http.app.create_app` looks for: the router carries the pages,
``install`` adds the session signer, the login redirects and the static files,
``too_large_page`` answers a form body over the server's limit.
Server-rendered with Jinja2; no JavaScript is needed and nothing is fetched
from a CDN. See docs/admin.md.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles

from tallybook.admin import actions, auth, overview, views, webhooks
from tallybook.admin.session import SessionSigner
from tallybook.admin.web import HERE, redirect

router = APIRouter(prefix="/admin", include_in_schema=False)
router.include_router(auth.router)
router.include_router(views.router)
router.include_router(actions.router)
router.include_router(overview.router)
router.include_router(webhooks.router)


@router.get("")
def home_without_slash(request: Request) -> Response:
    """``/admin`` leads to the home page ``/admin/`` (the app redirects no other path)."""
    return redirect(request, "/")


def install(app: FastAPI, *, secret: bytes | str | None = None) -> None:
    """Per app: the session signer (``secret`` or ``$TALLYBOOK_SESSION_SECRET`` or
    random), the login-required and CSRF handlers, and ``/admin/static``."""
    app.state.admin_signer = SessionSigner(secret)
    auth.install_handlers(app)
    app.mount("/admin/static", StaticFiles(directory=HERE / "static"), name="admin-static")


too_large_page = auth.too_large_page

__all__ = ["install", "router", "too_large_page"]
