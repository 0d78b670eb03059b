"""Time as a dependency, so expiry and holds are testable."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol, cast

from tallybook.domain.times import check_time
from tallybook.errors import ConfigError


class Clock(Protocol):
    """Where services read the time: ``now()`` returns an aware UTC datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real time (the default clock of a :class:`~tallybook.Ledger`)."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to (tests, simulations).

    Its times are aware UTC datetimes: a start or :meth:`set` time in another
    zone is converted; a naive one (or not a datetime) is a ``ValidationError``."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = datetime(2026, 1, 1, tzinfo=UTC) if start is None else _utc(start, "start")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        with self._lock:
            self._now += delta
            return self._now

    def set(self, t: datetime) -> None:
        t = _utc(t, "t")
        with self._lock:
            self._now = t


def check_clock(clock: object) -> Clock:
    """``clock`` if its ``now()`` answers an aware UTC datetime; else a ``ConfigError``
    now, not a ``TypeError`` or ``AttributeError`` at the first posting."""
    problem = "it has no now()"
    now = getattr(clock, "now", None)
    if callable(now):
        try:
            answer = now()
        except TypeError as exc:  # e.g. the class SystemClock instead of SystemClock()
            problem = f"now() failed: {exc}"
        else:
            if isinstance(answer, datetime) and answer.utcoffset() == timedelta(0):
                return cast(Clock, clock)
            problem = f"now() answered {answer!r}, not an aware UTC datetime"
    raise ConfigError(
        f"clock {clock!r} is not a Clock ({problem}); give an object whose now() "
        "answers an aware UTC datetime, such as SystemClock() or ManualClock()"
    )


def _utc(value: object, what: str) -> datetime:
    return check_time(value, f"ManualClock {what}").astimezone(UTC)
