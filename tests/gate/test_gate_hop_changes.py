"""`mcp-tap gate` on a capture with two hops around an MCP gateway: the changes per box in
the text, Markdown and SARIF outputs, the gateway's findings as warnings with their paths,
and `[hop]` `allow` / `block` in the policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from gate_bundles import attested as attested  # the fixtures, re-exported
from gate_bundles import exchange, write_bundle, write_policy
from gate_bundles import key_env as key_env
from releases import run

from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.findings import Finding

CAPS = "/params/_meta/io.modelcontextprotocol~1clientCapabilities"
BOX = "http://127.0.0.1:9000 (hop edge upstream)"


def _finding(rule: str, paths: list[str]) -> dict[str, Any]:
    entry = CATALOG[rule]
    data = Finding(rule, entry.code, entry.boundary, "m", f"box {BOX}", entry.strength,
                   tuple(paths)).to_json()
    return data


def _comparison(n: int) -> dict[str, Any]:
    widened = [f"{CAPS}/{c}" for c in ("elicitation", "roots", "sampling")]
    changes = [{"class": "capability-widened", "direction": "request", "kind": "added",
                "meaning": "hop.gateway.capability-widened", "path": p, "after": {}}
               for p in widened]
    changes += [
        {"class": "tool-metadata", "direction": "response", "kind": "added",
         "meaning": "recorded", "path": f"/result/tools/{i}/title", "after": "T"}
        for i in range(3)]
    changes.append({"class": "jsonrpc-id", "direction": "request", "kind": "changed",
                    "meaning": "expected", "path": "/id", "before": n, "after": 1})
    return {"kind": "hop-comparison", "traceId": f"{n:032x}", "box": BOX,
            "boxKind": "mcp-gateway", "between": ["edge", "origin"],
            "exchangeIds": [f"e{n}", f"o{n}"], "pairedBy": "traceparent",
            "findings": [_finding("hop.gateway.capability-widened", widened)],
            "changes": changes}


def _bundle(path: Path) -> Path:
    records: list[dict[str, Any]] = []
    for n in range(120):
        records.append(exchange(n))
        if n % 40 == 0:
            records.append(_comparison(n))
    return write_bundle(path, records)


def test_gateway_changes_in_text_markdown_and_sarif(
    tmp_path: Path, attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path / "candidate")
    args = ["gate", str(bundle), "--policy", str(write_policy(tmp_path)),
            "--rollback", str(attested)]
    code, text, _ = run(args, capsys)
    assert code == 1  # a hop finding blocks by default: rollback
    assert (f"  gate.hop [hop.gateway.capability-widened]: hop.gateway.capability-widened "
            f"{BOX}, between hop edge and hop origin: 3 finding(s) at {CAPS}/elicitation, "
            f"{CAPS}/roots, {CAPS}/sampling") in text
    rows = text[text.index("hop: FAIL"):].splitlines()[1:6]
    assert rows[0] == f"  box {BOX}, between hop edge and hop origin (mcp-gateway): 3 pair(s)"
    assert [r.split()[0] for r in rows[1:]] == [
        "hop.gateway.capability-widened", "hop.gateway.capability-widened",
        "hop.gateway.capability-widened", "recorded"]
    assert rows[4].split()[-2:] == ["/result/tools/*/title", "x9"]

    _, markdown, _ = run([*args, "--format", "markdown"], capsys)
    assert "| warn | hop: hop.gateway.capability-widened |" in markdown
    assert f"| pass | hop: box {BOX}, between hop edge and hop origin |" in markdown

    _, sarif, _ = run([*args, "--format", "sarif"], capsys)
    results = orjson.loads(sarif)["runs"][0]["results"]
    (widened,) = [r for r in results if r["ruleId"] == "hop.gateway.capability-widened"]
    assert widened["level"] == "warning"
    assert f"{CAPS}/roots" in widened["message"]["text"]


def test_policy_allows_gateway_rules_and_blocks_classes(
    tmp_path: Path, attested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path / "candidate")
    allow = write_policy(tmp_path, '\n[hop]\nallow = ["hop.gateway.*"]\n')
    code, text, _ = run(["gate", str(bundle), "--policy", str(allow), "--rollback",
                         str(attested)], capsys)
    assert (code, text.splitlines()[0]) == (0, "gate: promote")
    block = write_policy(
        tmp_path, '\n[hop]\nallow = ["hop.gateway.*"]\nblock = ["tool-metadata"]\n')
    code, text, _ = run(["gate", str(bundle), "--policy", str(block), "--rollback",
                         str(attested)], capsys)
    assert code == 1
    assert (f"  gate.hop.change: tool-metadata {BOX}, between hop edge and hop origin: 9 "
            "change(s) the policy blocks at /result/tools/*/title") in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [('\n[hop]\nblock = ["tool"]\n', "hop.block"),
     ('\n[hop]\nallow = ["hop.gatway.*"]\n', "hop.allow"),
     ('\n[hop]\nblocks = ["tools"]\n', "blocks")],
)
def test_bad_hop_policy_is_exit_2(tmp_path: Path, attested: Path, extra: str, message: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    bundle = _bundle(tmp_path / "candidate")
    code, out, err = run(["gate", str(bundle), "--policy", str(write_policy(tmp_path, extra)),
                          "--rollback", str(attested)], capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message in err
