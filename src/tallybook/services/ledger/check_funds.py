"""Invariant 1 over one account's funds, for ``ledger.check``: each fund's history
walked oldest first (running balances, sequence numbers without gaps, no
transaction twice) and compared with what the account's head holds.

Every fund the account has entries in is walked, not only those the program's
configuration lists: a fund removed from it after postings still has its
history checked, and is reported as a fund the program does not have.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter

from tallybook.domain.model import Account, Entry, FundState, Program
from tallybook.store.records.accounts import CheckedEntry


@dataclass
class FundHistory:
    """One fund's entries as the check walked them: what they sum to, the last
    sequence number, how many items were read and what was wrong with them."""

    total: int = 0
    last_seq: int = 0
    read: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class AccountFunds:
    """Every fund of an account checked: the problems and entries read, the entries
    per transaction id (for the records they name, invariant 3), and the lots the
    entries carry with their entries (for :mod:`.check_lots`)."""

    problems: list[str] = field(default_factory=list)
    entries: int = 0
    by_txn: dict[str, list[Entry]] = field(default_factory=lambda: defaultdict(list))
    lots: list[tuple[Entry, int, int]] = field(default_factory=list)


def check_funds(program: Program, account: Account, items: Iterable[CheckedEntry]) -> AccountFunds:
    """Check ``account``'s funds against ``items``: its entries with the fund each
    is filed under, fund by fund, each oldest first (an item that does not read
    comes as what is wrong with it). The program's funds come first, in its order,
    then any other the head or the entries name."""
    found = AccountFunds()
    histories = {
        fund: _walk(account.id, fund, group, found)
        for fund, group in groupby(items, key=attrgetter("fund"))
    }
    configured = [spec.name for spec in program.funds]
    others = sorted({*account.funds, *histories} - set(configured))
    for name in (*configured, *others):
        history = histories.get(name, FundHistory())
        found.entries += history.read
        found.problems += _fund_problems(program, account, name, history)
    return found


def _walk(
    account_id: str, fund: str, items: Iterator[CheckedEntry], found: AccountFunds
) -> FundHistory:
    history = FundHistory()
    applied: set[str] = set()
    resync = False
    for _, entry, lot in items:
        history.read += 1
        if isinstance(entry, str):  # an item that does not read as an entry
            history.problems.append(f"invariant 1: {account_id}/{fund}: malformed {entry}")
            resync = True
            continue
        if resync:  # go on from the entry after it, as it says it follows
            history.total, history.last_seq = entry.balance - entry.amount, entry.seq - 1
            resync = False
        where = f"{account_id}/{fund} seq {entry.seq}"
        if entry.seq != history.last_seq + 1:
            history.problems.append(
                f"invariant 1: {where}: expected sequence {history.last_seq + 1}"
            )
        history.total += entry.amount
        if entry.balance != history.total:
            history.problems.append(
                f"invariant 1: {where}: balance {entry.balance} != running sum {history.total}"
            )
        if entry.txn_id in applied:
            history.problems.append(
                f"invariant 3: {where}: transaction {entry.txn_id} applied twice"
            )
        applied.add(entry.txn_id)
        found.by_txn[entry.txn_id].append(entry)
        if lot is not None:
            found.lots.append((entry, *lot))
        history.last_seq = entry.seq
    return history


def _fund_problems(
    program: Program, account: Account, name: str, history: FundHistory
) -> list[str]:
    where = f"{account.id}/{name}"
    state = account.funds.get(name)
    problems = []
    if program.fund(name) is None:
        if state is None:  # entries alone: nothing holds them to compare with
            return [
                f"invariant 1: {where}: {history.read} entries in a fund neither the "
                f"program nor the head has (their sum {history.total})",
                *history.problems,
            ]
        if state != FundState() or history.read:
            problems.append(
                f"invariant 1: {where}: the head holds a fund the program does not have "
                f"(balance {state.balance}, held {state.held}, sequence {state.seq})"
            )
    problems += history.problems
    state = state or FundState()
    if history.total != state.balance:
        problems.append(
            f"invariant 1: {where}: balance {state.balance} != sum of entries {history.total}"
        )
    if state.seq != history.last_seq:
        problems.append(
            f"invariant 1: {where}: head sequence {state.seq} != last entry {history.last_seq}"
        )
    return problems
