"""The billing capability: billing records and partner reports.

Use cases (``service.BillingService``): ingest billing records exactly once,
bucketed by time (``rows``, settings in ``state``); run, rerun and list
incremental reports since the stored checkpoint (``reports``) into a
directory or an S3 bucket (``sinks``).
"""
