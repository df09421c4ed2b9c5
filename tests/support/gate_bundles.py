"""Gate test material: exchange records, bundles written by the real writer, the test policy
and attested rollback evidence (shared by the gate, outputs, evidence and canary tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from releases import rollback_payload, run

from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.findings import Finding
from mcp_tap.evidence import EvidenceWriter
from mcp_tap.gate.attest import attest_hmac

T0 = 1_733_150_000.0


SIGNER = "release-controller@prod"


KEY_ENV = "MCP_TAP_TEST_ROLLBACK_KEY"


# A deterministic, non-secret test fixture key.
KEY = "mcp-tap test rollback key, not a secret"


MODERN = "2026-07-28"


def exchange(n: int, *, latency: float = 0.05, tool: dict[str, Any] | None = None,
             findings: tuple[str, ...] = ()) -> dict[str, Any]:
    """Return a modern tools/list exchange record received at T0 + 3n seconds."""
    received = T0 + 3 * n
    result = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private",
              "tools": [tool or {"name": "echo", "description": "Echo",
                                 "inputSchema": {"type": "object"}}]}
    judged = []
    for rule_id in findings:
        entry = CATALOG[rule_id]
        judged.append(Finding(rule_id, entry.code, entry.boundary, "m", "origin").to_json())
    return {
        "kind": "exchange", "hop": "edge", "exchangeId": f"x{n:04d}",
        "traceId": "0" * 32, "client": "127.0.0.1", "era": "modern",
        "method": "tools/list", "rpcId": n,
        "ingress": {"httpMethod": "POST", "path": "/mcp", "headers": [],
                    "body": {"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": {
                        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}},
                    "receivedAt": received},
        "origin": {"status": 200, "headers": [], "contentType": "application/json",
                   "body": {"jsonrpc": "2.0", "id": n, "result": result},
                   "firstByteAt": received + latency / 2, "endAt": received + latency},
        "egress": {"status": 200, "headers": [], "sentAt": received + latency,
                   "endAt": received + latency},
        "tapError": None,
        "findings": judged,
    }


def write_bundle(path: Path, records: list[dict[str, Any]]) -> Path:
    """Write ``records`` into a new bundle at ``path`` with the real writer."""
    with EvidenceWriter(path) as writer:
        for item in records:
            assert writer.submit(item)
    return path


def healthy(path: Path, count: int = 120, **kwargs: Any) -> Path:
    """Write a healthy candidate bundle of ``count`` exchanges over 3 * count seconds."""
    return write_bundle(path, [exchange(n, **kwargs) for n in range(count)])


POLICY = f"""
[health]
min_samples = 100
max_error_rate = 0.01
max_latency_ms = 500.0
min_observation_seconds = 300.0

[rollback]
trusted_signers = ["{SIGNER}"]
hmac_key_env = "{KEY_ENV}"
"""


def write_policy(tmp_path: Path, extra: str = "") -> Path:
    """Write the test policy (plus ``extra`` TOML) and return its path."""
    path = tmp_path / "policy.toml"
    path.write_text(POLICY + extra)
    return path


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put the test HMAC key in the environment variable the policy names."""
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def attested(tmp_path: Path, key_env: None, capsys: pytest.CaptureFixture[str]) -> Path:
    """Return a rollback file attested with HMAC through `mcp-tap attest`."""
    payload = tmp_path / "rollback-payload.json"
    payload.write_bytes(orjson.dumps(rollback_payload()))
    out = tmp_path / "rollback.json"
    code, _, err = run(["attest", str(payload), "--signer", SIGNER, "--hmac-key-env", KEY_ENV,
                        "--out", str(out)], capsys)
    assert (code, err) == (0, "")
    return out


def write_attested(path: Path) -> Path:
    """Write HMAC-attested rollback evidence the test policy trusts at ``path``."""
    path.write_bytes(orjson.dumps(attest_hmac(rollback_payload(), SIGNER, KEY.encode())))
    return path

