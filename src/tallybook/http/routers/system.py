"""Operational endpoints: liveness, readiness and Prometheus metrics.

- ``/healthz`` is liveness: the process answers (and says its version). It
  touches no store, so an orchestrator does not restart a healthy process
  because the database is briefly unreachable.
- ``/readyz`` is readiness: one strongly consistent key read of the store;
  503 (problem+json) while the store cannot be reached or fails the read
  (throttled included).
- ``/metrics`` is the Prometheus exposition, served according to
  ``app.state.metrics_access`` (:class:`~tallybook.http.metrics.MetricsAccess`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from tallybook import __version__
from tallybook.errors import Forbidden, NotFound, StoreError, StoreUnavailable
from tallybook.http.deps import LedgerDep, authenticate, run_blocking
from tallybook.http.metrics import CONTENT_TYPE, Metrics, MetricsAccess
from tallybook.http.problems import problem_responses
from tallybook.http.schemas.system import Health, Readiness
from tallybook.store.port import Key

router = APIRouter(tags=["system"])

_PROBE = Key("HEALTH", "HEALTH")


@router.get(
    "/healthz",
    summary="Liveness: the process answers (no store call)",
    description='No API key. 200 `{"status": "ok", "version": ...}` (the tallybook '
    "version) while the process answers; it makes no storage call, so an unreachable store "
    "does not make a healthy process look dead.",
)
async def healthz() -> Health:
    return Health(status="ok", version=__version__)


@router.get(
    "/readyz",
    summary="Readiness: the store answers (one key read)",
    description='No API key. 200 `{"status": "ready"}` when the store answers one '
    "strongly consistent key read; 503 `store-unavailable` (with `Retry-After`) otherwise.",
    responses=problem_responses(503),
)
async def readyz(ledger: LedgerDep) -> Readiness:
    try:
        await run_blocking(ledger, ledger.store.get, _PROBE)
    except StoreError as exc:  # throttled, refused, ...: not ready either
        if isinstance(exc, StoreUnavailable):
            raise
        raise StoreUnavailable(f"the store did not answer the probe: {exc.message}") from exc
    return Readiness(status="ready")


@router.get(
    "/metrics",
    summary="Prometheus metrics: requests, latency, storage operations, capacity units",
    description="Served as configured: with an `admin` API key (the default), to anyone "
    "(`open`), or not here (`off`, e.g. `tallybook serve --metrics-bind HOST:PORT`).",
    response_class=Response,
    openapi_extra={"security": [{"ApiKey": []}]},
    responses={
        200: {"content": {CONTENT_TYPE: {"schema": {"type": "string"}}}},
        # 429 and 503: the store could not read the API key
        **problem_responses(401, 403, 404, 429, 503),
    },
)
async def metrics(request: Request) -> Response:
    access: MetricsAccess = request.app.state.metrics_access
    if access is MetricsAccess.OFF:
        raise NotFound("metrics are not served on this address")
    if access is MetricsAccess.KEY and "admin" not in (await authenticate(request)).scopes:
        raise Forbidden("reading /metrics needs an API key with the 'admin' scope")
    registry: Metrics = request.app.state.metrics
    return Response(registry.render(), media_type=CONTENT_TYPE)
