"""Pure posting rules: legs, balancing per unit, fingerprints, applying changes to funds."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tallybook.domain.model import FundSpec, FundState, Leg, PostedLeg, Program
from tallybook.domain.money import MAX_AMOUNT
from tallybook.domain.postings import (
    MAX_DESCRIPTION,
    MAX_LEGS,
    MAX_METADATA_KEYS,
    MAX_METADATA_VALUE,
    FundChange,
    apply_change,
    check_description,
    check_legs,
    check_metadata,
    fingerprint,
    posted_leg,
)
from tallybook.errors import InsufficientFunds, NotFound, ValidationError

PROGRAM = Program(
    id="shop",
    name="Shop",
    currency="USD",
    funds=(
        FundSpec("points", "points"),
        FundSpec("cash", "USD"),
        FundSpec("store_credit", "USD"),
        FundSpec("credit_line", "USD", allow_overdraft=True),
    ),
    created_at=datetime(2026, 1, 1, tzinfo=UTC),
)


# -- check_legs ---------------------------------------------------------------


def test_balanced_legs_pass() -> None:
    check_legs(PROGRAM, [Leg("alice", "points", 10), Leg("@issuance", "points", -10)])


def test_legs_balance_per_unit_not_per_fund() -> None:
    """cash and store_credit share the unit USD: moving between them balances."""
    check_legs(PROGRAM, [Leg("alice", "cash", -5), Leg("alice", "store_credit", 5)])


def test_legs_that_balance_only_across_units_are_refused() -> None:
    legs = [Leg("alice", "points", 10), Leg("@external", "cash", -10)]
    with pytest.raises(ValidationError, match="do not balance per unit"):
        check_legs(PROGRAM, legs)


def test_unbalanced_legs_are_refused_with_the_difference() -> None:
    with pytest.raises(ValidationError, match=r"\{'points': 3\}"):
        check_legs(PROGRAM, [Leg("alice", "points", 10), Leg("@issuance", "points", -7)])


def test_no_legs_is_refused_unless_allowed() -> None:
    with pytest.raises(ValidationError, match="at least one posting"):
        check_legs(PROGRAM, [])
    check_legs(PROGRAM, [], allow_empty=True)


def test_the_same_account_and_fund_twice_is_refused() -> None:
    legs = [
        Leg("alice", "points", 5),
        Leg("alice", "points", 5),
        Leg("@issuance", "points", -10),
    ]
    with pytest.raises(ValidationError, match="appears twice"):
        check_legs(PROGRAM, legs)


def test_too_many_legs_are_refused() -> None:
    legs = [Leg(f"a{i}", "points", 1 if i % 2 else -1) for i in range(MAX_LEGS + 2)]
    with pytest.raises(ValidationError, match=f"at most {MAX_LEGS}"):
        check_legs(PROGRAM, legs)


def test_a_leg_on_an_unknown_fund_is_not_found() -> None:
    with pytest.raises(NotFound, match="no fund 'gems'"):
        check_legs(PROGRAM, [Leg("alice", "gems", 1), Leg("@issuance", "gems", -1)])


@pytest.mark.parametrize("amount", [0, 1.5, MAX_AMOUNT + 1, True])
def test_a_leg_with_a_bad_amount_is_refused(amount: object) -> None:
    legs = [Leg("alice", "points", amount), Leg("@issuance", "points", 1)]  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        check_legs(PROGRAM, legs)


@pytest.mark.parametrize("account", ["", "a/b", "x" * 129])
def test_a_leg_with_a_bad_account_is_refused(account: str) -> None:
    with pytest.raises(ValidationError, match="account"):
        check_legs(PROGRAM, [Leg(account, "points", 1), Leg("@issuance", "points", -1)])


@given(
    st.lists(
        st.tuples(st.sampled_from(["points", "cash", "store_credit"]), st.integers(1, 10**6)),
        min_size=1,
        max_size=MAX_LEGS // 2,
    )
)
def test_any_legs_paired_with_a_system_counterpart_balance(pairs: list[tuple[str, int]]) -> None:
    legs: list[Leg] = []
    for i, (fund, amount) in enumerate(pairs):
        legs += [Leg(f"acct{i}", fund, amount), Leg(f"@external{i}", fund, -amount)]
    check_legs(PROGRAM, legs)
    legs[0] = Leg(legs[0].account, legs[0].fund, legs[0].amount + 1)
    with pytest.raises(ValidationError, match="do not balance"):
        check_legs(PROGRAM, legs)


# -- metadata and description --------------------------------------------------


def test_metadata_is_a_small_map_of_strings() -> None:
    assert check_metadata(None) == {}
    assert check_metadata({"channel": "web"}) == {"channel": "web"}


@pytest.mark.parametrize(
    "metadata",
    [
        {f"k{i}": "v" for i in range(MAX_METADATA_KEYS + 1)},
        {"k": "v" * (MAX_METADATA_VALUE + 1)},
        {"k": 1},
        {"": "v"},
        {"k" * 65: "v"},
        ["not", "a", "map"],
    ],
)
def test_bad_metadata_is_refused(metadata: object) -> None:
    with pytest.raises(ValidationError, match="metadata"):
        check_metadata(metadata)  # type: ignore[arg-type]


def test_description_length_is_bounded() -> None:
    assert check_description(None) is None
    assert check_description("x" * MAX_DESCRIPTION) == "x" * MAX_DESCRIPTION
    with pytest.raises(ValidationError, match="description"):
        check_description("x" * (MAX_DESCRIPTION + 1))
    with pytest.raises(ValidationError, match="description"):
        check_description(5)  # type: ignore[arg-type]


# -- fingerprint ---------------------------------------------------------------


def test_fingerprint_ignores_key_order_but_not_values() -> None:
    a = fingerprint({"op": "post", "legs": [["a", "points", 1]], "order_id": None})
    b = fingerprint({"order_id": None, "legs": [["a", "points", 1]], "op": "post"})
    c = fingerprint({"op": "post", "legs": [["a", "points", 2]], "order_id": None})
    assert a == b
    assert a != c
    assert len(a) == 64


def test_a_stored_fingerprint_is_the_sha256_of_the_canonical_json() -> None:
    """Fingerprints are kept for ever with their transaction ids: the text they
    hash must never change (sorted keys, no spaces, ``str`` for other values)."""
    body = {"op": "credit", "amount": 5, "legs": [{"b": "é", "a": 1}], "at": datetime(2026, 1, 1)}
    canonical = (
        '{"amount":5,"at":"2026-01-01 00:00:00","legs":[{"a":1,"b":"\\u00e9"}],"op":"credit"}'
    )
    assert fingerprint(body) == hashlib.sha256(canonical.encode()).hexdigest()


@given(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=5),
)
def test_fingerprints_are_equal_iff_bodies_are_equal(
    a: dict[str, object], b: dict[str, object]
) -> None:
    assert (fingerprint(a) == fingerprint(b)) == (a == b)


# -- apply_change --------------------------------------------------------------


def test_a_credit_takes_the_next_sequence_and_a_later_timestamp() -> None:
    state = FundState(balance=10, seq=4, last_us=1_000)
    after = apply_change(PROGRAM, "alice", "points", state, FundChange(amount=5), now_us=2_000)
    assert after == FundState(balance=15, held=0, seq=5, last_us=2_000)


def test_the_timestamp_never_goes_backwards_even_if_the_clock_does() -> None:
    state = FundState(balance=10, seq=4, last_us=5_000)
    after = apply_change(PROGRAM, "alice", "points", state, FundChange(amount=1), now_us=3_000)
    assert after.last_us == 5_001


def test_a_debit_beyond_the_balance_is_insufficient_funds() -> None:
    state = FundState(balance=10, seq=1, last_us=1)
    with pytest.raises(InsufficientFunds, match="available 10, needed 11"):
        apply_change(PROGRAM, "alice", "cash", state, FundChange(amount=-11), now_us=2)


def test_a_debit_of_exactly_the_balance_leaves_zero() -> None:
    state = FundState(balance=10, seq=1, last_us=1)
    after = apply_change(PROGRAM, "alice", "cash", state, FundChange(amount=-10), now_us=2)
    assert after.balance == 0


def test_held_amounts_are_not_available() -> None:
    state = FundState(balance=10, held=6, seq=1, last_us=1)
    with pytest.raises(InsufficientFunds, match="available 4, needed 5"):
        apply_change(PROGRAM, "alice", "cash", state, FundChange(amount=-5), now_us=2)
    with pytest.raises(InsufficientFunds):
        apply_change(PROGRAM, "alice", "cash", state, FundChange(held_delta=5), now_us=2)


def test_a_hold_alone_changes_neither_balance_nor_sequence() -> None:
    state = FundState(balance=10, held=0, seq=3, last_us=7)
    after = apply_change(PROGRAM, "alice", "cash", state, FundChange(held_delta=4), now_us=99)
    assert after == FundState(balance=10, held=4, seq=3, last_us=7)
    assert after.available == 6


def test_releasing_more_than_is_held_is_refused() -> None:
    state = FundState(balance=10, held=3, seq=1, last_us=1)
    with pytest.raises(ValidationError, match="negative amount"):
        apply_change(PROGRAM, "alice", "cash", state, FundChange(held_delta=-4), now_us=2)


def test_an_overdraft_fund_may_go_below_zero() -> None:
    after = apply_change(
        PROGRAM, "alice", "credit_line", FundState(), FundChange(amount=-500), now_us=1
    )
    assert after.balance == -500
    assert after.seq == 1


def test_an_increase_is_allowed_even_when_the_fund_is_already_short() -> None:
    """A credit into a fund whose holds exceed its balance must not be refused."""
    state = FundState(balance=-5, held=0, seq=1, last_us=1)
    after = apply_change(PROGRAM, "alice", "cash", state, FundChange(amount=2), now_us=2)
    assert after.balance == -3


def test_a_change_on_an_unknown_fund_is_not_found() -> None:
    with pytest.raises(NotFound):
        apply_change(PROGRAM, "alice", "gems", FundState(), FundChange(amount=1), now_us=1)


@given(st.lists(st.integers(-1000, 1000).filter(bool), max_size=60), st.booleans())
def test_applying_changes_keeps_balance_sequence_and_time_invariants(
    amounts: list[int], overdraft: bool
) -> None:
    fund = "credit_line" if overdraft else "cash"
    state = FundState()
    applied: list[int] = []
    now = 1_000
    for amount in amounts:
        before = state
        try:
            state = apply_change(PROGRAM, "alice", fund, state, FundChange(amount), now_us=now)
        except InsufficientFunds:
            assert not overdraft
            assert before.balance + amount < 0
            continue
        applied.append(amount)
        assert state.seq == before.seq + 1
        assert state.last_us > before.last_us
        if not overdraft:
            assert state.balance >= 0
    assert state.balance == sum(applied)
    assert state.seq == len(applied)


def test_posted_leg_carries_balance_only_for_customer_legs() -> None:
    state = FundState(balance=42, seq=7, last_us=1)
    assert posted_leg(PROGRAM, Leg("alice", "cash", 2), state) == PostedLeg(
        "alice", "cash", "USD", 2, 42, 7
    )
    assert posted_leg(PROGRAM, Leg("@external", "cash", -2), None) == PostedLeg(
        "@external", "cash", "USD", -2
    )
