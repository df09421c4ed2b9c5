"""Records with hostile values at every path, through every reading command in-process.

:func:`base_record` is a full exchange record (SSE, egress, a finding); :func:`all_paths`
every path in it; :func:`run_commands` writes one record with values set at some paths as a
real bundle and runs ``export``, ``report``, ``gate``, ``sdk-diff`` and ``diff`` on it
(reading commands with ``--allow-unverified``, so records the schema passes reach their
consumers). It returns what escaped the CLI's error boundary (a traceback), else None.
Used by the CI test (hypothesis, small) and ``bench/fuzz_commands.py`` (the long run).
"""

from __future__ import annotations

import contextlib
import copy
import io
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp_tap.cli import main
from mcp_tap.evidence import EvidenceWriter

REPO_ROOT = Path(__file__).resolve().parents[2]
HOSTILE = (None, "bogus", "", -1, 0, 1e20, -1e300, 1e-300, 2**63, True, [], {}, [None],
           [[1, 2, 3]], {"x": 1}, "\n", "\u2028")


def base_record() -> dict[str, Any]:
    """A whole exchange record of the writer's shape."""
    answer = {"jsonrpc": "2.0", "id": 0, "result": {"tools": []}}
    return {
        "kind": "exchange", "hop": "edge", "exchangeId": "e0", "era": "modern",
        "method": "tools/list", "rpcId": 0, "messageKind": "request",
        "ingress": {"httpMethod": "POST", "path": "/mcp", "receivedAt": 1_700_000_000.0,
                    "forwardedAt": 1_700_000_000.01,
                    "headers": [["Content-Type", "application/json"]],
                    "body": {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {}},
                    "truncated": False},
        "origin": {"status": 200, "headers": [["Content-Type", "text/event-stream"]],
                   "body": None, "firstByteAt": 1_700_000_000.1, "endAt": 1_700_000_000.2,
                   "sse": [{"at": 1_700_000_000.15, "data": answer}], "truncated": False},
        "egress": {"status": 200, "sentAt": 1_700_000_000.12, "endAt": 1_700_000_000.21,
                   "headers": [["Content-Type", "text/event-stream"]]},
        "findings": [{"rule": "response.id", "code": -32600, "boundary": "response",
                      "message": "m", "where": "origin", "strength": "must"}],
    }


def all_paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path below ``node`` (keys and list indexes), ``kind`` left out (the writer
    refuses a record without one)."""
    if isinstance(node, dict):
        items: Any = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return
    for key, value in items:
        path = (*prefix, key)
        if path != ("kind",):
            yield path
            yield from all_paths(value, path)


def hostile_record(changes: list[tuple[tuple[Any, ...], Any]]) -> dict[str, Any]:
    """:func:`base_record` with each ``(path, value)`` set (a path no longer there: skipped)."""
    record = base_record()
    for path, value in changes:
        node: Any = record
        try:
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = copy.deepcopy(value)
        except (KeyError, IndexError, TypeError):
            continue
    return record


def run_commands(root: Path, record: dict[str, Any]) -> str | None:
    """Write ``record`` as a bundle under ``root`` and run the reading commands on it."""
    good, bundle = root / "good", root / "hostile"
    if not good.exists():
        with EvidenceWriter(good) as writer:
            writer.submit(base_record())
    if bundle.exists():
        import shutil

        shutil.rmtree(bundle)
    with EvidenceWriter(bundle) as writer:
        writer.submit(record)
    policy = str(REPO_ROOT / "config" / "policy.toml")
    runs = (["export", "--format", "har", "--out", str(root / "x.har"), "--allow-unverified",
             str(bundle)],
            ["report", "--out", str(root / "r.html"), "--allow-unverified", str(bundle)],
            ["gate", "--policy", policy, "--json", str(bundle)],
            ["sdk-diff", "--allow-unverified", str(bundle)],
            ["diff", "--allow-unverified", str(good), str(bundle)])
    for argv in runs:
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                main(argv)
        except SystemExit:
            pass
        except Exception:  # noqa: BLE001 - what escaped the CLI's boundary is the finding
            return f"{argv[0]} crashed on {record!r}:\n{traceback.format_exc()}"
    return None
