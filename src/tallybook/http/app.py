"""The FastAPI application: ``create_app(ledger)``, and ``app`` for uvicorn.

``create_app`` wires the problem+json handlers, the middleware (request id,
JSON access logs, metrics, body limit, idempotency) and one router per
capability (``http/routers/<name>.py``) plus the admin page
(``tallybook.admin``). They are imported like any module: one that fails to
import fails the app's start, so a broken capability never silently
disappears from the API.

``app`` (``uvicorn tallybook.http.app:app``) is built on first access from
``$TALLYBOOK_STORE`` (default ``./tallybook.db``), so importing this module
opens nothing.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from tallybook import __version__, admin
from tallybook.http import problems
from tallybook.http.idempotency import IdempotencyMiddleware
from tallybook.http.keycache import DEFAULT_KEY_CACHE_SECONDS, KeyCache, key_cache_seconds_from_env
from tallybook.http.metrics import (
    Metrics,
    MetricsAccess,
    metrics_access_from_env,
    parse_metrics_access,
)
from tallybook.http.middleware import DEFAULT_MAX_BODY, RequestMiddleware
from tallybook.http.openapi import install_docs, install_openapi, operation_id
from tallybook.http.problems import STANDARD_PROBLEMS, literal_paths, route_paths
from tallybook.http.routers import billing as billing_routes
from tallybook.http.routers import ledger as ledger_routes
from tallybook.http.routers import loyalty as loyalty_routes
from tallybook.http.routers import notifications as notification_routes
from tallybook.http.routers import system
from tallybook.http.routers import wallet as wallet_routes
from tallybook.http.routers import webhooks as webhook_routes
from tallybook.ledger import Ledger

if TYPE_CHECKING:
    from tallybook.http.emf import EmfMetrics

#: the capability routers, in the order the OpenAPI document lists them
CAPABILITY_ROUTERS = (
    wallet_routes.router,
    loyalty_routes.router,
    notification_routes.router,
    billing_routes.router,
    webhook_routes.router,
)

#: the routes most requests take, most first: the postings and the balance
#: read. FastAPI tries a request against the routes one by one, router by
#: router, at some 15k instructions a route (two passes in the router that
#: holds it), so these are tried first; the OpenAPI document keeps the
#: routers' own order
HOT_ROUTES = (
    ("POST", "/v1/transactions"),
    ("GET", "/v1/accounts/{account}/balances"),
    ("POST", "/v1/transfers"),
    ("POST", "/v1/accounts/{account}/earn"),
    ("POST", "/v1/accounts/{account}/redeem"),
    ("POST", "/v1/accounts/{account}/wallet/debits"),
    ("POST", "/v1/accounts/{account}/wallet/holds"),
    ("POST", "/v1/holds/{hold_id}/capture"),
    ("POST", "/v1/holds/{hold_id}/void"),
    ("POST", "/v1/accounts/{account}/wallet/credits"),
)
#: the API routers in the order a request is matched against them: the
#: postings' first, the health checks and metrics last
MATCH_ORDER = (ledger_routes.router, *CAPABILITY_ROUTERS, system.router)
#: each route's (method, path) in the order the OpenAPI document lists them:
#: the routers' own, as declared, before :func:`_hot_routes_first` moves some
DOCUMENT_ORDER = tuple(
    (method, route.path)
    for router in (system.router, ledger_routes.router, *CAPABILITY_ROUTERS)
    for route in router.routes
    if isinstance(route, APIRoute)
    for method in sorted(route.methods or ())
)

log = logging.getLogger("tallybook.http")

DESCRIPTION = """\
Rewards, loyalty and wallet ledger.

* Authenticate with `Authorization: Bearer <API key>`; a key belongs to one
  program and sees only that program's data.
* Every POST takes an `Idempotency-Key` header: a replay returns the original
  status and body (with `Idempotent-Replayed: true`); the same key with another
  body is a 409. For postings the key is the transaction id.
* Amounts are integers in minor units. Errors are RFC 9457
  `application/problem+json` with a stable `type` URI.
