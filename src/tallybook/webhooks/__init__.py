"""Outbound events and signed, retried webhooks (docs/webhooks.md)."""

from tallybook.webhooks.signing import WebhookVerificationError, sign, verify

__all__ = ["WebhookVerificationError", "sign", "verify"]
