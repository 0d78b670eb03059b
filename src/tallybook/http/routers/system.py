"""Operational endpoints: ``/healthz`` (store reachable) and ``/metrics`` (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from tallybook import __version__
from tallybook.http.deps import LedgerDep
from tallybook.http.metrics import Metrics
from tallybook.http.models import Health
from tallybook.http.problems import problem_responses
from tallybook.store.port import Key

router = APIRouter(tags=["system"])

_PROBE = Key("HEALTH", "HEALTH")
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@router.get(
    "/healthz",
    summary="Liveness and store reachability (one key read)",
    responses=problem_responses(503),
)
def healthz(ledger: LedgerDep) -> Health:
    ledger.store.get(_PROBE)
    return Health(status="ok", version=__version__)


@router.get(
    "/metrics",
    summary="Prometheus metrics: requests, latency, storage operations, capacity units",
    response_class=PlainTextResponse,
)
def metrics(request: Request, ledger: LedgerDep) -> PlainTextResponse:
    registry: Metrics = request.app.state.metrics
    return PlainTextResponse(registry.render(ledger), media_type=PROMETHEUS_CONTENT_TYPE)
