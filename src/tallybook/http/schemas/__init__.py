"""Request and response bodies of the HTTP API, one module per capability
(see :mod:`tallybook.http.schemas.common`)."""
