"""``Ledger``: the Python API, one object per store, composed of capability services."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from tallybook.errors import ConfigError
from tallybook.services.clock import Clock, SystemClock, check_clock
from tallybook.services.ledger.core import LedgerCore
from tallybook.services.loyalty import tiers as loyalty_tiers
from tallybook.services.notifications import triggers
from tallybook.services.responses import StoredResponses
from tallybook.store.port import ItemStore
from tallybook.store.url import open_store
from tallybook.webhooks.log import install as install_event_log

if TYPE_CHECKING:
    from tallybook.services.apikeys import KeyService
    from tallybook.services.billing.service import BillingService
    from tallybook.services.ledger.check import CheckService
    from tallybook.services.loyalty.service import LoyaltyService
    from tallybook.services.notifications.service import NotificationService
    from tallybook.services.wallet.service import WalletService
    from tallybook.webhooks.service import WebhookService


class Ledger:
    """Everything tallybook does, over one store.

    >>> ledger = Ledger.open("sqlite:///demo.db")        # doctest: +SKIP
    >>> ledger.programs.create("shop")                    # doctest: +SKIP

    Open one with :meth:`open` (a store URL) or ``Ledger(store, clock=...)``;
    ``with Ledger.open(url) as ledger:`` closes the store at the end. Its
    capabilities, each an attribute (see README.md and docs/*.md):

    - ``programs``: create, get, list, settings, low-balance thresholds
    - ``accounts``: open, get, balances, history
    - ``transactions``: credit, debit, adjust, transfer, post, get, for_owner,
      for_order, system balances
    - ``wallet``: credit, debit across funds, grants, holds (authorize,
      capture, void), held credits (docs/wallet.md)
    - ``loyalty``: earn, redeem, tiers, expiry (docs/loyalty.md)
    - ``notifications``: per-account notices and their rules (docs/notifications.md)
    - ``billing``: partner records, buckets and reports (docs/billing.md)
    - ``webhooks``: signed event subscriptions (docs/webhooks.md)
    - ``check``: the invariants (``ledger.check.program("shop").ok``)
    - ``keys``: the HTTP API's keys

    Amounts are integers in minor units; times are aware UTC datetimes; the
    results are frozen dataclasses; every error is a
    :class:`tallybook.errors.TallybookError`. A write given the same id again
    replays (``.replay`` is true) and with a different request raises
    :class:`~tallybook.errors.IdempotencyConflict`.
    """

    def __init__(self, store: ItemStore, *, clock: Clock | None = None) -> None:
        if not isinstance(store, ItemStore):  # a URL or path: an AttributeError at first use
            raise ConfigError(
                f"Ledger(store) takes an ItemStore, not {type(store).__name__}; "
                "to open a store URL use Ledger.open(url)"
            )
        core = LedgerCore.build(store, clock)
        self.core = core
        self.store = store
        self.clock: Clock = core.clock
        if not isinstance(self.clock, SystemClock):
            # TTLs are written on this clock's time: the store reads them on it too
            store.read_ttl_by(self.clock.now)
        self.programs = core.programs
        self.accounts = core.accounts
        self.engine = core.engine
        self.transactions = core.transactions
        self.events = core.events
        self.responses = StoredResponses(store, self.clock)
        install_event_log(store)
        self._attach_subscribers()

    def _attach_subscribers(self) -> None:
        """Capabilities that react to ledger events subscribe when the ledger opens."""
        triggers.attach(self.notifications, engine=self.engine, events=self.events)
        loyalty_tiers.attach(self.engine, self.events)

    @classmethod
    def open(cls, url: str | None = None, *, clock: Clock | None = None) -> Ledger:
        """Open the store a URL names; default ``$TALLYBOOK_STORE`` or ``./tallybook.db``."""
        if clock is not None:
            check_clock(clock)  # before the store: a refusal makes no SQLite file
        return cls(open_store(url), clock=clock)

    def close(self) -> None:
        """Close the store's connections and background threads (idempotent). It is
        final: every later call raises :class:`~tallybook.errors.StoreClosed`."""
        self.store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- capabilities (created on first use) --------------------------------

    @cached_property
    def check(self) -> CheckService:
        from tallybook.services.ledger.check import CheckService

        core = self.core
        return CheckService(
            core.store,
            core.programs,
            core.accounts,
            core.transactions,
            account_checks=(
                (2, self.wallet.check_balances),
                (None, self.wallet.charges_due),
                (6, self.notifications.check),
            ),
        )

    @cached_property
    def wallet(self) -> WalletService:
        from tallybook.services.wallet.service import WalletService

        return WalletService(self.core)

    @cached_property
    def loyalty(self) -> LoyaltyService:
        from tallybook.services.loyalty.service import LoyaltyService

        return LoyaltyService(self.core)

    @cached_property
    def notifications(self) -> NotificationService:
        from tallybook.services.notifications.service import NotificationService

        return NotificationService(self.store, self.clock, self.programs, self.accounts)

    @cached_property
    def billing(self) -> BillingService:
        from tallybook.services.billing.service import BillingService

        return BillingService(self.store, self.clock, self.programs)

    @cached_property
    def webhooks(self) -> WebhookService:
        from tallybook.webhooks.service import WebhookService

        return WebhookService(self.store, self.clock, self.programs)

    @cached_property
    def keys(self) -> KeyService:
        from tallybook.services.apikeys import KeyService

        return KeyService(self.store, self.clock, self.programs)
