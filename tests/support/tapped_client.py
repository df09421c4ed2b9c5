"""Run a client command through an ``mcp-tap proxy`` subprocess (for the conformance suite).

The conformance suite's client scenarios start their own test server and run the client
under test with that server's URL as the last argument. This wrapper is that client
command: it starts ``python -m mcp_tap proxy`` on a free loopback port with the URL's
origin as upstream, runs the real client against the same path on the tap, then stops the
tap with SIGTERM (which drains and flushes the evidence) and exits with the client's
status::

    python tests/support/tapped_client.py EVIDENCE_ROOT CMD... URL

Evidence goes to ``EVIDENCE_ROOT/<scenario>`` (``MCP_CONFORMANCE_SCENARIO``, ``/`` as
``__``). The endpoint is allowlisted for the legacy era (the suite's 2025-era scenarios).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ports import free_port, wait_listening


def main(argv: list[str]) -> int:
    """``EVIDENCE_ROOT CMD... URL``: the client's exit status (3 if the tap never listened)."""
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    evidence_root, command, url = Path(argv[0]), argv[1:-1], argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "unnamed").replace("/", "__")
    evidence = evidence_root / scenario
    evidence.mkdir(parents=True, exist_ok=True)
    parts = urlsplit(url)
    port = free_port()
    env = dict(os.environ)
    env["MCP_TAP_ERAS_LEGACY_ALLOWED"] = "true"
    tap = subprocess.Popen(
        [sys.executable, "-m", "mcp_tap", "proxy", "--listen", f"127.0.0.1:{port}",
         "--upstream", f"{parts.scheme}://{parts.netloc}", "--evidence", str(evidence),
         "--admin", "", "--log-level", "warning"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=(evidence / "proxy.log").open("wb"),
    )
    try:
        if not wait_listening(port, tap, 60):
            print(f"tapped_client: the tap did not listen on {port}", file=sys.stderr)
            return 3
        tapped = urlunsplit((parts.scheme, f"127.0.0.1:{port}", parts.path, parts.query, ""))
        return subprocess.run([*command, tapped], check=False).returncode
    finally:
        tap.terminate()
        try:
            tap.wait(timeout=20)
        except subprocess.TimeoutExpired:
            tap.kill()
            tap.wait(timeout=5)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
