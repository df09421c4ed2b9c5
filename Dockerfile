# mcp-tap as a sidecar (docs: README "Deployment"). Build and run:
#   docker build -t mcp-tap .
#   docker run -p 8080:8080 -p 9464:9464 -e MCP_TAP_HOP_UPSTREAM=http://origin:9000 \
#     -v mcp-tap-evidence:/evidence mcp-tap
# The proxy listens on 0.0.0.0:8080 inside the container (MCP_TAP_HOP_LISTEN), the admin
# listener (/healthz /readyz /metrics) on 0.0.0.0:9464 (MCP_TAP_ADMIN_LISTEN); flags after
# the image name (e.g. `proxy --upstream ...`) and any MCP_TAP_* variable override them.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Stage 1: the mcp-tap wheel (the only thing built from source).
FROM ${PYTHON_IMAGE} AS wheel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY mcp_tap ./mcp_tap
RUN pip wheel --no-deps --wheel-dir /wheels .

# Stage 2: the runtime: pinned, hash-checked dependencies, then the wheel without resolving.
FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="mcp-tap" \
      org.opencontainers.image.description="A transparent, conformance-recording reverse proxy for MCP over Streamable HTTP" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY requirements.lock ./
RUN pip install --no-deps --require-hashes -r requirements.lock
COPY --from=wheel /wheels /wheels
# uid 10001, group 0: the evidence directory is owned by both and group-writable (setgid), so
# the image works as built, under `--user "$(id -u):0"` and under an arbitrary uid with gid 0
# (OpenShift). A bind mount must be writable by the uid the container runs as (README).
RUN pip install --no-deps /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --gid 0 --home-dir /nonexistent --shell /usr/sbin/nologin tap \
    && mkdir -p /evidence \
    && chown 10001:0 /evidence \
    && chmod 2775 /evidence
COPY config ./config

USER 10001:0
VOLUME ["/evidence"]
# Proxy traffic, and the admin listener (health, readiness, metrics).
EXPOSE 8080 9464
ENV MCP_TAP_HOP_LISTEN=0.0.0.0:8080 \
    MCP_TAP_ADMIN_LISTEN=0.0.0.0:9464 \
    MCP_TAP_EVIDENCE_DIR=/evidence

HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=2); sys.exit(0)"]

# SIGTERM drains in-flight exchanges and flushes evidence before exit.
STOPSIGNAL SIGTERM
ENTRYPOINT ["mcp-tap"]
# The upstream comes from MCP_TAP_HOP_UPSTREAM (or `proxy --upstream URL`).
CMD ["proxy"]
