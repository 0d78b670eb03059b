"""The HTTP service: FastAPI app, routers per capability, problem+json errors."""
