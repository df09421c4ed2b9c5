"""Running ``mcp-tap`` in-process and asserting its one-line refusals."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_tap.cli import main


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``mcp-tap argv`` in-process; return (exit code, stdout, stderr).

    Argparse usage errors leave ``main`` as ``SystemExit``; their code is the exit code.
    """
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else -1
    out, err = capsys.readouterr()
    return code, out, err


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], fragment: str) -> str:
    """Assert ``argv`` exits 2 with one ``mcp-tap:`` line holding ``fragment``; return it."""
    code, _out, err = cli(argv, capsys)
    assert "Traceback" not in err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("mcp-tap: ") and err.endswith("\n"), err
    assert fragment in err, err
    return err


def exchange(exchange_id: str, method: str = "tools/list", hop: str = "edge") -> dict[str, Any]:
    """A recorded modern exchange whose request body and origin answer are whole."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
    return {
        "kind": "exchange", "hop": hop, "exchangeId": exchange_id, "era": "modern",
        "method": method, "rpcId": 1,
        "messageKind": "request",
        "ingress": {"httpMethod": "POST", "headers": [["Content-Type", "application/json"]],
                    "body": body, "truncated": False},
        "origin": {"status": 200, "headers": [["Content-Type", "application/json"]],
                   "body": answer, "sse": None, "truncated": False},
    }

