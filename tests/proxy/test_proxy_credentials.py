"""Credentials an operator or a client hands the tap never come out of it.

* An upstream URL with userinfo (``http://user:password@host``): not in any record (the
  hop-comparison ``box`` and its findings' ``where`` name the box by that URL), not in the
  report, not on ``/readyz`` when the upstream is down.
* An argument a policy redacts, mirrored by the real SDK client under the header name its
  tool declares (``x-mcp-header: Tenant`` for ``tenant_key``): not in the header either,
  live or through ``mcp-tap redact``.
* ``mcp-tap redact`` re-redacts what the live tap does: the request target's query, the
  ``box`` of evidence an older tap wrote.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
import pytest
from cli_runs import cli
from gate_bundles import write_bundle
from gateways import Gateway
from peers import raw_modern_request, run_origin, sdk_call_tool
from ports import free_port
from taps import exchanges, hop_url, records, running_tap, tap_options

from mcp_tap.core.eras import Era
from mcp_tap.core.redaction import ArgumentPolicy, RedactionPolicy
from mcp_tap.proxy.server import TapServer

PASSWORD = "hunter2-c0ffee-upstream"  # distinct and greppable
TENANT_KEY = "tk-9b1f-secret-tenant-key"
QUERY_SECRET = "q-77aa-secret-in-query"


def every_byte(root: Path) -> bytes:
    """All bytes of every file under ``root``."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def with_userinfo(url: str) -> str:
    """``url`` with ``tapuser:PASSWORD@`` in front of its host."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://tapuser:{PASSWORD}@{rest}"


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    """The real SDK origin plus ``deploy`` (tenant_key mirrored as Mcp-Param-Tenant)."""
    with run_origin(module="tenant_origin") as url:
        yield url.removesuffix("/mcp")


@contextlib.asynccontextmanager
async def chain(evidence: Path, origin: str) -> AsyncIterator[tuple[TapServer, Gateway]]:
    """client -> edge -> gateway (rewrites Mcp-Name) -> hop origin -> SDK origin; the edge's
    upstream is the gateway's URL with a password in it."""
    async with Gateway(fault="rewrite-name") as gateway:
        options = tap_options(evidence, hops=[("edge", with_userinfo(gateway.url)),
                                              ("origin", origin)])
        async with running_tap(options) as server:
            gateway.upstream = hop_url(server, "origin", path="")
            yield server, gateway


