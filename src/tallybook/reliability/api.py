"""The workload's operations, sent through the Python API or over HTTP.

Both clients classify what happened the same way:

- success: the operation was applied (``replay`` tells a first application
  from a replay of an earlier one);
- :class:`Rejected`: a business rule refused it (insufficient funds, hold no
  longer active...); nothing was applied;
- :class:`Ambiguous`: a timeout, throttling, a conflict, a lost connection:
  it may or may not have been applied; the caller retries with the same key;
- :class:`Broken`: something that must never happen (an idempotency conflict
  on a faithful retry, a crash, an HTTP 500): a violation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tallybook.errors import (
    IdempotencyConflict,
    ItemTooLarge,
    LedgerError,
    StoreError,
    StoreValidationError,
    TooManyRetries,
    ValidationError,
)
from tallybook.ledger import Ledger

KINDS = ("earn", "redeem", "transfer", "credit", "hold", "capture", "void", "notify")

#: HTTP problem codes that leave the outcome unknown (the caller retries)
_RETRYABLE_CODES = frozenset(
    {"store-unavailable", "throttled", "transaction-conflict", "too-many-retries", "store-error"}
)


@dataclass(frozen=True, slots=True)
class Op:
    """One operation; ``key`` is the transaction id it records (None for notify)."""

    kind: str
    key: str | None
    account: str = ""
    other: str = ""
    fund: str = ""
    amount: int = 0
    ref: str = ""
    #: a hold's lifetime in seconds: some are short, so capture, void and expiry race
    expires_in: int = 3600


class Rejected(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class Ambiguous(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Broken(Exception):
    pass


class Api(Protocol):
    def call(self, op: Op) -> bool:
        """Apply ``op``; True when the answer was a replay of an earlier application."""


class PythonApi:
    """Calls ``ledger`` directly (its store may be a :class:`FaultyStore`)."""

    def __init__(self, ledger: Ledger, program: str) -> None:
        self.ledger = ledger
        self.program = program

    def call(self, op: Op) -> bool:
        try:
            return self._call(op)
        except (StoreValidationError, ItemTooLarge) as exc:
            raise Broken(f"{op.kind} {op.key}: store refused a valid request: {exc}") from exc
        except (StoreError, TooManyRetries) as exc:
            raise Ambiguous(exc.code) from exc
        except IdempotencyConflict as exc:
            raise Broken(f"{op.kind} {op.key}: idempotency conflict on a faithful retry") from exc
        except ValidationError as exc:  # every operation the workload sends is valid
            raise Broken(f"{op.kind} {op.key}: a valid request refused as invalid: {exc}") from exc
        except LedgerError as exc:
            raise Rejected(exc.code) from exc
        except Exception as exc:
            raise Broken(f"{op.kind} {op.key}: unexpected {type(exc).__name__}: {exc}") from exc

    def _call(self, op: Op) -> bool:
        p, led = self.program, self.ledger
        match op.kind:
            case "earn":
                return led.loyalty.earn(p, op.account, op.ref, op.amount).replay
            case "redeem":
                assert op.key is not None
                r = led.loyalty.redeem(p, op.account, op.amount, "reward", txn_id=op.key)
                return r.transaction.replay
            case "transfer":
                assert op.key is not None
                t = led.transactions.transfer(
                    p, op.account, op.other, op.fund, op.amount, txn_id=op.key
                )
                return t.replay
            case "credit":
                assert op.key is not None
                return led.wallet.credit(p, op.account, op.fund, op.amount, txn_id=op.key).replay
            case "hold":
                assert op.key is not None
                h = led.wallet.authorize(
                    p, op.account, op.amount, hold_id=op.key, expires_in=op.expires_in
                )
                return bool(h.transaction and h.transaction.replay)
            case "capture":
                h = led.wallet.capture(p, op.ref, op.amount)
                return bool(h.transaction and h.transaction.replay)
            case "void":
                h = led.wallet.void(p, op.ref)
                # a hold past its deadline is expired instead: not this void's record
                return h.transaction is None or h.transaction.replay or h.transaction.id != op.key
            case "notify":
                n = led.notifications.add(
                    p, op.account, op.other, {"n": op.amount}, idempotency_key=op.ref
                )
                return n.replay
        raise Broken(f"unknown operation {op.kind}")


class HttpApi:
    """Sends each operation to the HTTP API with an ``httpx.Client``."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 10.0) -> None:
        import httpx

        self._httpx = httpx
        self.client = httpx.Client(
            base_url=base_url,
            timeout=timeout,
            headers={"Authorization": f"Bearer {api_key}"},
        )

    def close(self) -> None:
        self.client.close()

    def call(self, op: Op) -> bool:
        path, body = _request(op)
        headers = {"Idempotency-Key": op.ref if op.kind == "notify" else (op.key or "")}
        if op.kind in ("capture", "void"):
            headers = {}
        try:
            r = self.client.post(path, json=body, headers=headers)
        except self._httpx.HTTPError as exc:
            raise Ambiguous(type(exc).__name__) from exc
        if r.status_code < 300:
            return r.headers.get("idempotent-replayed") == "true" or (
                op.kind == "void" and (r.json().get("transaction") or {}).get("id") != op.key
            )
        code = _problem_code(r)
        if r.status_code >= 500 and code not in _RETRYABLE_CODES:
            raise Broken(f"{op.kind} {op.key}: HTTP {r.status_code} {code}: {r.text[:200]}")
        if code in _RETRYABLE_CODES or r.status_code == 429:
            raise Ambiguous(code)
        if code == "idempotency-conflict":
            raise Broken(f"{op.kind} {op.key}: idempotency conflict on a faithful retry")
        if r.status_code in (400, 413, 415) or code == "validation":
            raise Broken(f"{op.kind} {op.key}: HTTP {r.status_code} {code} for a valid request")
        raise Rejected(code)


def _problem_code(r: Any) -> str:
    try:
        return str(r.json().get("type", "")).rsplit("/", 1)[-1] or f"http-{r.status_code}"
    except ValueError:
        return f"http-{r.status_code}"


def _request(op: Op) -> tuple[str, dict[str, Any]]:
    a = op.account
    match op.kind:
        case "earn":
            return f"/v1/accounts/{a}/earn", {"order_id": op.ref, "amount": op.amount}
        case "redeem":
            return f"/v1/accounts/{a}/redeem", {"points": op.amount, "reward_id": "reward"}
        case "transfer":
            body = {"source": a, "destination": op.other, "fund": op.fund, "amount": op.amount}
            return "/v1/transfers", body
        case "credit":
            return f"/v1/accounts/{a}/wallet/credits", {"fund": op.fund, "amount": op.amount}
        case "hold":
            return f"/v1/accounts/{a}/wallet/holds", {
                "amount": op.amount,
                "expires_in": op.expires_in,
            }
        case "capture":
            return f"/v1/holds/{op.ref}/capture", {"amount": op.amount}
        case "void":
            return f"/v1/holds/{op.ref}/void", {}
        case "notify":
            return f"/v1/accounts/{a}/notifications", {
                "type": op.other,
                "payload": {"n": op.amount},
            }
    raise Broken(f"unknown operation {op.kind}")
