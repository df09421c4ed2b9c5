# mcp-tap as a sidecar: docker build -t mcp-tap . && docker run -p 8080:8080 mcp-tap \
#   proxy --listen 0.0.0.0:8080 --upstream http://origin:9000 --evidence /evidence
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY mcp_tap ./mcp_tap
COPY config ./config
RUN pip install --no-compile . \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin tap \
    && mkdir -p /evidence && chown tap /evidence

USER tap
VOLUME ["/evidence"]
# Proxy traffic, and the admin listener (health, readiness, metrics).
EXPOSE 8080 9464
ENV MCP_TAP_EVIDENCE_DIR=/evidence MCP_TAP_ADMIN_LISTEN=0.0.0.0:9464

HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=2); sys.exit(0)"]

# SIGTERM drains in-flight exchanges and flushes evidence before exit.
STOPSIGNAL SIGTERM
ENTRYPOINT ["mcp-tap"]
CMD ["proxy", "--config", "config/tap.toml"]
