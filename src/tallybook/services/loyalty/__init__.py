"""The loyalty capability: earn, redeem, tiers, lots and expiry.

Use cases (``service.LoyaltyService``): configure rules, earn points for an
order exactly once, redeem, look an order up, member status and tier history,
members of a tier (``tiers``, ``pages``), expiring points (``lots``), and the
expiry and downgrade jobs (``jobs``). ``values`` holds its result types.
"""
