"""Core ledger operations: credit, debit, transfer, adjust and raw balanced postings.

Each customer posting has its other side in a system account: external money
in and out goes through ``@external``, corrections through ``@adjustment``.
Transaction ids are remembered for ever: the transaction record is the
idempotency record and is never expired.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tallybook.domain.ids import check_client_txn_id, check_fund, check_id, is_system_account
from tallybook.domain.model import (
    ADJUSTMENT,
    EXTERNAL,
    SYSTEM_ACCOUNTS,
    Leg,
    Transaction,
    TxnType,
)
from tallybook.domain.money import check_amount, check_signed_amount
from tallybook.domain.postings import check_metadata
from tallybook.errors import NotFound, ValidationError
from tallybook.services.ledger.accounts import check_limit
from tallybook.services.ledger.postings import Plan, PostingEngine, Snapshot
from tallybook.services.ledger.refusals import is_refusal, refusal_error
from tallybook.services.loyalty.values import ORDER_PREFIX
from tallybook.store.queries import bind_cursor, decode_cursor, encode_cursor, unbind_cursor
from tallybook.store.records import ledger as records
from tallybook.store.records.codec import transaction_from_item


@dataclass(frozen=True, slots=True)
class TransactionPage:
    transactions: list[Transaction]
    cursor: str | None


class TransactionService:
    """``ledger.transactions``: balanced postings (credit, debit, adjust, transfer, raw
    legs), each applied once per ``txn_id``, and reading them back."""

    def __init__(self, engine: PostingEngine) -> None:
        self.engine = engine
        self.store = engine.store

    def credit(
        self,
        program: str,
        account: str,
        fund: str,
        amount: int,
        *,
        txn_id: str,
        order_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Transaction:
        """Money or points from outside the program into ``account``'s ``fund``."""
        return self._single(
            TxnType.CREDIT,
            program,
            account,
            fund,
            amount,
            EXTERNAL,
            txn_id,
            order_id,
            description,
            metadata,
        )

    def debit(
        self,
        program: str,
        account: str,
        fund: str,
        amount: int,
        *,
        txn_id: str,
        order_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Transaction:
        """Money or points out of ``account``'s ``fund`` to outside the program."""
        return self._single(
            TxnType.DEBIT,
            program,
            account,
            fund,
            -check_amount(amount),
            EXTERNAL,
            txn_id,
            order_id,
            description,
            metadata,
        )

    def adjust(
        self,
        program: str,
        account: str,
        fund: str,
        amount: int,
        *,
        txn_id: str,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Transaction:
        """A signed correction against the ``@adjustment`` system account."""
        return self._single(
            TxnType.ADJUST,
            program,
            account,
            fund,
            check_signed_amount(amount),
            ADJUSTMENT,
            txn_id,
            None,
            description,
            metadata,
        )

    def transfer(
        self,
        program: str,
        source: str,
        destination: str,
        fund: str,
        amount: int,
        *,
        txn_id: str,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Transaction:
        """Move ``amount`` of ``fund`` between two customer accounts, all or nothing."""
        amount = check_amount(amount)
        check_id(source, "source account")
        check_id(destination, "destination account")
        if source == destination:
            raise ValidationError("a transfer needs two different accounts")
        legs = [Leg(source, fund, -amount), Leg(destination, fund, amount)]
        return self.post(
            program,
            legs,
            txn_id=txn_id,
            type=TxnType.TRANSFER,
            description=description,
            metadata=metadata,
        )

    def post(
        self,
        program: str,
        legs: Sequence[Leg],
        *,
        txn_id: str,
        type: str = TxnType.TRANSFER,
        order_id: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Transaction:
        """A raw balanced transaction: legs must sum to zero per unit."""
        check_client_txn_id(txn_id)
        if not isinstance(legs, list | tuple) or not all(isinstance(leg, Leg) for leg in legs):
            raise ValidationError("legs must be a list of Leg(account, fund, amount)")
        legs = [_plain_amount(leg) for leg in legs]
        metadata = check_metadata(metadata)
        for leg in legs:
            if not isinstance(leg.account, str):
                raise ValidationError("a leg's account must be a string (an account id)")
            if is_system_account(leg.account) and leg.account not in SYSTEM_ACCOUNTS:
                raise NotFound(f"unknown system account {leg.account}")
        body = {
            "op": "post",
            "type": str(type),
            "legs": [[leg.account, leg.fund, leg.amount] for leg in legs],
            "order_id": order_id,
            "description": description,
            "metadata": dict(metadata or {}),
        }

        def plan(_: Snapshot) -> Plan:
            return Plan(
                type=str(type),
                legs=list(legs),
                order_id=order_id,
                description=description,
                metadata=dict(metadata or {}),
            )

        return self.engine.commit(
            program,
            txn_id,
            body,
            plan,
            lock=[leg.account for leg in legs if not is_system_account(leg.account)],
        )

    def _single(
        self,
        type: TxnType,
        program: str,
        account: str,
        fund: str,
        amount: int,
        counter: str,
        txn_id: str,
        order_id: str | None,
        description: str | None,
        metadata: Mapping[str, str] | None,
    ) -> Transaction:
        check_id(account, "account")
        check_fund(fund)
        if type is TxnType.CREDIT:
            amount = check_amount(amount)
        legs = [Leg(account, fund, amount), Leg(counter, fund, -amount)]
        return self.post(
            program,
            legs,
            txn_id=txn_id,
            type=type,
            order_id=order_id,
            description=description,
            metadata=metadata,
        )

    # -- reads --------------------------------------------------------------

    def get(self, program: str, txn_id: str) -> Transaction:
        """The applied transaction ``txn_id`` with its legs, or :class:`NotFound`."""
        check_id(program, "program id")
        check_id(txn_id, "transaction id")
        item = records.read_transaction(self.store, program, txn_id)
        if item is None:
            self.engine.programs.get(program)  # an unknown program is named as such
            raise NotFound(f"transaction {txn_id} not found in program {program}")
        if is_refusal(item):
            raise NotFound(
                f"transaction {txn_id} not found in program {program}: it was refused "
                f"({refusal_error(item).code}) and nothing was applied"
            )
        return transaction_from_item(item)

    def for_order(self, program: str, order_id: str) -> list[Transaction]:
        """Transactions recorded with ``order_id``, oldest first.

        Found through the order index (eventually consistent), plus the order's
        loyalty earn, whose id derives from the order (``order:{order_id}``)
        and which is read by key instead of being indexed."""
        check_id(program, "program id")
        check_id(order_id, "order id")
        self.engine.programs.get(program)  # NotFound for an unknown program
        items = records.order_transactions(self.store, program, order_id)
        earn_id = ORDER_PREFIX + order_id
        if len(earn_id) <= 128 and all(i.get("txn_id") != earn_id for i in items):
            earn = records.read_transaction(self.store, program, earn_id)
            if earn is not None:
                items.append(earn)
        txns = [transaction_from_item(i) for i in items]
        return sorted(txns, key=lambda t: (t.created_at, t.id))

    def for_owner(
        self, program: str, account: str, *, limit: int = 50, cursor: str | None = None
    ) -> TransactionPage:
        """An account's transactions, newest first (no scan).

        Found from the account's own history entries (strongly consistent) and,
        for records that leave no entry of the account (holds, voids), from the
        owner index, which is eventually consistent: such a record may show a
        moment after it was written."""
        check_id(program, "program id")
        check_id(account, "account id")
        check_limit(limit)
        funds = [f.name for f in self.engine.programs.get(program).funds]
        listing = ("transactions", program, account)
        start = unbind_cursor(cursor, *listing)
        position = decode_cursor(start) if start is not None else None
        ids, after = records.owner_transaction_ids(
            self.store, program, account, funds, limit=limit, cursor=position
        )
        found = {
            str(item["txn_id"]): transaction_from_item(item)
            for item in records.read_transactions(self.store, program, ids)
        }
        txns = [found[t] for t in ids if t in found]
        next_cursor = None if after is None else encode_cursor(after)
        return TransactionPage(txns, bind_cursor(next_cursor, *listing))

    def system_balance(self, program: str, account: str) -> dict[str, int]:
        """A system account's balance per fund.

        A system account has no item of its own per posting: its side of each
        posting is counted on the head of an account the posting touched (see
        :mod:`tallybook.store.records.ledger`). So this reads every head of the
        program (a directory query per shard, then batch reads): a job's query,
        not a hot path. Postings without a customer account land on shards."""
        self.engine.programs.get(program)  # NotFound for an unknown program
        if account not in SYSTEM_ACCOUNTS:
            raise NotFound(f"unknown system account {account}")
        return self._system_totals(program, (account,))[account]

    def system_balances(self, program: str) -> dict[str, dict[str, int]]:
        """Every system account's balance per fund (see :meth:`system_balance`)."""
        self.engine.programs.get(program)  # NotFound for an unknown program
        return self._system_totals(program, SYSTEM_ACCOUNTS)

    def _system_totals(self, program: str, systems: Sequence[str]) -> dict[str, dict[str, int]]:
        """The balances per fund of ``systems``: their own shards (16 keys each), then
        their side of the postings counted on every head of the program."""
        totals: dict[str, dict[str, int]] = {a: {} for a in systems}
        for system in systems:
            for fund, amount in records.system_shard_totals(self.store, program, system).items():
                totals[system][fund] = totals[system].get(fund, 0) + amount
        ids = [str(i["account"]) for i in records.iter_directory(self.store, program)]
        for start in range(0, len(ids), 100):
            for head in records.read_heads(self.store, program, ids[start : start + 100]):
                for (system, fund), amount in head.system.items():
                    if system in totals:
                        totals[system][fund] = totals[system].get(fund, 0) + amount
        return totals


def body_of(**fields: Any) -> dict[str, Any]:
    """A request body for fingerprinting: drops None values for stability."""
    return {k: cast(Any, v) for k, v in fields.items() if v is not None}


def _plain_amount(leg: Leg) -> Leg:
    """``leg`` with a plain ``int`` amount where it held an ``int`` subclass (an
    ``IntEnum``), which the transaction would otherwise echo back; a ``bool`` or
    a non-integer is left for :func:`check_legs` to refuse."""
    amount = leg.amount
    if type(amount) is int or not isinstance(amount, int) or isinstance(amount, bool):
        return leg
    return Leg(leg.account, leg.fund, int(amount))
