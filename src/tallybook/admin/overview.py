"""Program overview: members per tier, recent reports with download links.

Members per tier are counted from the tier index one page at a time (never a
scan); past :data:`COUNT_LIMIT` the page says "N+" and links to the member list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, Response

from tallybook.admin.web import AgentDep, error_status, ledger_of, render
from tallybook.errors import ConfigError, NotFound, TallybookError
from tallybook.ledger import Ledger

router = APIRouter()

COUNT_LIMIT = 1000
RECENT_REPORTS = 20
MEMBER_PAGE = 100
_MEDIA = {".csv": "text/csv; charset=utf-8", ".json": "application/json"}


@dataclass(frozen=True, slots=True)
class TierCount:
    tier: str
    threshold: int
    members: int
    more: bool


def tier_counts(ledger: Ledger, program: str) -> list[TierCount]:
    cfg = ledger.loyalty.config(program)
    out = []
    for tier in cfg.tiers:
        page = ledger.loyalty.members(program, tier.name, limit=COUNT_LIMIT)
        out.append(
            TierCount(tier.name, tier.threshold, len(page.accounts), page.cursor is not None)
        )
    return out


def overview(ledger: Ledger, program: str) -> dict[str, Any]:
    """The home page's context: tiers and reports, each with its own error message."""
    tiers: list[TierCount] = []
    tiers_error = reports_error = ""
    try:
        tiers = tier_counts(ledger, program)
    except (ConfigError, NotFound):  # no rules (NotFound), or rules it cannot read
        tiers_error = "This program has no loyalty configuration."
    except TallybookError as exc:
        tiers_error = exc.message
    reports: list[Any] = []
    try:
        reports = ledger.billing.reports.list(program, limit=RECENT_REPORTS)
    except TallybookError as exc:
        reports_error = exc.message
    return {
        "program": ledger.programs.get(program),
        "tiers": tiers,
        "tiers_error": tiers_error,
        "reports": reports,
        "reports_error": reports_error,
    }


@router.get("/tiers/{tier}", response_class=HTMLResponse)
def tier_members(
    request: Request,
    agent: AgentDep,
    tier: Annotated[str, Path(max_length=64)],
    cursor: Annotated[str | None, Query(max_length=2000)] = None,
) -> Response:
    ledger = ledger_of(request)
    try:
        page = ledger.loyalty.members(agent.program, tier, limit=MEMBER_PAGE, cursor=cursor)
    except TallybookError as exc:
        return render(
            request,
            "error.html",
            agent,
            status_code=error_status(exc),
            title=tier,
            message=exc.message,
        )
    return render(request, "tier.html", agent, tier=tier, page=page)


@router.get("/reports/{kind}/{window}/{file}")
def download_report(
    request: Request,
    agent: AgentDep,
    kind: Annotated[str, Path(pattern=r"^(billing|rewards)$")],
    window: Annotated[str, Path(max_length=64, pattern=r"^[0-9TZ]+_[0-9TZ]+$")],
    file: Annotated[str, Path(max_length=64, pattern=r"^[A-Za-z0-9._\-]+$")],
) -> Response:
    """A reported window's file, byte for byte as written, as an attachment."""
    try:
        files = ledger_of(request).billing.reports.render(agent.program, kind, window)
        if file not in files:
            raise NotFound(f"report {kind} {window} has no file {file}")
    except TallybookError as exc:
        return render(
            request,
            "error.html",
            agent,
            status_code=error_status(exc),
            title="Report",
            message=exc.message,
        )
    media = _MEDIA.get(file[file.rfind(".") :], "application/octet-stream")
    return Response(
        files[file],
        media_type=media,
        headers={
            "Content-Disposition": f'attachment; filename="{file}"',
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        },
    )
