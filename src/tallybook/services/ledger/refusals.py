"""Refusals that are final for their transaction id.

A request that reached the ledger and was refused because the funds were not
there (:class:`~tallybook.errors.InsufficientFunds`) keeps that answer for its
transaction id: the posting engine stores a *refusal record* where the
transaction record would have gone (same key, so the ``NotExists`` condition of
a later commit fails and the retry is answered from it). Re-sending the same
request after a top-up is refused again, exactly as it was; another request
with the same id is an idempotency conflict. Without this, a client that treats
a rejection as final (and books a failed payment) could find it applied later by
a retry queue re-sending the same key.

Refusals for invalid input (422 ``validation``, 404) and transient failures
(409 ``transaction-conflict``, 429, 503, 402 ``payment-declined``) are not
stored: nothing about the ledger was decided, and a retry runs again.
"""

from __future__ import annotations

from typing import cast

from tallybook.errors import ConditionFailed, InsufficientFunds, LedgerError
from tallybook.store.port import ITEM_ABSENT, Item, ItemStore, Key

#: the attribute that marks a refusal record: ``{"code": ..., "message": ...}``
REFUSED = "refused"
#: the business refusals that are final for their transaction id
FINAL_REFUSALS: tuple[type[LedgerError], ...] = (InsufficientFunds,)


def is_final(exc: LedgerError) -> bool:
    return isinstance(exc, FINAL_REFUSALS)


def refusal_item(program: str, txn_id: str, fp: str, exc: LedgerError, at: str) -> Item:
    """The record of a refused request: no legs, no index attributes (lists skip it)."""
    return {
        "program": program,
        "txn_id": txn_id,
        "fingerprint": fp,
        "created_at": at,
        REFUSED: {"code": exc.code, "message": exc.message},
    }


def store_refusal(store: ItemStore, key: Key, record: Item) -> bool:
    """Put ``record`` at ``key`` unless something is there already (then False)."""
    try:
        store.put({**record, **key.as_item()}, ITEM_ABSENT)
    except ConditionFailed:
        return False
    return True


def is_refusal(item: Item) -> bool:
    return REFUSED in item


def refusal_error(item: Item) -> LedgerError:
    """The stored refusal as the error it was, marked as a replay."""
    refused = cast(dict[str, str], item[REFUSED])
    kind = next((k for k in FINAL_REFUSALS if k.code == refused.get("code")), LedgerError)
    exc = kind(str(refused.get("message", "")))
    exc.replay = True
    return exc
