"""The wallet capability: cash, store credit and bonus grants per owner.

Use cases (``service.WalletService``): balances per fund (total, withheld,
available), credits and grants, debits that spend bonus first, then store
credit, then cash (``debit``), external charges for a shortfall (``charges``),
holds: authorize, capture, void, expire (``holds``, ``settle``), wallet
transaction records per owner (``records``), and the reconcile job (``jobs``).
``rows`` and ``marks`` keep its rows and head marks.
"""
