"""The program's billing state row (``BILLSTATE#{program}`` / ``STATE``).

It holds the settings (bucket size, grace window), where reporting starts and,
per report kind, the checkpoint (end of the last reported window) and the
closed mark (end of the window being reported: records no longer enter
buckets before it). Created on first use; the bucket size is fixed from then on.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from tallybook.domain.billing import BillingConfig, bucket_start, epoch
from tallybook.domain.reports import ALL_KINDS
from tallybook.errors import ConditionFailed
from tallybook.store import keys
from tallybook.store.port import Item, ItemStore, NotExists


@dataclass(frozen=True, slots=True)
class BillingState:
    """Settings, start, and per report kind the checkpoint and the closed mark."""

    config: BillingConfig
    start: int
    checkpoints: dict[str, int]
    closed: dict[str, int]


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
    )


def create_state(
    store: ItemStore, program: str, config: BillingConfig, start: int | None, now: datetime
) -> BillingState:
    """Create the row unless another writer did first; returns the row as stored."""
    first = start if start is not None else bucket_start(epoch(now), config.bucket_seconds)
    item: Item = {
        **keys.billing_state(program).as_item(),
        "program": program,
        "bucket_seconds": config.bucket_seconds,
        "grace_seconds": config.grace_seconds,
        "start": first,
    }
    for kind in ALL_KINDS:
        item[f"ckpt_{kind}"] = first
        item[f"closed_{kind}"] = first
    with contextlib.suppress(ConditionFailed):
        store.put(item, NotExists("pk"))
    found = read_state(store, program)
    assert found is not None
    return found
