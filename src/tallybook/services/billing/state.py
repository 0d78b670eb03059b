"""Settings of a program's billing: changed freely until billing starts, then fixed.

The state row itself (settings, start, checkpoints, closed marks; fixed or not)
is stored and read by :mod:`tallybook.store.records.billing`.
"""

from __future__ import annotations

from datetime import datetime

from tallybook.domain.billing import BillingConfig, epoch
from tallybook.errors import InvalidState, ValidationError
from tallybook.store.port import ItemStore
from tallybook.store.records.billing import (
    BillingState,
    create_state,
    default_state,
    read_state,
    reset_unfixed,
)


def configure_open(
    store: ItemStore,
    program: str,
    current: BillingState | None,
    bucket: int | None,
    grace: int | None,
    first: int | None,
    now: datetime,
) -> BillingState:
    """Store new settings on a row not fixed yet (or create it unfixed); returns the row
    as stored, which is fixed if the first record or report run came first."""
    settled = current.config if current is not None else BillingConfig()
    config = BillingConfig(
        bucket or settled.bucket_seconds, grace if grace is not None else settled.grace_seconds
    )
    if first is not None and first % config.bucket_seconds:
        raise ValidationError("start must fall on a bucket boundary")
    if first is not None and first > epoch(now):
        # records of the buckets before it that have not ended yet are filed
        # without the open-window check: no window would ever report them
        raise ValidationError("start must not be in the future")
    if first is None and current is not None and current.start % config.bucket_seconds == 0:
        first = current.start
    if current is None:
        return create_state(store, program, config, first, now, fixed=False)
    reset_unfixed(store, program, default_state(config, first, now))
    found = read_state(store, program)
    assert found is not None
    return found


def check_unchanged(state: BillingState, bucket: int | None, first: int | None) -> None:
    """Bucket size and start of a fixed row never change."""
    if bucket and bucket != state.config.bucket_seconds:
        raise InvalidState(
            "the bucket size is fixed once billing has started "
            f"({state.config.bucket_seconds // 60} min)"
        )
    if first is not None and first != state.start:
        raise InvalidState("the reporting start is fixed once billing has started")
