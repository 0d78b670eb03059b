"""Per-account order of events, on a stream of any number of shards.

The events of one change come from one item, but two changes of one account
are two items (transaction records, notification history rows), which a
stream of several shards may give in either order. The ledger numbers what
must stay in order without gaps, in *lanes*: every change that stands for an
event of an account takes the account's next number (``account_seq``, written
with the change, see :class:`tallybook.store.records.ledger.Changes`). Records
written before accounts were numbered are on the lanes that version used: each
customer leg's account and fund (its entry ``seq``) and each hold (placing 1,
settling 2). The fan-out takes a *unit* (the events of one item) in only once
every lane it is on has taken in its predecessor:

- a lane's **marker** holds the last ``seq`` taken in and that unit's last log
  position; the unit's storage transaction moves each marker on, on condition
  it is still at ``seq - 1``;
- a unit whose predecessor is not in yet is **parked** (one row holding its
  events), and the :func:`sweep` after each batch takes in what became ready,
  chains included, until nothing moves;
- a unit taken in after its predecessor sorts after it in every queue: when its
  own position does not, it gets ``{root}~{depth}~{own}``, after the marker's
  position (:func:`after`; a queue is read in position order);
- an absent marker (the lane's first unit, a lane that was idle past the
  markers' retention, or the first numbered change after an upgrade) is read
  back: ``seq`` 1 is first; otherwise the predecessor (``account_previous``:
  its first event's id and time; for an older record, the fund's entry
  ``seq - 1`` or the hold's placing) counts as taken in when its event is
  stored, or when it is older than the stream keeps records
  (:data:`HORIZON_US`): it cannot come any more.

Only the ledger gives out numbers, each with a change that stands for an
event, so a parked unit's predecessor comes. A unit parked for longer than the
stream keeps records, whose predecessor therefore was lost with the stream, is
taken in, its lanes moved past it. A unit on no lane (reports, and records of
older versions without a customer leg or hold) is taken in as it comes. A unit
whose lanes are all past it (a stream record read again) is stored as before,
which its first condition skips when it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tallybook.domain.event_types import HOLD_AUTHORIZED, TRANSACTION_POSTED, event_id
from tallybook.domain.webhooks import (
    ACCOUNT_LANE,
    FUND_LANE,
    HOLD_LANE,
    Event,
    Lane,
    Mark,
    Subscription,
)
from tallybook.errors import TransactionConflict
from tallybook.store.port import Action, ItemStore
from tallybook.store.records.codec import parse_iso, to_us
from tallybook.store.records.webhook_changes import change_of
from tallybook.store.records.webhook_events import event_put, read_events, stored_positions
from tallybook.store.records.webhook_order import (
    Parked,
    Predecessor,
    any_parked,
    entry_before,
    parked_at,
    parked_delete,
    parked_put,
    read_marks,
    read_parked,
    read_parked_at,
    transaction_before,
)
from tallybook.webhooks.apply import Group, MarkMove, Replan, apply_groups, deliveries
from tallybook.webhooks.log import retention_ttl

__all__ = [
    "HORIZON_US",
    "Ordering",
    "Unit",
    "after",
    "lanes_of",
    "make_unit",
    "release",
    "sweep",
    "take_in",
    "units_of",
]

#: a stream keeps records 24 hours; past this, a record not read is gone
HORIZON_US = 25 * 3600 * 1_000_000
#: plans of one batch, at most, when other workers keep moving its lanes
REPLANS = 5
#: what a batch whose lanes kept moving through every plan fails with
MOVING = "lane markers kept moving; run the worker again"


@dataclass(frozen=True, slots=True)
class Unit:
    """The events of one change (one transaction record), with their log positions."""

    events: tuple[tuple[Event, str], ...]
    #: the lanes it is on, each with its ``seq`` there (:func:`lanes_of`)
    lanes: dict[Lane, int]
    #: the parked row it was read from, if any
    parked: Parked | None = None

    @property
    def program(self) -> str:
        return self.events[0][0].program


def make_unit(events: Sequence[tuple[Event, str]], parked: Parked | None = None) -> Unit:
    return Unit(tuple(events), lanes_of(events), parked)


def units_of(events: Sequence[tuple[Event, str]]) -> list[Unit]:
    """Events in log order, grouped by the change they come from."""
    out: list[Unit] = []
    current: list[tuple[Event, str]] = []
    for event, pos in events:
        if current and change_of(current[-1][1]) != change_of(pos):
            out.append(make_unit(current))
            current = []
        current.append((event, pos))
    if current:
        out.append(make_unit(current))
    return out


def lanes_of(events: Iterable[tuple[Event, str]]) -> dict[Lane, int]:
    """The lanes the events of one change are on, each with its ``seq`` there.

    A record that numbers its accounts (``account_seq``) is on their account
    lanes. One written before accounts were numbered is on its accounts' fund
    lanes and its hold's; so is an account's first numbered change for what came
    before it (a fund's entry past the first, a hold's settling), which an older
    record may be.
    """
    lanes: dict[Lane, int] = {}
    for event, _ in events:
        data = cast(dict[str, Any], event.data)
        numbers = cast(dict[str, int], data.get("account_seq") or {})
        for account, n in numbers.items():
            lanes[Lane(event.program, ACCOUNT_LANE, account)] = n
        txn = data.get("txn_id")
        if not isinstance(txn, str):
            continue
        for leg in data.get("legs") or []:
            if not isinstance(leg, dict) or not isinstance(leg.get("seq"), int):
                continue
            number = numbers.get(leg["account"])
            if number is None or (number == 1 and leg["seq"] > 1):
                lanes[Lane(event.program, FUND_LANE, leg["account"], leg["fund"])] = leg["seq"]
        details = data.get("details")
        hold = data.get("hold_id") or (
            details.get("hold_id") if isinstance(details, dict) else None
        )
        if isinstance(hold, str) and (not numbers or (hold != txn and 1 in numbers.values())):
            lanes[Lane(event.program, HOLD_LANE, hold)] = 1 if hold == txn else 2
    return lanes


def after(base: str | None, own: str) -> str:
    """A unit's position, from its own: unchanged when it sorts after ``base`` (its
    lanes' last position), else ``{root}~{depth}~{own}``, just after ``base``."""
    if base is None or own > base:
        return own
    root, _, rest = base.partition("~")
    depth = int(rest.partition("~")[0]) if rest else 0
    return f"{root}~{depth + 1:06d}~{own}"


