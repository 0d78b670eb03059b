"""The notifications capability: per-account notifications.

Use cases (``service.NotificationService``): add (one active per type, the
old one dismissed by the newcomer: ``add``), list, dismiss by id or type
(``dismiss``), history with TTL, rules per type, delivery through a hook
(``delivery``), notifications the ledger raises itself (``triggers``), and
inbound events over SNS or NDJSON (``ingest``). ``items`` keeps its rows.
"""