class TestUpstreamUserinfo:
    """The upstream URL's userinfo: shown as ``***@`` wherever the URL is."""

    async def test_not_in_records_or_report(self, tmp_path: Path, origin: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
        """The hop-comparison names the box without the password; its finding too; so does
        the report built from the bundle."""
        evidence = tmp_path / "evidence"
        async with chain(evidence, origin) as (server, gateway):
            headers, body = raw_modern_request(
                "tools/call", {"name": "echo", "arguments": {"text": "hi"}}, request_id=7)
            async with httpx.AsyncClient(timeout=30) as client:
                answer = await client.post(hop_url(server, "edge"), headers=headers, json=body)
            assert answer.status_code == 400  # the gateway's rewrite reached the SDK
        (comparison,) = [r for r in records(server) if r["kind"] == "hop-comparison"]
        shown = gateway.url.replace("://", "://***@")
        assert comparison["box"] == f"{shown} (hop edge upstream)"
        assert [f["rule"] for f in comparison["findings"]] == ["hop.header-changed"]
        assert shown in comparison["findings"][0]["where"]
        assert PASSWORD.encode() not in every_byte(evidence)
        assert b"tapuser" not in every_byte(evidence)
        page = tmp_path / "report.html"
        code, _out, err = cli(["report", str(evidence), "--out", str(page)], capsys)
        assert code == 0, err
        html = page.read_text()
        assert "hop edge upstream" in html and PASSWORD not in html and "tapuser" not in html

    async def test_not_on_readyz(self, tmp_path: Path) -> None:
        """/readyz names the unreachable upstream without its password."""
        down = f"http://127.0.0.1:{free_port()}"
        opts = tap_options(tmp_path / "evidence", upstream=with_userinfo(down), admin=True)
        async with running_tap(opts) as tap:
            assert tap.admin_address is not None
            host, port = tap.admin_address
            async with aiohttp.ClientSession() as client, \
                    client.get(f"http://{host}:{port}/readyz") as answer:
                status, text = answer.status, await answer.text()
        assert status == 503
        (problem,) = orjson.loads(text)["problems"]
        assert problem == f"hop tap: upstream {down.replace('://', '://***@')} is not reachable"
        assert PASSWORD not in text and "tapuser" not in text


class TestMirroredArgument:
    """An argument the policy redacts, mirrored under the header name its tool declares."""

    async def test_live_tap_hides_the_mirror(self, tmp_path: Path, origin: str) -> None:
        """The SDK client sends Mcp-Param-Tenant; the record shows it redacted, the origin
        got it (the call succeeded), and no byte of the evidence holds the key."""
        policy = RedactionPolicy(
            argument_policies=(ArgumentPolicy("tools/call", "deploy", "tenant_key"),))
        opts = replace(tap_options(tmp_path / "evidence", upstream=origin), redaction=policy)
        async with running_tap(opts) as tap:
            result = await sdk_call_tool(hop_url(tap), Era.MODERN, "deploy",
                                         {"tenant_key": TENANT_KEY, "service": "billing"})
        assert result["content"][0]["text"] == f"deployed billing ({len(TENANT_KEY)}-character key)"
        (call,) = [r for r in exchanges(tap) if r["method"] == "tools/call"]
        names = {k.lower(): v for k, v in call["ingress"]["headers"]}
        assert names["mcp-param-tenant"] == "[REDACTED]"
        assert call["ingress"]["body"]["params"]["arguments"] == {
            "tenant_key": "[REDACTED]", "service": "billing"}
        assert TENANT_KEY.encode() not in every_byte(tmp_path / "evidence")

    async def test_redact_hides_the_mirror(self, tmp_path: Path, origin: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        """Recorded without the policy, then ``mcp-tap redact`` with it: header and argument
        both gone from the derived bundle; the service name kept."""
        evidence = tmp_path / "evidence"
        async with running_tap(tap_options(evidence, upstream=origin)) as tap:
            await sdk_call_tool(hop_url(tap), Era.MODERN, "deploy",
                                {"tenant_key": TENANT_KEY, "service": "billing"})
        assert TENANT_KEY.encode() in every_byte(evidence)  # the source really holds it
        policy = tmp_path / "stricter.toml"
        policy.write_text('[[redaction.argument]]\nmethod = "tools/call"\ntool = "deploy"\n'
                          'argument = "tenant_key"\n')
        (bundle,) = [p for p in evidence.iterdir() if p.is_dir()]
        out = tmp_path / "derived"
        code, _, err = cli(["redact", str(bundle), "--policy", str(policy), "--out", str(out)],
                           capsys)
        assert code == 0, err
        data = every_byte(out)
        assert TENANT_KEY.encode() not in data and b"billing" in data


def _old_records() -> list[dict[str, Any]]:
    """What an older tap wrote: a box with the upstream's password, a query secret the
    stricter policy names."""
    where = f"box http://tapuser:{PASSWORD}@gw:8080 (hop edge upstream) (between hops)"
    return [
        {"kind": "exchange", "hop": "edge", "exchangeId": "x1", "era": "modern",
         "method": "tools/list", "rpcId": 1, "traceId": "0" * 32, "client": "127.0.0.1",
         "ingress": {"httpMethod": "POST", "path": f"/mcp?tenant={QUERY_SECRET}&v=1",
                     "headers": [], "body": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                     "receivedAt": 1.0},
         "origin": {"status": 200, "headers": [], "body": {"jsonrpc": "2.0", "id": 1,
                                                            "result": {"tools": []}},
                    "firstByteAt": 1.1, "endAt": 1.2},
         "egress": {"status": 200, "headers": [], "sentAt": 1.2, "endAt": 1.2},
         "tapError": None, "findings": []},
        {"kind": "hop-comparison", "traceId": "0" * 32,
         "box": f"http://tapuser:{PASSWORD}@gw:8080 (hop edge upstream)",
         "between": ["edge", "origin"], "exchangeIds": ["x1", "x2"],
         "findings": [{"rule": "hop.header-changed", "code": None, "boundary": "hop",
                       "message": "request header mcp-name changed", "where": where,
                       "strength": "must"}]},
    ]


def test_redact_cuts_old_credentials(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    """``mcp-tap redact`` on an older tap's bundle: the box's password and a query value
    under a key the stricter policy adds are gone, the rest kept."""
    bundle = write_bundle(tmp_path / "old", _old_records())
    policy = tmp_path / "stricter.toml"
    policy.write_text('[redaction]\nextra_keys = ["tenant"]\n')
    out = tmp_path / "derived"
    code, _, err = cli(["redact", str(bundle), "--policy", str(policy), "--out", str(out)],
                       capsys)
    assert code == 0, err
    data = every_byte(out)
    assert PASSWORD.encode() not in data and QUERY_SECRET.encode() not in data
    lines = [orjson.loads(line) for line in
             (out / "segment-000001.jsonl").read_bytes().splitlines()]
    exchange, comparison = lines
    assert exchange["ingress"]["path"] == "/mcp?tenant=[REDACTED]&v=1"
    assert comparison["box"] == "http://[REDACTED]@gw:8080 (hop edge upstream)"
    assert "gw:8080" in comparison["findings"][0]["where"]