class Ordering:
    """Plans units in order: taken in, parked, or (parked) left waiting."""

    def __init__(
        self, store: ItemStore, subs: Mapping[str, Sequence[Subscription]], now_us: int
    ) -> None:
        self.store = store
        self.subs = subs
        self.now_us = now_us
        self.ttl = retention_ttl(store.ttl_now())
        self.marks: dict[Lane, Mark | None] = {}
        #: units planned, by their first event: the parked rows their plan keeps
        self.seen: dict[str, set[str]] = {}
        #: (lane, seq) of every unit planned to be taken in: their successors may wait
        self.moved: list[tuple[Lane, int]] = []

    def load(self, units: Iterable[Unit]) -> None:
        """Read the markers of the units' lanes not read yet, in one batch."""
        lanes = {lane for u in units for lane in u.lanes if lane not in self.marks}
        if not lanes:
            return
        found = read_marks(self.store, lanes)
        self.marks.update({lane: found.get(lane) for lane in lanes})

    def groups(self, unit: Unit) -> list[Group]:
        """What taking ``unit`` in (or parking it) writes, after the units planned before."""
        first = unit.events[0][0].id
        if first in self.seen:
            return self._duplicate(unit, self.seen[first])
        kept = self.seen[first] = set()
        lanes = unit.lanes
        self.load([unit])
        moves: list[tuple[Lane, int | None, int]] = []
        blocked: list[tuple[Lane, int | None, int]] = []
        base: str | None = None
        for lane, seq in lanes.items():
            mark = self.marks[lane]
            if mark is None:
                # read back from the ledger once: a parked unit's predecessor, when
                # it is taken in, leaves a marker
                found = seq == 1 or (unit.parked is None and self._taken_before(lane, seq, unit))
                if found is False:
                    blocked.append((lane, None, seq))
                    continue
                moves.append((lane, None, seq))
                if isinstance(found, str):
                    base = max(base or "", found)
            elif seq <= mark.seq:
                continue  # taken in already (a record read again)
            elif seq == mark.seq + 1:
                moves.append((lane, mark.seq, seq))
                base = max(base or "", mark.position)
            else:
                blocked.append((lane, mark.seq, seq))
                base = max(base or "", mark.position)
        if blocked:
            at = parked_at(blocked[0][0], blocked[0][2])
            if unit.parked is None:
                kept.add(at)
                return [Group([parked_put(unit.program, at, unit.events, self.now_us, self.ttl)])]
            if self.now_us - unit.parked.parked_us < HORIZON_US:
                kept.add(at)
                if unit.parked.key == at:
                    return []
                # in on that lane, it waits on another
                put = parked_put(unit.program, at, unit.events, unit.parked.parked_us, self.ttl)
                return [Group([parked_delete(unit.program, unit.parked.key), put])]
            moves += blocked  # its predecessor left the stream unread: go on without it
        if unit.parked is not None and not moves and self._stored(unit):
            return [Group([parked_delete(unit.program, unit.parked.key)])]
        return self._take(unit, moves, base)

    @staticmethod
    def _duplicate(unit: Unit, kept: set[str]) -> list[Group]:
        """A unit planned already, met again: a page read again after a killed
        worker may have parked it on another lane than its first reading did (its
        lanes had moved meanwhile). The copy planned first stands for it; another
        parked row of it is deleted, or it would wait for ever."""
        if unit.parked is None or unit.parked.key in kept:
            return []
        return [Group([parked_delete(unit.program, unit.parked.key)])]

    def _take(
        self, unit: Unit, moves: list[tuple[Lane, int | None, int]], base: str | None
    ) -> list[Group]:
        subs = self.subs.get(unit.program, [])
        groups: list[Group] = []
        last = ""
        for event, own in unit.events:
            pos = after(base, own) if moves else own
            groups.append(
                Group(
                    [event_put(event, pos, self.ttl), *deliveries(event, pos, subs, self.ttl)],
                    event,
                )
            )
            last = pos
        closing: list[Action] = []
        if unit.parked is not None:
            closing.append(parked_delete(unit.program, unit.parked.key))
        marks = tuple(MarkMove(lane, expect, Mark(seq, last)) for lane, expect, seq in moves)
        if closing or marks:
            groups.append(Group(closing, None, marks))
        for move in marks:
            self.marks[move.lane] = move.mark
            self.moved.append((move.lane, move.mark.seq))
        return groups

    def _taken_before(self, lane: Lane, seq: int, unit: Unit) -> bool | str:
        """Whether a lane without a marker has its unit ``seq - 1`` in (or never will):
        the position it was queued at when it is stored, else ``True`` or ``False``."""
        at_us = to_us(parse_iso(unit.events[0][0].at))
        pred: Predecessor | None
        if lane.kind == ACCOUNT_LANE:
            return self._change_before(lane, unit, at_us)
        if lane.kind == FUND_LANE:
            pred = entry_before(self.store, lane.program, lane.id, lane.fund, seq, at_us)
        else:
            pred = transaction_before(self.store, lane.program, lane.id)
        if pred is None or pred.created_us < at_us - HORIZON_US:
            return True
        types = (TRANSACTION_POSTED, HOLD_AUTHORIZED)
        ids = [event_id(pred.key.pk, pred.key.sk, t) for t in types]
        return max(stored_positions(self.store, lane.program, ids).values(), default=False)

    def _change_before(self, lane: Lane, unit: Unit, at_us: int) -> bool | str:
        """:meth:`_taken_before` on an account's lane: the previous change's first
        event (``account_previous``) is stored, or too old to come any more."""
        data = unit.events[0][0].data
        previous = cast(dict[str, dict[str, str]], data.get("account_previous") or {})
        before = previous.get(lane.id)
        if before is None or to_us(parse_iso(before["at"])) < at_us - HORIZON_US:
            return True
        stored = stored_positions(self.store, lane.program, [before["id"]])
        return max(stored.values(), default=False)

    def _stored(self, unit: Unit) -> bool:
        first = unit.events[0][0]
        return bool(read_events(self.store, first.program, [first.id]))


