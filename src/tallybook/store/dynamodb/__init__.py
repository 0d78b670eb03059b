"""The DynamoDB engine: the storage port on a single table, through boto3's
low-level client.

``store`` is the engine (``DynamoStore``); ``connection`` the client and the
request loop on the retry budget; ``expressions`` compiles typed conditions
and updates into expressions with placeholders; ``values`` converts to and
from DynamoDB's attribute values; ``errors`` maps its error codes; ``tokens``
makes the ClientRequestTokens of transactions; ``table`` creates the table,
its indexes, TTL and stream, and renders it as CloudFormation.
"""

from tallybook.store.dynamodb.store import DynamoStore

__all__ = ["DynamoStore"]
