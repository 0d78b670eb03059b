"""SQLite's change log, and the log positions that order events on both engines.

``EVCHG#{program}`` / ``{position}``: on SQLite, one row per change events come
from, written in the transaction that made it: the item's new ``image``, or,
for a transaction record (never changed once written), its key as ``ref``. The
delivery worker derives the change's events, stores them
(:mod:`~tallybook.store.records.webhook_events`) and deletes the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from tallybook.store import keys
from tallybook.store.keys import NOTIFICATION_SOURCE as NOTIFICATION_SOURCE
from tallybook.store.keys import REPORT_SOURCE as REPORT_SOURCE
from tallybook.store.keys import TRANSACTION_SOURCE as TRANSACTION_SOURCE
from tallybook.store.port import Delete, Item, ItemStore, Key, Value

#: a log position: a number (SQLite: the commit time in ns; DynamoDB: the stream
#: record's sequence number) in this many digits, then an index, so they sort as strings
POSITION_DIGITS = 40
#: events one change can stand for, at most (its events' indexes are spaced so)
EVENTS_PER_CHANGE = 8


def position(number: int, index: int) -> str:
    return f"{number:0{POSITION_DIGITS}d}.{index:03d}"


def event_position(number: int, change: int, event: int) -> str:
    """The position of the ``event``-th event of the ``change``-th change at ``number``."""
    return position(number, change * EVENTS_PER_CHANGE + event)


def change_of(pos: str) -> tuple[str, int]:
    """Which change a plain log position's event comes from (its number and the
    change's index under it): the events of one change share it."""
    number, _, index = pos.partition(".")
    return number, int(index[:3]) // EVENTS_PER_CHANGE


# --- the ledger's items that events come from ----------------------------------


def is_source(image: Item) -> bool:
    """Whether events may be derived from ``image`` (by its key only: cheap)."""
    pk, sk = image.get("pk"), image.get("sk")
    return isinstance(pk, str) and isinstance(sk, str) and keys.change_source(pk, sk) is not None


def source_of(image: Item) -> tuple[str, Key] | None:
    """The kind (:func:`tallybook.store.keys.change_source`) and key of an item the
    ledger wrote, when events are derived from it; else ``None``."""
    pk, sk = image.get("pk"), image.get("sk")
    if not isinstance(pk, str) or not isinstance(sk, str):
        return None
    kind = keys.change_source(pk, sk)
    return None if kind is None else (kind, Key(pk, sk))


@dataclass(frozen=True, slots=True)
class Change:
    """A change events come from, logged on SQLite with the write that made it."""

    key: Key
    #: the item's new image (``None``: a transaction record no longer there)
    image: Item | None
    #: its log position: the number and the change's index under it
    number: int
    index: int


def change_item(image: Item, number: int, index: int, ttl: int) -> Item | None:
    """The change-log row of ``image``, the ``index``-th change at ``number`` (``None``
    for an image without a program, which stands for no event).

    A transaction record is never changed once written (it is put only where
    none is), so its row holds only its key and the worker reads the record;
    the rows of other items, which change, hold their new image."""
    program = image.get("program")
    if not isinstance(program, str):
        return None
    row: Item = {"pk": keys.event_changes(program), "sk": position(number, index), "ttl": ttl}
    pk, sk = image["pk"], image["sk"]
    if keys.change_source(cast(str, pk), cast(str, sk)) == TRANSACTION_SOURCE:
        row["ref"] = [pk, sk]
    else:
        row["image"] = cast(Value, image)
    return row


def pending_changes(store: ItemStore, program: str, limit: int) -> list[Change]:
    """The oldest changes of ``program`` whose events are not derived yet, with their
    images (a transaction record's read from the table, in one batch)."""
    rows = store.query(keys.event_changes(program), limit=limit).items
    refs = [Key(*cast(list[str], r["ref"])) for r in rows if "ref" in r]
    found = {(i["pk"], i["sk"]): i for i in store.batch_get(refs)} if refs else {}
    out: list[Change] = []
    for row in rows:
        sk = cast(str, row["sk"])
        number, _, index = sk.partition(".")
        ref = cast(list[str] | None, row.get("ref"))
        image = found.get((ref[0], ref[1])) if ref else cast(Item, row["image"])
        out.append(Change(Key(cast(str, row["pk"]), sk), image, int(number), int(index)))
    return out


def change_done(change: Change) -> Delete:
    """The change leaves the log (its events are stored)."""
    return Delete(change.key)