def release(
    store: ItemStore,
    subs: Mapping[str, Sequence[Subscription]],
    now_us: int,
    moved: Iterable[tuple[Lane, int]],
) -> int:
    """Take in the units parked on the successors of what ``moved`` (and theirs, as
    a chain); how many events were written. A program with nothing parked costs
    one read."""
    done = 0
    by_program: dict[str, set[str]] = {}
    for lane, seq in moved:
        by_program.setdefault(lane.program, set()).add(parked_at(lane, seq + 1))
    for program, wanted in by_program.items():
        if not any_parked(store, program):
            continue
        while parked := read_parked_at(store, program, sorted(wanted)):
            written, moves = _take_parked(store, subs, now_us, parked)
            done += written
            wanted = {parked_at(lane, seq + 1) for lane, seq in moves}
    return done


def sweep(
    store: ItemStore,
    subs: Mapping[str, Sequence[Subscription]],
    now_us: int,
    programs: Iterable[str],
) -> int:
    """Take in every parked unit of ``programs`` that is ready (a worker killed
    between taking a unit in and releasing its successor left it), with the
    chains that follows; how many events were written."""
    done = 0
    for program in dict.fromkeys(programs):
        parked = read_parked(store, program)
        if parked:
            written, moves = _take_parked(store, subs, now_us, parked)
            done += written + release(store, subs, now_us, moves)
    return done


