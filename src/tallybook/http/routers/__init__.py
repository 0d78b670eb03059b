"""One router per capability, all under ``/v1``."""
