"""Bad input gets a clear error from tallybook.errors and changes nothing.

Each group runs its cases against one ledger (one DynamoDB table), checking
after every case that balances, versions, histories and system accounts are
exactly as before and that the transaction id was not consumed.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest

from tallybook.domain.model import FundSpec, Leg
from tallybook.errors import (
    IdempotencyConflict,
    InsufficientFunds,
    NotFound,
    TallybookError,
    ValidationError,
)
from tallybook.ledger import Ledger

from .ledger_helpers import PROGRAM, open_accounts, state

pytestmark = pytest.mark.unit  # services only: memory stands in for SQLite

Case = tuple[str, Callable[[Ledger], object], type[TallybookError], str]


def _run(ledger: Ledger, cases: list[Case]) -> None:
    open_accounts(ledger, "alice", "bob")
    ledger.transactions.credit(PROGRAM, "alice", "points", 100, txn_id="seed")
    ledger.transactions.credit(PROGRAM, "alice", "cash", 100, txn_id="seed-cash")
    before = state(ledger, "alice", "bob")
    for name, call, error, message in cases:
        with pytest.raises(TallybookError) as info:
            call(ledger)
        exc = info.value
        assert type(exc) is error, f"{name}: {type(exc).__name__}: {exc}"
        assert message in exc.message, f"{name}: {exc.message!r}"
        assert state(ledger, "alice", "bob") == before, f"{name} changed the ledger"
        with pytest.raises(NotFound):
            ledger.transactions.get(PROGRAM, "bad")
    # the refused id was never consumed
    ledger.transactions.credit(PROGRAM, "alice", "points", 1, txn_id="bad")


def credit(amount: object, **kw: object) -> Callable[[Ledger], object]:
    args = {"account": "alice", "fund": "points", "txn_id": "bad", **kw}

    def call(led: Ledger) -> object:
        return led.transactions.credit(
            str(kw.get("program", PROGRAM)),
            args["account"],  # type: ignore[arg-type]
            args["fund"],  # type: ignore[arg-type]
            amount,  # type: ignore[arg-type]
            txn_id=args["txn_id"],  # type: ignore[arg-type]
            **{k: v for k, v in kw.items() if k in ("order_id", "description", "metadata")},  # type: ignore[arg-type]
        )

    return call


def test_bad_amounts(ledger: Ledger) -> None:
    too_big = 10**15 + 1
    cases: list[Case] = [
        ("credit zero", credit(0), ValidationError, "must be positive"),
        ("credit negative", credit(-5), ValidationError, "must be positive"),
        ("credit float", credit(1.5), ValidationError, "must be an integer"),
        ("credit whole float", credit(10.0), ValidationError, "must be an integer"),
        ("credit decimal", credit(Decimal(3)), ValidationError, "must be an integer"),
        ("credit string", credit("10"), ValidationError, "must be an integer"),
        ("credit bool", credit(True), ValidationError, "must be an integer"),
        ("credit None", credit(None), ValidationError, "must be an integer"),
        ("credit oversized", credit(too_big), ValidationError, "exceeds the maximum"),
        (
            "debit zero",
            lambda led: led.transactions.debit(PROGRAM, "alice", "points", 0, txn_id="bad"),
            ValidationError,
            "must be positive",
        ),
        (
            "debit negative",
            lambda led: led.transactions.debit(PROGRAM, "alice", "points", -1, txn_id="bad"),
            ValidationError,
            "must be positive",
        ),
        (
            "debit float",
            lambda led: led.transactions.debit(PROGRAM, "alice", "points", 0.5, txn_id="bad"),  # type: ignore[arg-type]
            ValidationError,
            "must be an integer",
        ),
        (
            "debit oversized",
            lambda led: led.transactions.debit(PROGRAM, "alice", "points", too_big, txn_id="bad"),
            ValidationError,
            "exceeds the maximum",
        ),
        (
            "debit too much",
            # an insufficient-funds refusal is final for its id (issue 17): ids of their own
            lambda led: led.transactions.debit(PROGRAM, "alice", "points", 101, txn_id="short-1"),
            InsufficientFunds,
            "available 100",
        ),
        (
            "adjust zero",
            lambda led: led.transactions.adjust(PROGRAM, "alice", "points", 0, txn_id="bad"),
            ValidationError,
            "must not be zero",
        ),
        (
            "adjust oversized",
            lambda led: led.transactions.adjust(PROGRAM, "alice", "points", -too_big, txn_id="bad"),
            ValidationError,
            "exceeds the maximum",
        ),
        (
            "transfer zero",
            lambda led: led.transactions.transfer(
                PROGRAM, "alice", "bob", "points", 0, txn_id="bad"
            ),
            ValidationError,
            "must be positive",
        ),
        (
            "transfer negative",
            lambda led: led.transactions.transfer(
                PROGRAM, "alice", "bob", "points", -10, txn_id="bad"
            ),
            ValidationError,
            "must be positive",
        ),
        (
            "transfer too much",
            lambda led: led.transactions.transfer(
                PROGRAM, "alice", "bob", "points", 101, txn_id="short-2"
            ),
            InsufficientFunds,
            "alice",
        ),
    ]
    _run(ledger, cases)


def test_unknown_or_malformed_names(ledger: Ledger) -> None:
    cases: list[Case] = [
        ("unknown account", credit(1, account="ghost"), NotFound, "account ghost not found"),
        ("unknown fund", credit(1, fund="gems"), NotFound, "no fund 'gems'"),
        ("malformed fund", credit(1, fund="Points!"), ValidationError, "fund"),
        ("unknown program", credit(1, program="nope"), NotFound, "program nope not found"),
        ("empty account", credit(1, account=""), ValidationError, "account is required"),
        ("account with slash", credit(1, account="a/b"), ValidationError, "may hold only"),
        ("oversized account", credit(1, account="a" * 129), ValidationError, "longer than 128"),
        ("empty txn id", credit(1, txn_id=""), ValidationError, "transaction id is required"),
        ("oversized txn id", credit(1, txn_id="t" * 129), ValidationError, "longer than 128"),
        ("txn id with space", credit(1, txn_id="a b"), ValidationError, "may hold only"),
        ("empty order id", credit(1, order_id=""), ValidationError, "order id is required"),
        ("oversized order id", credit(1, order_id="o" * 129), ValidationError, "longer than"),
        ("long description", credit(1, description="d" * 501), ValidationError, "description"),
        (
            "big metadata",
            credit(1, metadata={f"k{i}": "v" for i in range(17)}),
            ValidationError,
            "metadata",
        ),
        ("non-string metadata", credit(1, metadata={"k": 1}), ValidationError, "metadata"),
        (
            "transfer to unknown account",
            lambda led: led.transactions.transfer(
                PROGRAM, "alice", "ghost", "points", 10, txn_id="bad"
            ),
            NotFound,
            "ghost",
        ),
        (
            "transfer to self",
            lambda led: led.transactions.transfer(
                PROGRAM, "alice", "alice", "points", 10, txn_id="bad"
            ),
            ValidationError,
            "two different accounts",
        ),
        (
            "replay with another body",
            lambda led: led.transactions.credit(PROGRAM, "alice", "points", 99, txn_id="seed"),
            IdempotencyConflict,
            "seed",
        ),
    ]
    _run(ledger, cases)


def _post(legs: list[Leg], txn_id: str = "bad") -> Callable[[Ledger], object]:
    return lambda led: led.transactions.post(PROGRAM, legs, txn_id=txn_id)


def test_bad_postings(ledger: Ledger) -> None:
    cases: list[Case] = [
        ("no legs", _post([]), ValidationError, "at least one posting"),
        (
            "unbalanced",
            _post([Leg("alice", "points", 5), Leg("@issuance", "points", -4)]),
            ValidationError,
            "do not balance",
        ),
        (
            "balanced across units only",
            _post([Leg("alice", "points", 5), Leg("@external", "cash", -5)]),
            ValidationError,
            "do not balance",
        ),
        (
            "unknown system account",
            _post([Leg("alice", "points", 5), Leg("@bogus", "points", -5)]),
            NotFound,
            "unknown system account @bogus",
        ),
        (
            "same fund twice",
            _post([Leg("bob", "points", 5), Leg("bob", "points", 5), Leg("alice", "points", -10)]),
            ValidationError,
            "appears twice",
        ),
        (
            "too many legs",
            _post([Leg("alice" if i % 2 else "bob", "points", 1) for i in range(25)]),
            ValidationError,
            "at most 24",
        ),
        (
            "zero leg",
            _post([Leg("alice", "points", 0), Leg("@issuance", "points", 0)]),
            ValidationError,
            "must not be zero",
        ),
        (
            "float leg",
            _post([Leg("alice", "points", 1.0), Leg("@issuance", "points", -1.0)]),  # type: ignore[arg-type]
            ValidationError,
            "must be an integer",
        ),
        (
            "unopened account among legs",
            _post([Leg("alice", "points", -5), Leg("ghost", "points", 5)]),
            NotFound,
            "ghost",
        ),
        (
            "one leg short of funds",
            _post(
                [
                    Leg("alice", "points", -5),
                    Leg("bob", "points", 5),
                    Leg("bob", "cash", -1),
                    Leg("alice", "cash", 1),
                ],
                txn_id="short-3",  # a final refusal takes its id
            ),
            InsufficientFunds,
            "bob",
        ),
    ]
    _run(ledger, cases)


def test_a_program_beyond_the_item_limits_is_refused(ledger: Ledger) -> None:
    # a 300 KB display name was stored (on DynamoDB a program item read at
    # every cache miss for ~75 RCU); at 500 KB the store refused it with
    # ItemTooLarge instead of a ValidationError; funds were not counted at all
    from tallybook.domain.model import FundSpec

    with pytest.raises(ValidationError, match="name must be a string of at most 200"):
        ledger.programs.create("big-name", name="x" * 500_000)
    many = [FundSpec(f"f{i}", "points") for i in range(101)]
    with pytest.raises(ValidationError, match="at most 100 funds"):
        ledger.programs.create("many-funds", funds=many)
    assert "big-name" not in ledger.programs.list()
    assert "many-funds" not in ledger.programs.list()
    assert ledger.programs.create("ok-name", name="x" * 200, funds=many[:100]).name == "x" * 200


@pytest.mark.parametrize(
    ("funds", "settings", "message"),
    [
        # AttributeError: 'str' object has no attribute 'name'
        ("cash", None, "funds must be a sequence of FundSpec"),
        ([None], None, "funds must be a sequence of FundSpec"),
        # stored as "no", which reads as true: the fund allowed overdrafts
        (
            [FundSpec("cash", "USD", allow_overdraft="no")],  # type: ignore[arg-type]
            None,
            "allow_overdraft must be true or false",
        ),
        # beyond the largest amount (HTTP refused it, the Python API stored it)
        ([FundSpec("cash", "USD", low_balance_threshold=2**64)], None, "from 0 to 10000"),
        (None, 5, "settings must be a mapping"),
    ],
)
def test_a_program_with_malformed_funds_or_settings_is_refused(
    ledger: Ledger, funds: object, settings: object, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        ledger.programs.create("malformed", funds=funds, settings=settings)  # type: ignore[arg-type]
    assert "malformed" not in ledger.programs.list()


def test_a_low_balance_threshold_beyond_the_largest_amount_is_refused(ledger: Ledger) -> None:
    open_accounts(ledger, "alice")
    before = ledger.programs.get(PROGRAM, fresh=True).fund("cash")
    with pytest.raises(ValidationError, match="from 0 to 1000000000000000"):
        ledger.programs.set_low_balance_threshold(PROGRAM, "cash", 10**15 + 1)
    assert ledger.programs.get(PROGRAM, fresh=True).fund("cash") == before
    program = ledger.programs.set_low_balance_threshold(PROGRAM, "cash", 10**15)
    assert program.fund("cash").low_balance_threshold == 10**15  # type: ignore[union-attr]


@pytest.mark.parametrize("settings", [5, True, ["x"], "rules"])
def test_settings_that_are_not_a_mapping_are_refused(ledger: Ledger, settings: object) -> None:
    # were stored: every later read of the rules raised AttributeError
    # ('int' object has no attribute 'get') for the program, for ever
    with pytest.raises(ValidationError, match="settings must be a mapping"):
        ledger.programs.update_settings(PROGRAM, settings)  # type: ignore[arg-type]
    assert ledger.notifications.rules(PROGRAM) is not None
    assert isinstance(ledger.programs.get(PROGRAM, fresh=True).settings, dict)


def test_system_balances_of_an_unknown_or_malformed_program_are_refused(ledger: Ledger) -> None:
    # answered {} (no such program reads as nothing posted)
    with pytest.raises(NotFound, match="program nope not found"):
        ledger.transactions.system_balance("nope", "@external")
    with pytest.raises(NotFound, match="program nope not found"):
        ledger.transactions.system_balances("nope")
    with pytest.raises(ValidationError, match="program id"):
        ledger.transactions.system_balance(1.5, "@external")  # type: ignore[arg-type]


def test_the_transactions_of_an_order_in_an_unknown_program_are_refused(ledger: Ledger) -> None:
    # answered [] (no such program read as an order with no transactions)
    with pytest.raises(NotFound, match="program nope not found"):
        ledger.transactions.for_order("nope", "order-1")
    assert ledger.transactions.for_order(PROGRAM, "order-1") == []


def test_an_overlong_grant_or_held_credit_id_names_the_txn_id(ledger: Ledger) -> None:
    # the caller passed txn_id, and was told "a hold id has at most 100 characters"
    open_accounts(ledger, "alice")
    with pytest.raises(
        ValidationError, match=r"a grant's txn_id \(also its hold id\) is longer than 100"
    ):
        ledger.wallet.grant(PROGRAM, "alice", 5, txn_id="g" * 101, expires_in_days=1)
    with pytest.raises(ValidationError, match=r"a held credit's txn_id .* is longer than 100"):
        ledger.wallet.credit_held(PROGRAM, "alice", "cash", 5, txn_id="r" * 101, release_in_days=1)
    with pytest.raises(ValidationError, match="hold id is longer than 100"):
        ledger.wallet.authorize(PROGRAM, "alice", 5, hold_id="h" * 101)
    assert ledger.wallet.grant(PROGRAM, "alice", 5, txn_id="g" * 100, expires_in_days=1).funds


@pytest.mark.parametrize("flag", ["no", 0, 1, None])
def test_a_flag_that_is_not_a_bool_is_refused(ledger: Ledger, flag: object) -> None:
    # "no" read as true: newest_first="no" listed newest first, and
    # allow_http="no" let a loopback http:// URL through
    open_accounts(ledger, "alice")
    calls: list[Callable[[], object]] = [
        lambda: ledger.accounts.history(PROGRAM, "alice", "cash", newest_first=flag),  # type: ignore[arg-type]
        lambda: ledger.notifications.history(PROGRAM, "alice", newest_first=flag),  # type: ignore[arg-type]
        lambda: ledger.wallet.grants(PROGRAM, "alice", include_expired=flag),  # type: ignore[arg-type]
        lambda: ledger.wallet.holds(PROGRAM, "alice", active_only=flag),  # type: ignore[arg-type]
        lambda: ledger.webhooks.create(PROGRAM, "http://127.0.0.1:9/h", allow_http=flag),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(ValidationError, match="must be True or False"):
            call()
    assert ledger.webhooks.list(PROGRAM) == []


_ID_KINDS: list[tuple[str, int, Callable[[Ledger, str], object]]] = [
    ("program id", 128, lambda led, v: led.accounts.open(v, "carol")),
    ("account", 128, lambda led, v: led.wallet.credit(PROGRAM, v, "cash", 5, txn_id="t-acc")),
    (
        "transaction id",
        128,
        lambda led, v: led.transactions.credit(PROGRAM, "alice", "cash", 5, txn_id=v),
    ),
    ("hold id", 100, lambda led, v: led.wallet.authorize(PROGRAM, "alice", 5, hold_id=v)),
    (
        r"a grant's txn_id \(also its hold id\)",
        100,
        lambda led, v: led.wallet.grant(PROGRAM, "alice", 5, txn_id=v, expires_in_days=1),
    ),
    (
        r"a held credit's txn_id \(also its hold id\)",
        100,
        lambda led, v: led.wallet.credit_held(
            PROGRAM, "alice", "cash", 5, txn_id=v, release_in_days=1
        ),
    ),
    ("hold id", 100, lambda led, v: led.wallet.capture(PROGRAM, v)),
    ("order id", 122, lambda led, v: led.loyalty.earn(PROGRAM, "alice", v, 100)),
]


@pytest.mark.parametrize(("what", "limit", "call"), _ID_KINDS)
def test_every_id_kind_states_its_own_length_limit(
    ledger: Ledger, what: str, limit: int, call: Callable[[Ledger, str], object]
) -> None:
    # a missing hold id was "required (1-128 characters)", and one of 129 "longer
    # than 128 characters", though hold ids are limited to 100
    open_accounts(ledger, "alice")
    ledger.wallet.credit(PROGRAM, "alice", "cash", 100, txn_id="seed-cash")
    with pytest.raises(ValidationError, match=rf"^{what} is required \(1-{limit} characters\)$"):
        call(ledger, "")
    for length in (limit + 1, 129):
        with pytest.raises(ValidationError, match=rf"^{what} is longer than {limit} characters$"):
            call(ledger, "x" * length)