def _take_parked(
    store: ItemStore,
    subs: Mapping[str, Sequence[Subscription]],
    now_us: int,
    parked: Sequence[Parked],
) -> tuple[int, list[tuple[Lane, int]]]:
    """Plan and write parked units (again, with the rows still parked, when a
    marker moved meanwhile); the events written and the lane moves made."""
    program, at = parked[0].events[0][0].program, [p.key for p in parked]
    return take_in(
        store,
        subs,
        now_us,
        [make_unit(p.events, p) for p in parked],
        again=lambda: [make_unit(p.events, p) for p in read_parked_at(store, program, at)],
    )


def take_in(
    store: ItemStore,
    subs: Mapping[str, Sequence[Subscription]],
    now_us: int,
    units: Sequence[Unit],
    again: Callable[[], Sequence[Unit]] | None = None,
) -> tuple[int, list[tuple[Lane, int]]]:
    """Plan ``units`` along their lanes and write them, planning again when a
    marker moved meanwhile (``again``: the units to plan then, if they may have
    changed); the events written and the lane moves made."""
    done = 0
    moved: list[tuple[Lane, int]] = []
    for attempt in range(REPLANS):
        if attempt and again is not None:
            units = again()
        ordering = Ordering(store, subs, now_us)
        ordering.load(units)
        groups = [g for unit in units for g in ordering.groups(unit)]
        moved += ordering.moved
        try:
            return done + apply_groups(store, groups), moved
        except Replan as exc:
            done += exc.done
    raise TransactionConflict(MOVING)