"""


def create_app(
    ledger: Ledger,
    *,
    max_body: int = DEFAULT_MAX_BODY,
    key_cache_seconds: float = DEFAULT_KEY_CACHE_SECONDS,
    metrics_access: MetricsAccess | str = MetricsAccess.KEY,
    emf: bool = False,
) -> FastAPI:
    """The HTTP API over ``ledger``.

    ``max_body`` bounds request bodies (bytes); an authenticated API key is
    remembered for ``key_cache_seconds`` (0: every request reads the key);
    ``metrics_access`` says who may read ``/metrics`` here (``key``: an
    ``admin`` key; ``open``; ``off``); ``emf`` also writes each request's
    metrics as CloudWatch EMF lines to stdout (on Lambda).
    """
    app = FastAPI(
        title="tallybook",
        version=__version__,
        description=DESCRIPTION,
        openapi_url="/openapi.json",
        docs_url=None,  # served by install_docs, with local assets
        redoc_url=None,
        generate_unique_id_function=operation_id,
        # /v1/accounts/ is an unknown path (404), not a 307 to /v1/accounts: a
        # redirected POST is surprising, and behind an API Gateway REST API the
        # redirect dropped the stage (/prod) from the path
        redirect_slashes=False,
    )
    metrics = Metrics(ledger, emf=_emf(ledger) if emf else None)
    app.state.ledger = ledger
    app.state.metrics = metrics
    app.state.metrics_access = parse_metrics_access(metrics_access)
    app.state.keys = KeyCache(ledger, key_cache_seconds)
    problems.install(app)

    for router in MATCH_ORDER:
        _hot_routes_first(router)
        responses = None if router is system.router else STANDARD_PROBLEMS
        app.include_router(router, responses=responses)
    _include_admin(app)

    # added innermost first: the request passes request -> idempotency -> app
    app.add_middleware(IdempotencyMiddleware, ledger=ledger, metrics=metrics)
    api_routes = [route for router in MATCH_ORDER for route in router.routes]
    app.add_middleware(
        RequestMiddleware,
        metrics=metrics,
        max_body=max_body,
        literal_paths=literal_paths(api_routes),
        api_paths=route_paths(api_routes),
        too_large_page=admin.too_large_page,
    )
    install_docs(app)
    install_openapi(app, DOCUMENT_ORDER)
    return app


def _hot_routes_first(router: APIRouter) -> None:
    """Move the router's :data:`HOT_ROUTES` to its front in their order, the
    rest after them in theirs (a stable sort: another app moves nothing more)."""
    rank = {pair: n for n, pair in enumerate(HOT_ROUTES)}

    def order(route: BaseRoute) -> int:
        path = getattr(route, "path", "")
        methods = getattr(route, "methods", None) or ()
        return min((rank.get((method, path), len(rank)) for method in methods), default=len(rank))

    router.routes.sort(key=order)


def _emf(ledger: Ledger) -> EmfMetrics:
    from tallybook.http.emf import EmfMetrics

    return EmfMetrics(ledger)


def _include_admin(app: FastAPI) -> None:
    router = admin.router
    prefix = "" if router.prefix.startswith("/admin") else "/admin"
    app.include_router(router, prefix=prefix, include_in_schema=False)
    admin.install(app)  # static files the admin page mounts itself


_app: FastAPI | None = None


def get_app() -> FastAPI:
    """The process-wide app over ``$TALLYBOOK_STORE``, built on first use.

    ``$TALLYBOOK_METRICS`` (``key``, ``open`` or ``off``) says who may read
    ``/metrics``; ``$TALLYBOOK_KEY_CACHE_SECONDS`` how long a key is remembered.
    On Lambda (``$AWS_LAMBDA_FUNCTION_NAME`` set) metrics also leave as EMF.
    """
    global _app
    if _app is None:
        _app = create_app(
            Ledger.open(),
            metrics_access=metrics_access_from_env(),
            key_cache_seconds=key_cache_seconds_from_env(),
            emf=bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME")),
        )
    return _app


def __getattr__(name: str) -> Any:
    if name == "app":
        return get_app()
    raise AttributeError(name)
