"""Test helpers for the release gate: rollback evidence and running the gate's CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from mcp_tap.cli import main


def rollback_payload(**changes: Any) -> dict[str, Any]:
    """A valid, unattested rollback payload for version 1.4.2, with ``changes`` applied."""
    return {
        "previousVersion": "1.4.2",
        "admissionEvidenceDigest": "a" * 64,
        "artifactSha256": "b" * 64,
        "descriptorSha256": "c" * 64,
        "registryStatus": "active",
        "healthy": True,
        "routeRestoration": ["route 100% of /mcp to 1.4.2", "drain candidate pods"],
        **changes,
    }


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI and return (exit code, stdout, stderr)."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def gate_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    """Run `mcp-tap gate ARGV --json`: the exit code and the decision, nothing on stderr."""
    code, out, err = run(["gate", *argv, "--json"], capsys)
    assert err == ""
    assert out.count("\n") == 1
    decision: dict[str, Any] = orjson.loads(out)
    return code, decision


def reason_rules(decision: dict[str, Any]) -> list[str]:
    """The gate rule ids of a JSON decision's reasons, in order."""
    return [r["rule"] for r in decision["reasons"]]


def raw_bundle(root: Path, records: list[dict[str, Any]]) -> Path:
    """Write a bundle of ``records`` with the real writer (it adds the integrity fields), so
    the commands that refuse evidence that does not verify read it."""
    from mcp_tap.evidence import EvidenceWriter

    with EvidenceWriter(root) as writer:
        for record in records:
            writer.submit({k: v for k, v in record.items() if k not in ("seq", "prev", "digest")})
    return root
