"""A store wrapper that crashes the process (simulated) at the n-th storage call.

``Crash`` derives from ``BaseException`` so no ``except Exception`` in the code
under test can swallow it, as with a killed process. ``mode="before"`` crashes
before the call reaches the store; ``mode="after"`` applies it, then crashes
before the caller sees the answer (an acknowledgement lost with the process).

In ``"before"`` mode ``at`` counts every call; in ``"after"`` mode only writes:
a read has no effect, so losing its answer is the same crash as dying just
before it, which ``"before"`` covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from tallybook.store.port import Action, Item, ItemStore, Key, Page, SortCondition


class Crash(BaseException):
    pass


class CrashingStore(ItemStore):
    def __init__(
        self, inner: ItemStore, at: int | None = None, mode: Literal["before", "after"] = "before"
    ) -> None:
        self.inner = inner
        self.metrics = inner.metrics
        self.at = at
        self.mode = mode
        self.calls = 0

    def _step(self, write: bool = False) -> None:
        if self.mode == "before" or write:
            self.calls += 1
        if self.at == self.calls and self.mode == "before":
            raise Crash(f"crash before storage call {self.calls}")

    def _after(self, write: bool = False) -> None:
        if write and self.at == self.calls and self.mode == "after":
            raise Crash(f"crash after storage write {self.calls}")

    def get(self, key: Key, *, consistent: bool = True) -> Item | None:
        self._step()
        out = self.inner.get(key, consistent=consistent)
        self._after()
        return out

    def query(
        self,
        partition: str,
        sort: SortCondition | None = None,
        *,
        index: str | None = None,
        forward: bool = True,
        limit: int | None = None,
        cursor: str | None = None,
        consistent: bool = True,
    ) -> Page:
        self._step()
        out = self.inner.query(
            partition,
            sort,
            index=index,
            forward=forward,
            limit=limit,
            cursor=cursor,
            consistent=consistent,
        )
        self._after()
        return out

    def transact_write(self, actions: Sequence[Action], *, token: str | None = None) -> None:
        self._step(write=True)
        self.inner.transact_write(actions, token=token)
        self._after(write=True)

    def batch_get(self, keys: Sequence[Key], *, consistent: bool = True) -> list[Item]:
        self._step()
        out = self.inner.batch_get(keys, consistent=consistent)
        self._after()
        return out

    def batch_write(self, puts: Sequence[Item] = (), deletes: Sequence[Key] = ()) -> None:
        self._step(write=True)
        self.inner.batch_write(puts, deletes)
        self._after(write=True)

    def describe(self) -> str:
        return f"crashing({self.inner.describe()})"
