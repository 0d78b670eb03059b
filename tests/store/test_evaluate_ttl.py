"""TTL expiry as the engines see it: ``now`` is taken as given, even at epoch 0."""

from __future__ import annotations

from tallybook.store.evaluate import is_expired
from tallybook.store.port import TTL_ATTR


def test_an_explicit_clock_at_epoch_zero_is_not_replaced_by_the_wall_clock() -> None:
    item = {"pk": "p", "sk": "s", TTL_ATTR: 100}
    assert not is_expired(item, 0)  # a clock at 0 is before the TTL of 100
    assert is_expired(item, 100)
    assert is_expired(item)  # no clock given: the wall clock, long past 100
