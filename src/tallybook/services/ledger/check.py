"""``check``: verify invariants 1, 3 and 5 of DESIGN.md over an account or a program,
and those the capabilities check per account (2 and 6, wired by ``Ledger``).

1. every fund's balance equals the sum of its entries, each entry's balance is
   the previous one plus its amount, and sequence numbers have no gaps (every
   fund the account has entries in, see :mod:`.check_funds`);
3. no transaction id appears twice in one fund's history, and every entry's
   transaction record lists that entry (a leg of its account and fund with its
   amount, and its sequence number and balance where the leg has them);
5. per unit, customer balances plus system account balances sum to zero (every
   posting is balanced, so customer totals move only against system accounts);

and loyalty's lots against its member state, from the same reads (:mod:`.check_lots`).

The check reads a live ledger: what a posting in flight changes between two
reads (a head, then its history or holds; one account, then another) is no
violation. An account whose check finds one is checked again, and only what
every attempt finds is reported; invariant 5, when one pass over the accounts
does not sum to zero, is judged on a consistent view of every head (read twice
without any of them changing in between).

Another capability's invariant is an :data:`AccountCheck` given with its number:
``(program, account) -> problems`` (the wallet's holds, invariant 2; the
notifications, invariant 6), so this module imports no capability; one given
without a number (the wallet's charge intents past their grace, which reconcile
refunds: a recovery due, not a wrong balance) is reported as it words it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from tallybook.domain.ids import check_id, check_progress
from tallybook.domain.model import (
    SYSTEM_ACCOUNTS,
    Account,
    Entry,
    PostedLeg,
    Program,
)
from tallybook.errors import DamagedItem, NotFound
from tallybook.services.ledger.accounts import AccountService
from tallybook.services.ledger.check_funds import check_funds
from tallybook.services.ledger.check_lots import lot_problems
from tallybook.services.ledger.core import ProgramLookup
from tallybook.services.ledger.transactions import TransactionService
from tallybook.store.port import ItemStore
from tallybook.store.records.accounts import (
    account_ids,
    checked_account_entries,
    checked_entries,
    in_directory,
)
from tallybook.store.records.codec import LAYOUT
from tallybook.store.records.ledger import (
    checked_head,
    checked_heads,
    checked_shard_totals,
    checked_transactions,
)
from tallybook.store.records.loyalty import in_tier_index


@dataclass
class CheckReport:
    accounts: int = 0
    entries: int = 0
    transactions: int = 0
    violations: list[str] = field(default_factory=list)
    unit_totals: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations


Progress = Callable[[int], None]

#: one capability's invariant over an account: ``(program, account) -> problems``
AccountCheck = Callable[[str, str], list[str]]
#: a check given with no invariant number reports what it finds as it words it

#: checks of an account that finds a violation (a posting in flight may explain it),
#: and reads of every head for a consistent view of a program's totals
ATTEMPTS = 3


@dataclass
class _Seen:
    """What a program's check read of its postings: every customer account a checked
    transaction record names (with one such transaction), and for invariant 5, the
    transactions each checked head includes (its entries'), their legs, and the
    account whose head carries the counters of their system legs where the record
    tells (its owner, when the posting changes that account)."""

    named: dict[str, str] = field(default_factory=dict)
    included: dict[str, set[str]] = field(default_factory=dict)
    legs: dict[str, tuple[PostedLeg, ...]] = field(default_factory=dict)
    carriers: dict[str, str] = field(default_factory=dict)


class CheckService:
    """``ledger.check``: the design's invariants 1, 2, 3, 5 and 6, per program or account."""

    def __init__(
        self,
        store: ItemStore,
        programs: ProgramLookup,
        accounts: AccountService,
        transactions: TransactionService,
        account_checks: Sequence[tuple[int | None, AccountCheck]] = (),
    ) -> None:
        self.store = store
        self.programs = programs
        self.accounts = accounts
        self.transactions = transactions
        self.account_checks = tuple(account_checks)

    def account(self, program_id: str, account_id: str) -> CheckReport:
        """Check one account as :meth:`program` does, but invariant 5 (it needs every account)."""
        report = CheckReport()
        program = self._program(program_id, report)
        check_id(account_id, "account id")
        if program is not None:
            self._check_settled(program, account_id, report, {}, _Seen(), listed=False)
        return report

    def _program(self, program_id: str, report: CheckReport) -> Program | None:
        """The program (its funds and units are what its accounts are read against),
        or None with the violation naming its item when that item is damaged."""
        try:
            return self.programs.get(program_id, fresh=True)
        except DamagedItem as exc:
            report.violations.append(
                f"{exc.message}; nothing else was checked (accounts are read against "
                "the program's funds)"
            )
            return None

    def program(self, program_id: str, *, progress: Progress | None = None) -> CheckReport:
        """Check every account of a program, then conservation per unit (invariant 5)."""
        check_progress(progress)
        report = CheckReport()
        program = self._program(program_id, report)
        if program is None:
            return report
        totals: dict[str, int] = defaultdict(int)
        seen = _Seen()
        checked: set[str] = set()
        for account_id in self.accounts.list_ids(program_id):
            checked.add(account_id)
            self._check_settled(program, account_id, report, totals, seen, listed=True)
            if progress:
                progress(1)
        unlisted = self._check_unlisted(program, report, totals, seen, checked)
        for unit, amount in self._shard_totals(program, report.violations).items():
            totals[unit] += amount
        settled = (
            None
            if report.violations
            else _with_split_postings(program, totals, seen, self._applied_since)
        )
        if settled is not None and not any(settled.values()):
            totals = defaultdict(int, settled)  # what a transfer read half-done moved: none
        elif any(totals.values()):  # postings in flight, or a violation: look again
            consistent = self._consistent_totals(program, unlisted)
            if consistent is None:  # nor is the sum read meanwhile any violation
                report.violations.append(
                    "invariant 5: not checked: the accounts kept changing while they were "
                    f"read ({ATTEMPTS} times); run the check again"
                )
                report.unit_totals = dict(totals)
                return report
            totals = defaultdict(int, consistent)
        report.unit_totals = dict(totals)
        for unit, total in totals.items():
            if total != 0:
                report.violations.append(
                    f"invariant 5: unit {unit} does not sum to zero over all accounts ({total})"
                )
        return report

    def _check_unlisted(
        self,
        program: Program,
        report: CheckReport,
        totals: dict[str, int],
        seen: _Seen,
        checked: set[str],
    ) -> list[str]:
        """Check the accounts a checked transaction record names that the account
        directory does not list (the directory is how the check finds accounts: it
        never scans the table); the ids of those with a head."""
        found: list[str] = []
        while pending := sorted(set(seen.named) - checked):
            for account_id in pending:
                checked.add(account_id)
                if in_directory(self.store, program.id, account_id):
                    continue  # opened after the directory was read
                where = f"account {account_id}, named by transaction {seen.named[account_id]},"
                at = len(report.violations)
                try:
                    self._check_settled(program, account_id, report, totals, seen, listed=False)
                except NotFound:
                    report.violations.append(
                        f"invariant 1: {where} has no head and is not in the account directory"
                    )
                    continue
                report.violations.insert(
                    at, f"invariant 1: {where} is not in the account directory"
                )
                found.append(account_id)
        return found

    def _applied_since(self, program: Program, leg: PostedLeg, txn_id: str) -> bool:
        """Whether ``leg``'s account now holds its entry of ``txn_id`` (a fresh read of
        that fund's history, newest first: a posting in flight is among the last),
        which its head read earlier did not include."""
        return any(
            not isinstance(entry, str) and entry.txn_id == txn_id and _is_leg_of(leg, entry)
            for entry in checked_entries(
                self.store, program.id, leg.account, leg.fund, forward=False
            )
        )

    def count_accounts(self, program_id: str) -> int:
        """How many accounts the program's account directory lists (a damaged
        program item, which :meth:`program` reports, does not stop the count)."""
        try:
            return sum(1 for _ in self.accounts.list_ids(program_id))
        except DamagedItem:
            return sum(1 for _ in account_ids(self.store, program_id))

    def _check_settled(
        self,
        program: Program,
        account_id: str,
        report: CheckReport,
        totals: dict[str, int],
        seen: _Seen,
        *,
        listed: bool,
    ) -> None:
        """Check an account; again, from a fresh read, while a check finds a violation.
        What the last check finds is reported unless the account's head changed while
        it read the rest (a posting committed between its reads): then the account is
        reported as not checked. What it reads of the account's postings is added to
        ``seen`` (see :class:`_Seen`)."""
        for _ in range(ATTEMPTS):
            part = CheckReport()
            part_totals: dict[str, int] = {}
            part_seen = _Seen(named=seen.named, legs=seen.legs, carriers=seen.carriers)
            head = self._check_account(
                program, account_id, part, part_totals, part_seen, listed=listed
            )
            if part.ok:
                break
        if not part.ok and checked_head(self.store, program.id, account_id) != head:
            part.violations = [
                f"account {account_id}: not checked: it kept changing while it was read "
                f"({ATTEMPTS} times); run the check again"
            ]
        seen.included.update(part_seen.included)
        report.accounts += part.accounts
        report.entries += part.entries
        report.transactions += part.transactions
        report.violations += part.violations
        for unit, amount in part_totals.items():
            totals[unit] = totals.get(unit, 0) + amount

    def _shard_totals(self, program: Program, violations: list[str]) -> dict[str, int]:
        """Per unit, what the system accounts' shards hold (system-to-system postings)."""
        totals: dict[str, int] = defaultdict(int)
        for system in SYSTEM_ACCOUNTS:
            found, problems = checked_shard_totals(self.store, program.id, system)
            violations += [f"invariant 5: {problem}" for problem in problems]
            for fund, amount in found.items():
                spec = program.fund(fund)
                if spec is None:
                    violations.append(f"{system} holds unknown fund {fund}")
                    continue
                totals[spec.unit] += amount
        return totals

    def _consistent_totals(
        self, program: Program, unlisted: Sequence[str]
    ) -> dict[str, int] | None:
        """Per unit, the sum of every head's balances and system counters plus the
        shards, from two reads of them all (accounts opened meanwhile too, and the
        ``unlisted`` ones the directory misses) that found nothing changed in between."""
        previous: tuple[dict[str, int], dict[str, int]] | None = None
        for _ in range(ATTEMPTS + 1):
            ids = list(dict.fromkeys([*self.accounts.list_ids(program.id), *unlisted]))
            versions: dict[str, int] = {}
            totals: dict[str, int] = defaultdict(int)
            for start in range(0, len(ids), 100):
                for head in checked_heads(self.store, program.id, ids[start : start + 100]):
                    versions[head.id] = head.version
                    _add_head(program, head, totals, [])
            for unit, amount in self._shard_totals(program, []).items():
                totals[unit] += amount
            if previous == (versions, dict(totals)):
                return dict(totals)
            previous = (versions, dict(totals))
        return None

    def _check_account(
        self,
        program: Program,
        account_id: str,
        report: CheckReport,
        totals: dict[str, int],
        seen: _Seen,
        *,
        listed: bool = False,
    ) -> Account | str | None:
        """Check the account from one read of each of its parts; the head as read."""
        account = checked_head(self.store, program.id, account_id)
        if account is None and not listed:
            raise NotFound(f"account {account_id} not found in program {program.id}")
        report.accounts += 1
        if account is None:
            # the directory names it, so it was opened: its balances are lost
            report.violations.append(
                f"invariant 1: account {account_id} is in the account directory "
                "but its head (the balances) is missing"
            )
            return None
        if isinstance(account, str):  # nothing of the account can be checked against it
            report.violations.append(
                f"invariant 1: account {account_id}: malformed head: {account}"
            )
            return account
        _add_head(program, account, totals, report.violations)
        funds = check_funds(
            program, account, checked_account_entries(self.store, program.id, account_id)
        )
        report.entries += funds.entries
        report.violations += funds.problems
        if program.layout >= LAYOUT:  # lots on entries, tier rows (docs/table-design.md)
            report.violations += lot_problems(
                account,
                funds.lots,
                lambda tier: in_tier_index(self.store, program.id, tier, account_id),
            )
        entries = funds.by_txn
        seen.included[account_id] = set(entries)  # the postings its head includes
        self._check_records(program, account_id, entries, report, seen)
        for invariant, check in self.account_checks:
            for problem in check(program.id, account_id):
                label = "" if invariant is None else f"invariant {invariant}: "
                report.violations.append(f"{label}{problem}")
        return account

    def _check_records(
        self,
        program: Program,
        account_id: str,
        entries: dict[str, list[Entry]],
        report: CheckReport,
        seen: _Seen,
    ) -> None:
        ids = list(entries)
        for start in range(0, len(ids), 100):
            chunk = ids[start : start + 100]
            found = checked_transactions(self.store, program.id, chunk)
            for txn_id in chunk:
                report.transactions += 1
                record = found.get(txn_id)
                if record is None:
                    report.violations.append(
                        f"invariant 3: entry of {account_id} names transaction {txn_id} "
                        "which has no record"
                    )
                    continue
                if isinstance(record, str):
                    report.violations.append(
                        f"invariant 3: entry of {account_id} names transaction {txn_id} "
                        f"whose record is malformed: {record}"
                    )
                    continue
                txn = record.txn
                seen.legs[txn_id] = txn.legs
                if any(leg.account == record.owner for leg in txn.legs):
                    seen.carriers[txn_id] = cast(str, record.owner)  # the engine's carrier
                for leg in txn.legs:
                    if leg.account not in SYSTEM_ACCOUNTS:
                        seen.named.setdefault(leg.account, txn_id)
                if not any(leg.account == account_id for leg in txn.legs):
                    report.violations.append(
                        f"invariant 3: transaction {txn_id} does not list account {account_id}"
                    )
                    continue
                for entry in entries[txn_id]:
                    if not any(_is_leg_of(leg, entry) for leg in txn.legs):
                        report.violations.append(
                            f"invariant 3: {account_id}/{entry.fund} seq {entry.seq}: "
                            f"amount {entry.amount} balance {entry.balance} is no leg of "
                            f"its transaction {txn_id}"
                        )


def _add_head(
    program: Program, head: Account, totals: dict[str, int], violations: list[str]
) -> None:
    """Add an account's balances and its system counters (the system side of its
    postings, read with them) to the totals per unit."""
    for spec in program.funds:
        totals[spec.unit] = totals.get(spec.unit, 0) + head.fund(spec.name).balance
    for (system, fund), amount in head.system.items():
        counted = program.fund(fund)
        if counted is None:
            violations.append(f"{system} holds unknown fund {fund} on {head.id}'s head")
            continue
        totals[counted.unit] = totals.get(counted.unit, 0) + amount


def _with_split_postings(
    program: Program,
    totals: dict[str, int],
    seen: _Seen,
    applied_since: Callable[[Program, PostedLeg, str], bool],
) -> dict[str, int] | None:
    """The totals as if every head had been read after the postings some checked heads
    include and others do not (a transfer committed between the reads of its two
    accounts): their legs on the heads read before them are added, and its system
    legs too when the head that carries their counters is one of those. None when
    such a posting has a system leg and its carrier is not known, names an account
    that was not checked, or has a leg that a fresh read of its account still does
    not find (``applied_since``): that is a side never applied, not one read too
    early."""
    settled = dict(totals)
    for txn_id, legs in seen.legs.items():
        customer = [leg for leg in legs if leg.account not in SYSTEM_ACCOUNTS]
        missing = [leg for leg in customer if txn_id not in seen.included.get(leg.account, ())]
        if not missing:
            continue
        system = [leg for leg in legs if leg.account in SYSTEM_ACCOUNTS]
        carrier = seen.carriers.get(txn_id)
        if (system and carrier is None) or any(
            leg.account not in seen.included for leg in customer
        ):
            return None
        for leg in missing:
            if not applied_since(program, leg, txn_id):
                return None
        if any(leg.account == carrier for leg in missing):
            missing += system  # its counters sit on a head read before it
        for leg in missing:
            spec = program.fund(leg.fund)
            if spec is None:
                return None
            settled[spec.unit] = settled.get(spec.unit, 0) + leg.amount
    return settled


def _is_leg_of(leg: PostedLeg, entry: Entry) -> bool:
    """Whether ``leg`` posted ``entry`` (a leg written without its sequence number
    or balance is matched on the rest)."""
    return (
        leg.account == entry.account
        and leg.fund == entry.fund
        and leg.amount == entry.amount
        and leg.seq in (None, entry.seq)
        and leg.balance in (None, entry.balance)
    )
