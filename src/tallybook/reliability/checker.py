"""The final check: invariants 1-6 of DESIGN.md over a program, plus what clients saw.

``ledger.check.program`` covers invariants 1, 2, 3, 5 and 6:

2. per account and fund, the amount withheld equals the sum of active holds
   and available is not below zero without overdraft (``ledger.wallet.check``,
   which also matches bonus to grants);
6. at most one active notification per (account, type): the history rows
   still active at the ledger clock (marked active and not past their
   ``expires_at``: a newcomer does not mark an expired one) are at most one
   per type and are the active item (``ledger.notifications.check``).

This module adds:

4. all or nothing: every customer leg of every transaction record has its
   history entry with the same transaction, amount and balance, and every
   entry is named by exactly one leg; an authorisation's hold row exists with
   the amounts its record holds, and a capture or void left its hold captured
   or voided. Records are found from the table alone, never through an index
   (eventually consistent on DynamoDB) nor a scan: the records named by the
   account's history entries, and those of each hold row (the authorisation
   and its capture, void, expiry or release), read by key;

and, from the clients' logs (invariant 3 seen from outside): every
acknowledged key has its transaction record, every rejected key has none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

from tallybook.domain.ids import is_system_account
from tallybook.domain.model import Transaction
from tallybook.ledger import Ledger
from tallybook.services.ledger.refusals import is_refusal
from tallybook.store.records.codec import transaction_from_item
from tallybook.store.records.ledger import read_transactions
from tallybook.store.records.notifications import history_rows
from tallybook.store.records.wallet import read_hold, read_holds

_SETTLED = {"capture": "captured", "void": "voided", "expire": "expired", "release": "released"}


@dataclass
class CheckResult:
    counts: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)


def check_program(
    ledger: Ledger, program: str, acked: Sequence[str] = (), rejected: Sequence[str] = ()
) -> CheckResult:
    result = CheckResult()
    core = ledger.check.program(program)
    result.counts.update(
        accounts=core.accounts, entries=core.entries, transactions=core.transactions
    )
    result.violations += core.violations
    accounts = list(ledger.accounts.list_ids(program))
    entries = _entries(ledger, program, accounts)
    named: Counter[tuple[str, str, int]] = Counter()
    checked: set[str] = set()  # a transfer's record is found from both accounts
    for account in accounts:
        for txn in _records(ledger, program, account, entries):
            if txn.id in checked:
                continue
            checked.add(txn.id)
            result.counts["records"] += 1
            _check_record(ledger, program, txn, entries, named, result)
        _count_notifications(ledger, program, account, result)
    for where in entries.keys() - named.keys():
        result.violations.append(f"invariant 4: entry {where} is named by no transaction record")
    for where, n in named.items():
        if n > 1:
            result.violations.append(f"invariant 4: entry {where} is named by {n} legs")
    _check_keys(ledger, program, acked, rejected, result)
    return result


def _entries(
    ledger: Ledger, program: str, accounts: Iterable[str]
) -> dict[tuple[str, str, int], tuple[str, int, int]]:
    """(account, fund, seq) -> (txn id, amount, balance) of every entry."""
    funds = [f.name for f in ledger.programs.get(program).funds]
    out: dict[tuple[str, str, int], tuple[str, int, int]] = {}
    for account in accounts:
        for fund in funds:
            for e in ledger.accounts.iter_history(program, account, fund):
                out[(account, fund, e.seq)] = (e.txn_id, e.amount, e.balance)
    return out


def _records(
    ledger: Ledger,
    program: str,
    account: str,
    entries: dict[tuple[str, str, int], tuple[str, int, int]],
) -> Iterable[Transaction]:
    """The account's transaction records, read by key (see invariant 4 above).

    A record that leaves no entry of the account and names no hold row (a
    hold's rows expire 90 days after it settled) is not found here; the
    owner index lists it (:meth:`TransactionService.for_owner`)."""
    ids = {txn for (owner, _, _), (txn, _, _) in entries.items() if owner == account}
    for hold in read_holds(ledger.store, program, account):
        ids |= {hold.id, *(f"{hold.id}:{suffix}" for suffix in _SETTLED)}
    for item in read_transactions(ledger.store, program, sorted(ids)):
        if not is_refusal(item):
            yield transaction_from_item(item)


def _check_record(
    ledger: Ledger,
    program: str,
    txn: Transaction,
    entries: dict[tuple[str, str, int], tuple[str, int, int]],
    named: Counter[tuple[str, str, int]],
    result: CheckResult,
) -> None:
    for leg in txn.legs:
        if is_system_account(leg.account):
            continue
        where = (leg.account, leg.fund, leg.seq or 0)
        named[where] += 1
        found = entries.get(where)
        if found != (txn.id, leg.amount, leg.balance):
            result.violations.append(
                f"invariant 4: transaction {txn.id} leg {where} amount {leg.amount} "
                f"balance {leg.balance} has entry {found}"
            )
    hold_id = txn.details.get("hold_id")
    if not isinstance(hold_id, str):
        return
    owner = cast(str, txn.details.get("account"))
    hold = read_hold(ledger.store, program, owner, hold_id)
    result.counts["hold_records"] += 1
    if hold is None:
        result.violations.append(f"invariant 4: transaction {txn.id} names missing hold {hold_id}")
        return
    if txn.id == hold_id and txn.type == "authorize" and hold.amounts != txn.details.get("held"):
        result.violations.append(
            f"invariant 4: hold {hold_id} amounts {hold.amounts} != its record's "
            f"{txn.details.get('held')}"
        )
    suffix = txn.id[len(hold_id) + 1 :] if txn.id.startswith(f"{hold_id}:") else ""
    if suffix in _SETTLED and str(hold.status) != _SETTLED[suffix]:
        result.violations.append(
            f"invariant 4: {txn.id} applied but hold {hold_id} is {hold.status}"
        )


def _count_notifications(ledger: Ledger, program: str, account: str, result: CheckResult) -> None:
    """Invariant 6 is ``ledger.check``'s; the report counts the history rows it read."""
    result.counts["notifications"] += sum(1 for _ in history_rows(ledger.store, program, account))


def _check_keys(
    ledger: Ledger,
    program: str,
    acked: Sequence[str],
    rejected: Sequence[str],
    result: CheckResult,
) -> None:
    for label, wanted, must_exist in (("acked", acked, True), ("rejected", rejected, False)):
        ids = sorted(set(wanted))
        result.counts[label] = len(ids)
        for start in range(0, len(ids), 100):
            chunk = ids[start : start + 100]
            found = {  # a refusal record (a final insufficient-funds answer) applied nothing
                str(i["txn_id"])
                for i in read_transactions(ledger.store, program, chunk)
                if not is_refusal(i)
            }
            for txn_id in chunk:
                if must_exist and txn_id not in found:
                    result.violations.append(
                        f"invariant 3: acknowledged transaction {txn_id} has no record (lost)"
                    )
                if not must_exist and txn_id in found:
                    result.violations.append(
                        f"invariant 3: rejected transaction {txn_id} has a record (applied)"
                    )
