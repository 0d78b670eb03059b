"""Repositories: how each aggregate is stored (keys, item encoding and decoding).

Services describe what they want in domain values; the modules here turn those
into the port's items and actions and back, so no service spells a ``pk`` or an
attribute name of the ledger's items. ``codec`` holds the value encodings that
every aggregate shares (times, programs); ``ledger`` owns account heads,
history entries, transaction records and system-account counters.
"""
