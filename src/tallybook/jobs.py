"""Scheduled jobs by name: what the EventBridge-triggered Lambda functions run.

Each job is an idempotent, resumable service call made once per program (every
program, or the one named), so a schedule can fire late, twice or
concurrently. A program a job does not apply to (loyalty jobs on a program
without loyalty rules) is skipped, not failed; an error in one program is
reported and the others still run.

Jobs, and their CLI twins:

- ``expire``: loyalty points past their date, PointsExpiring warnings
  (``tallybook expire``);
- ``review-tiers``: the tier downgrade rule (``tallybook loyalty downgrade``);
- ``expire-holds``: holds and held credits past their deadline (a part of
  reconcile, cheap enough to run often);
- ``reconcile``: charges in flight, orphan and overdue holds, expired bonus
  grants (``tallybook reconcile``);
- ``reports``: every due billing and rewards report window
  (``tallybook report run``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tallybook.domain.billing import parse_interval
from tallybook.errors import ConfigError, TallybookError, ValidationError
from tallybook.ledger import Ledger

#: where the reports job writes (a folder or s3://bucket/prefix)
REPORTS_OUT_ENV = "TALLYBOOK_REPORTS_OUT"
#: the reports job's window length (15m, 1h, 1d)
REPORT_INTERVAL_ENV = "TALLYBOOK_REPORT_INTERVAL"


def reports_out(env: Mapping[str, str]) -> str:
    """Where reports go when a run names no place (the job, HTTP and the CLI)."""
    return env.get(REPORTS_OUT_ENV) or "reports"


def report_interval(env: Mapping[str, str]) -> str:
    """The window length when a run names none (the job, HTTP and the CLI):
    ``$TALLYBOOK_REPORT_INTERVAL``, else ``15m``. It takes an interval's one rule
    (nothing around it); a malformed one is the server's setting, not the
    request's: a :class:`ConfigError` naming the variable."""
    text = env.get(REPORT_INTERVAL_ENV) or "15m"
    try:
        parse_interval(text)
    except ValidationError as exc:
        raise ConfigError(f"{REPORT_INTERVAL_ENV}: {exc.message}") from None
    return text


JobFn = Callable[[Ledger, str, Mapping[str, str]], Any]


def _expire(ledger: Ledger, program: str, env: Mapping[str, str]) -> Any:
    report = ledger.loyalty.expire(program)
    if report.skipped:  # points past their date left unexpired
        raise _Unfinished(report, f"{len(report.skipped)} member(s) skipped: see tallybook check")
    return report


def _review_tiers(ledger: Ledger, program: str, env: Mapping[str, str]) -> Any:
    return ledger.loyalty.review_tiers(program)


def _expire_holds(ledger: Ledger, program: str, env: Mapping[str, str]) -> Any:
    report = ledger.wallet.expire_holds(program)
    if report.undone():  # a hold that does not read, left withholding its funds
        raise _Unfinished(report.lines(), "; ".join(report.undone()))
    return report.lines()


class _Unfinished(Exception):
    """A job that did what it could but left something undone: its program is
    ``failed``, with what was done as its result."""

    def __init__(self, result: Any, error: str) -> None:
        super().__init__(error)
        self.result = result
        self.error = error


def _reconcile(ledger: Ledger, program: str, env: Mapping[str, str]) -> Any:
    report = ledger.wallet.reconcile(program)
    if report.undone():
        # a customer charged for no debit: the invocation fails, so it is seen and retried
        raise _Unfinished(report.lines(), "; ".join(report.undone()))
    return report.lines()


def _reports(ledger: Ledger, program: str, env: Mapping[str, str]) -> Any:
    from tallybook.services.billing.sinks import open_sink

    results = ledger.billing.reports.run(
        program, sink=open_sink(reports_out(env)), interval=report_interval(env)
    )
    return [
        {"kind": r.kind, "window": r.window, "rows": r.rows, "files": sorted(r.files.values())}
        for r in results
    ]


JOBS: dict[str, JobFn] = {
    "expire": _expire,
    "review-tiers": _review_tiers,
    "expire-holds": _expire_holds,
    "reconcile": _reconcile,
    "reports": _reports,
}

#: jobs that apply only to programs with loyalty rules
_LOYALTY_JOBS = frozenset({"expire", "review-tiers"})


@dataclass(frozen=True, slots=True)
class ProgramRun:
    """What a job did in one program: ``ran``, ``skipped`` or ``failed``."""

    program: str
    status: str
    result: Any = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class JobRun:
    """What a job did, per program; ``ok`` unless a program failed."""

    job: str
    programs: tuple[ProgramRun, ...]

    @property
    def ok(self) -> bool:
        return all(p.status != "failed" for p in self.programs)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (what the Lambda handler logs and returns)."""
        return {
            "job": self.job,
            "ok": self.ok,
            "programs": [_plain(dataclasses.asdict(p)) for p in self.programs],
        }


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def check_job(job: str) -> str:
    if job not in JOBS:
        raise ValidationError(f"unknown job {job!r}; jobs: {', '.join(JOBS)}")
    return job


def run_job(
    ledger: Ledger,
    job: str,
    *,
    program: str | None = None,
    env: Mapping[str, str] | None = None,
) -> JobRun:
    """Run ``job`` for ``program``, or for every program; never stops at one failure.

    ``env`` (default ``os.environ``) gives the reports job its output and
    interval (``TALLYBOOK_REPORTS_OUT``, ``TALLYBOOK_REPORT_INTERVAL``).
    """
    fn = JOBS[check_job(job)]
    settings = os.environ if env is None else env
    programs = [program] if program else ledger.programs.list()
    runs = []
    for name in programs:
        try:
            if job in _LOYALTY_JOBS and "loyalty" not in ledger.programs.get(name).settings:
                runs.append(ProgramRun(name, "skipped", error="no loyalty configuration"))
                continue
            runs.append(ProgramRun(name, "ran", result=_plain(fn(ledger, name, settings))))
        except _Unfinished as exc:
            runs.append(ProgramRun(name, "failed", result=_plain(exc.result), error=exc.error))
        except TallybookError as exc:
            runs.append(ProgramRun(name, "failed", error=f"{type(exc).__name__}: {exc.message}"))
    return JobRun(job, tuple(runs))
