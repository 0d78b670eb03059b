# syntax=docker/dockerfile:1
# tallybook: the HTTP API, /docs and /admin, as a non-root container.
#   docker build -t tallybook .
#   docker run --rm -p 127.0.0.1:8080:8080 -v tallybook-data:/data tallybook
# See docs/deploy.md ("Container"); compose.yaml runs it on DynamoDB Local.
ARG PYTHON_VERSION=3.12

# --- build: wheels for tallybook and its server and CLI extras --------------
FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels ".[server,cli]"

# --- runtime: the wheels installed offline, no compiler, no source ----------
FROM python:${PYTHON_VERSION}-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# DL3013 (pin versions): --no-index installs exactly the wheels the build stage made
# hadolint ignore=DL3013
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m pip install --no-cache-dir --no-index --find-links /wheels "tallybook[server,cli]" \
    && groupadd --system --gid 10001 tallybook \
    && useradd --system --uid 10001 --gid tallybook --home-dir /data --create-home tallybook
COPY --chmod=0755 deploy/docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
# inside the container tallybook listens on all of its interfaces; publish the
# port on the host's loopback (-p 127.0.0.1:8080:8080) or behind a proxy
ENV TALLYBOOK_STORE=sqlite:////data/tallybook.db \
    TALLYBOOK_HOST=0.0.0.0 \
    TALLYBOOK_PORT=8080
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["docker-entrypoint.sh", "healthcheck"]
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["serve"]
