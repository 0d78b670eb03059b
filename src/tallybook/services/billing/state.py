"""The program's billing state row (``BILLSTATE#{program}`` / ``STATE``).

It holds the settings (bucket size, grace window), where reporting starts and,
per report kind, the checkpoint (end of the last reported window) and the
closed mark (end of the window being reported: records no longer enter
buckets before it).

Reading stores nothing. ``billing configure`` stores the row *unfixed*
(attribute ``unfixed``): bucket size and start may still change. The first
billing record or report run fixes the row (or creates it fixed, with the
defaults); from then on bucket size and start never change.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from tallybook.domain.billing import BillingConfig, bucket_start, epoch
from tallybook.domain.reports import ALL_KINDS
from tallybook.errors import ConditionFailed, InvalidState, ValidationError
from tallybook.store import keys
from tallybook.store.port import Exists, Item, ItemStore, NotExists, Remove, Set, Value

#: marks a row whose bucket size and start may still change (no record, no report yet)
UNFIXED = "unfixed"


@dataclass(frozen=True, slots=True)
class BillingState:
    """Settings, start, and per report kind the checkpoint and the closed mark."""

    config: BillingConfig
    start: int
    checkpoints: dict[str, int]
    closed: dict[str, int]
    #: settled by the first record or report run: bucket size and start are final
    fixed: bool = True


def read_state(store: ItemStore, program: str) -> BillingState | None:
    item = store.get(keys.billing_state(program))
    if item is None:
        return None
    config = BillingConfig(cast(int, item["bucket_seconds"]), cast(int, item["grace_seconds"]))
    return BillingState(
        config=config,
        start=cast(int, item["start"]),
        checkpoints={k: cast(int, item[f"ckpt_{k}"]) for k in ALL_KINDS},
        closed={k: cast(int, item[f"closed_{k}"]) for k in ALL_KINDS},
        fixed=UNFIXED not in item,
    )


def default_state(config: BillingConfig, start: int | None, now: datetime) -> BillingState:
    """What the row would hold if created now (a read shows it, and stores nothing)."""
    first = start if start is not None else bucket_start(epoch(now), config.bucket_seconds)
    marks: dict[str, int] = {str(k): first for k in ALL_KINDS}
    return BillingState(config, first, dict(marks), dict(marks), fixed=False)


def create_state(
    store: ItemStore,
    program: str,
    config: BillingConfig,
    start: int | None,
    now: datetime,
    *,
    fixed: bool = True,
) -> BillingState:
    """Create the row unless another writer did first; returns the row as stored."""
    item: Item = {**keys.billing_state(program).as_item(), "program": program}
    item.update(_settings(default_state(config, start, now)))
    if not fixed:
        item[UNFIXED] = True
    with contextlib.suppress(ConditionFailed):
        store.put(item, NotExists("pk"))
    found = read_state(store, program)
    assert found is not None
    return found


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


def reset_unfixed(store: ItemStore, program: str, state: BillingState) -> bool:
    """Replace an unfixed row's settings; False once the row has been fixed."""
    updates = [Set(k, v) for k, v in _settings(state).items()]
    try:
        store.update(keys.billing_state(program), updates, Exists(UNFIXED))
    except ConditionFailed:
        return False
    return True


def fix(store: ItemStore, program: str) -> None:
    """Settle an unfixed row's bucket size and start (a no-op once fixed)."""
    with contextlib.suppress(ConditionFailed):
        store.update(keys.billing_state(program), [Remove(UNFIXED)], Exists(UNFIXED))


def _settings(state: BillingState) -> dict[str, Value]:
    out: dict[str, Value] = {
        "bucket_seconds": state.config.bucket_seconds,
        "grace_seconds": state.config.grace_seconds,
        "start": state.start,
    }
    for kind in ALL_KINDS:
        out[f"ckpt_{kind}"] = state.checkpoints[kind]
        out[f"closed_{kind}"] = state.closed[kind]
    return out
