"""Request and response bodies of billing records and reports."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from tallybook.domain.billing import INTERVAL_PATTERN, BillingRecord, canonical_rate, iso
from tallybook.domain.money import MAX_AMOUNT
from tallybook.errors import TallybookError
from tallybook.http.schemas.common import Id
from tallybook.services.billing.reports import ReportInfo, ReportResult


def _rate_not_a_float(value: object) -> object:
    """A rate that is not text is read as Python and the CLI read it (the integers 0
    and 1; a float, a bool or another integer is refused with the ledger's reason)."""
    if not isinstance(value, str):
        try:
            canonical_rate(value)
        except TallybookError as exc:
            raise ValueError(exc.message) from None
    return value


class BillingRecordIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: Id = Field(description="record id: the idempotency key of this record")
    partner: Id = Field(description="partner or agency id")
    order_id: Id
    amount: int = Field(
        strict=True,
        ge=-MAX_AMOUNT,
        le=MAX_AMOUNT,
        description="non-zero, minor units; negative for a refund",
    )
    currency: str = Field(pattern=r"^[A-Z][A-Z0-9]{2,7}$", examples=["USD"])
    rate: Annotated[
        Annotated[str, Field(max_length=32)] | Annotated[int, Field(strict=True, ge=0, le=1)],
        BeforeValidator(_rate_not_a_float),
    ] = Field(
        description="commission rate 0-1 as a decimal string (or the integer 0 or 1; "
        "never a float)",
        examples=["0.05"],
    )
    time: str = Field(
        max_length=64,
        description="when the purchase happened, ISO 8601 with a zone",
        examples=["2026-01-01T12:00:00Z"],
    )


class BillingRecordOut(BaseModel):
    id: str
    partner: str
    order_id: str
    amount: int
    currency: str
    rate: str
    commission: int = Field(description="amount x rate, rounded half to even")
    time: str
    bucket: str = Field(description="the time bucket the record is filed under")
    ingested_at: str
    late: bool = Field(description="filed after its own window was reported")

    @classmethod
    def of(cls, r: BillingRecord) -> BillingRecordOut:
        return cls(
            id=r.id,
            partner=r.partner,
            order_id=r.order_id,
            amount=r.amount,
            currency=r.currency,
            rate=r.rate,
            commission=r.commission,
            time=iso(r.time),
            bucket=iso(r.bucket),
            ingested_at=iso(r.ingested_at),
            late=r.late,
        )


class BillingRecordPageOut(BaseModel):
    records: list[BillingRecordOut]
    cursor: str | None


KindName = Literal["billing", "rewards"]


def _all_kinds() -> list[KindName]:
    return ["billing", "rewards"]


class ReportRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    interval: str | None = Field(
        None,
        pattern=INTERVAL_PATTERN,
        examples=["15m", "1h", "1d"],
        description="Window length; default: the server's $TALLYBOOK_REPORT_INTERVAL, else 15m "
        "(what the scheduled reports job uses).",
    )
    kinds: list[KindName] = Field(default_factory=_all_kinds)


class ReportOut(BaseModel):
    kind: str
    window: str
    start: str
    end: str
    rows: int
    sha256: dict[str, str]
    files: list[str] = Field(description="download at /v1/reports/{window}/{file}")
    repeated: bool = False

    @classmethod
    def of_result(cls, r: ReportResult) -> ReportOut:
        return cls(
            kind=r.kind,
            window=r.window,
            start=r.start,
            end=r.end,
            rows=r.rows,
            sha256=r.sha256,
            files=sorted(r.files),
            repeated=r.repeated,
        )

    @classmethod
    def of_info(cls, i: ReportInfo) -> ReportOut:
        return cls(
            kind=i.kind,
            window=i.window,
            start=i.start,
            end=i.end,
            rows=i.rows,
            sha256=i.sha256,
            files=sorted(i.sha256),
        )


class ReportListOut(BaseModel):
    reports: list[ReportOut]


class ReportPageOut(BaseModel):
    reports: list[ReportOut]
    cursor: str | None = Field(description="the next page's cursor (null after the last)")
