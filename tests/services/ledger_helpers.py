"""Helpers for the ledger service tests: opening accounts and snapshotting state."""

from __future__ import annotations

from dataclasses import dataclass

from tallybook.domain.model import SYSTEM_ACCOUNTS, Entry
from tallybook.ledger import Ledger

PROGRAM = "shop"
FUNDS = ("points", "cash", "store_credit", "bonus")


def open_accounts(ledger: Ledger, *accounts: str, program: str = PROGRAM) -> None:
    for account in accounts:
        ledger.accounts.open(program, account)


def balance(ledger: Ledger, account: str, fund: str, program: str = PROGRAM) -> int:
    return ledger.accounts.get(program, account).fund(fund).balance


def history(ledger: Ledger, account: str, fund: str, program: str = PROGRAM) -> list[Entry]:
    """Every entry of a fund, oldest first."""
    return list(ledger.accounts.iter_history(program, account, fund))


@dataclass(frozen=True)
class State:
    """Everything a failed write must leave untouched."""

    balances: dict[tuple[str, str], tuple[int, int, int]]
    versions: dict[str, int]
    entries: dict[tuple[str, str], list[tuple[int, int, str]]]
    system: dict[str, dict[str, int]]


def state(ledger: Ledger, *accounts: str, program: str = PROGRAM) -> State:
    balances: dict[tuple[str, str], tuple[int, int, int]] = {}
    versions: dict[str, int] = {}
    entries: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    for account in accounts:
        acct = ledger.accounts.get(program, account)
        versions[account] = acct.version
        for fund in FUNDS:
            f = acct.fund(fund)
            balances[(account, fund)] = (f.balance, f.held, f.seq)
            entries[(account, fund)] = [
                (e.seq, e.amount, e.txn_id) for e in history(ledger, account, fund, program)
            ]
    # one read of every head for all system accounts (system_balance reads them all per account)
    every = ledger.transactions.system_balances(program)
    system = {s: every[s] for s in SYSTEM_ACCOUNTS}
    return State(balances, versions, entries, system)
