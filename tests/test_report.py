"""Tests of ``mcp_tap.report`` and the ``report`` command.

The evidence is a REAL capture: the real SDK server (``peers.run_origin``) behind two tap
hops (``taps.running_tap``) with a small aiohttp gateway between them that drops the
``Mcp-Param-Region`` header, driven with golden requests, SSE ``slow_count`` calls, a header
mismatch, a tool named ``<script>...`` and a legacy SDK client. The page is rendered by
headless Chromium (Debian's ``chromium``) and the assertions run on the rendered DOM.

Set ``MCP_TAP_UPDATE_SCREENSHOT=1`` to refresh ``docs/report.png`` from the browser test.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import aiohttp
import httpx
import orjson
import pytest
from aiohttp import web
from peers import free_port, modern_meta, raw_modern_request, run_origin, sdk_call_tool
from releases import rollback_payload
from taps import hop_url, running_tap, tap_options

from mcp_tap.cli import main
from mcp_tap.evidence import find_bundles
from mcp_tap.report import (
    BundleSummary,
    ReportData,
    collect,
    load_report,
    percentile,
    render_report,
)

SCRIPT_NAME = "<script>alert(1)</script>"
DROPPED = "mcp-param-region"
SIGNER = "release-controller@prod"
KEY_ENV = "MCP_TAP_TEST_REPORT_ROLLBACK_KEY"
KEY = "mcp-tap report test rollback key, not a secret"
REPO = Path(__file__).resolve().parent.parent
HOP_PAIR = re.compile(r"\(hop edge upstream\)")
SESSION = web.AppKey("session", aiohttp.ClientSession)

POLICY = f"""
[health]
hop = "edge"
min_samples = 5
max_error_rate = 0.5
min_observation_seconds = 0.0

[rollback]
trusted_signers = ["{SIGNER}"]
hmac_key_env = "{KEY_ENV}"
"""


# --- a real two-hop capture --------------------------------------------------------------------


async def _gateway(port: int, upstream: list[str]) -> web.AppRunner:
    """A streaming aiohttp gateway that forwards everything but the Mcp-Param-Region header."""

    async def handle(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        headers = [(k, v) for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", DROPPED)]
        session = request.app[SESSION]
        async with session.request(request.method, upstream[0] + request.path_qs,
                                   headers=headers, data=raw) as answer:
            response = web.StreamResponse(status=answer.status, headers={
                k: v for k, v in answer.headers.items()
                if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")})
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def client(app: web.Application) -> AsyncIterator[None]:
        app[SESSION] = aiohttp.ClientSession(auto_decompress=False)
        yield
        await app[SESSION].close()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    app.cleanup_ctx.append(client)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def _capture(origin: str, evidence: Path) -> None:
    """client -> hop edge -> gateway -> hop inner -> SDK server, a mix of requests."""
    gateway_port = free_port()
    upstream = [""]
    options = tap_options(evidence, hops=[("edge", f"http://127.0.0.1:{gateway_port}"),
                                          ("inner", origin.removesuffix("/mcp"))])
    async with running_tap(options) as tap:
        upstream[0] = hop_url(tap, "inner", path="")
        runner = await _gateway(gateway_port, upstream)
        url = hop_url(tap, "edge")
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                for n in range(3):
                    headers, body = raw_modern_request("tools/list", request_id=10 + n)
                    assert (await http.post(url, headers=headers, json=body)).status_code == 200
                for n in range(3):
                    headers, body = raw_modern_request(
                        "tools/call", {"name": "echo", "arguments": {"text": f"hi {n}"}},
                        request_id=f"echo-{n}")
                    assert (await http.post(url, headers=headers, json=body)).status_code == 200
                for n in range(2):
                    headers, body = raw_modern_request(
                        "tools/call", {"name": "slow_count", "arguments": {"n": 3}},
                        request_id=30 + n, meta=modern_meta(progress_token=f"p{n}"))
                    answer = await http.post(url, headers=headers, json=body)
                    assert answer.headers["content-type"].startswith("text/event-stream")
                headers, body = raw_modern_request(
                    "tools/call", {"name": "echo", "arguments": {"text": "x"}}, request_id=40)
                headers["Mcp-Name"] = "add"  # header mismatch
                assert (await http.post(url, headers=headers, json=body)).status_code == 400
                headers, body = raw_modern_request(
                    "tools/call", {"name": SCRIPT_NAME, "arguments": {}}, request_id=41)
                await http.post(url, headers=headers, json=body)
                headers, body = raw_modern_request(
                    "tools/call", {"name": "lookup", "arguments": {"region": "eu-west",
                                                                   "query": "q"}},
                    request_id=42, param_headers={"Region": "eu-west"})
                assert (await http.post(url, headers=headers, json=body)).status_code == 400
            await sdk_call_tool(url, "legacy", "echo", {"text": "legacy"})
        finally:
            await runner.cleanup()


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An evidence directory of one real two-hop capture."""
    path = tmp_path_factory.mktemp("evidence")
    with run_origin() as origin:
        asyncio.run(_capture(origin, path))
    return path


@pytest.fixture(scope="module")
def data(evidence: Path) -> ReportData:
    """The report data of the capture, without a gate decision."""
    return load_report([evidence], generated="2026-01-01 00:00:00Z")


@pytest.fixture
def gate_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A policy and rollback evidence attested with `mcp-tap attest` (HMAC key in the env)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    payload = tmp_path / "payload.json"
    payload.write_bytes(orjson.dumps(rollback_payload()))
    rollback = tmp_path / "rollback.json"
    code = main(["attest", str(payload), "--signer", SIGNER, "--hmac-key-env", KEY_ENV,
                 "--out", str(rollback)])
    capsys.readouterr()
    assert code == 0
    return policy, rollback


def rule_counts(report: ReportData) -> dict[str, int]:
    """Map rule id to its count in the report."""
    return {r.rule: r.count for r in report.rules}


class _Text(HTMLParser):
    """Collects the text of an HTML document and the tags it contains."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Text:
    """Parse a page into its text and tags."""
    parser = _Text()
    parser.feed(page)
    parser.close()
    return parser


# --- units ------------------------------------------------------------------------------------


class TestPercentile:
    """The page's percentiles are the gate's nearest-rank percentiles."""

    def test_values(self) -> None:
        """Known values: the ends, the median (nearest rank, no interpolation), one sample."""
        values = [4.0, 1.0, 3.0, 2.0]
        assert percentile(values, 0) == 1.0
        assert percentile(values, 100) == 4.0
        assert percentile(values, 50) == 2.0
        assert percentile([7.0], 99) == 7.0
        assert percentile(list(map(float, range(101))), 95) == 95.0
        with pytest.raises(ValueError):
            percentile([], 50)


class TestCollect:
    """collect turns the real capture's records into counts, tables and samples."""

    def test_counts(self, data: ReportData) -> None:
        """Rules, eras, hops, streams and latency samples match what was driven."""
        counts = rule_counts(data)
        # Each request crosses both hops, so request rules count once per hop.
        assert counts["request.header.mismatch"] == 2
        assert counts["hop.header-changed"] == 1
        assert counts["request.header.missing"] == 1
        assert data.exchanges == sum(b.exchanges for b in data.bundles)
        assert set(data.eras) == {"modern", "legacy"}
        assert [h.hop for h in data.hop_summaries] == ["edge", "inner"]
        assert all(b.ok for b in data.bundles)
        assert len(data.latencies_ms) == data.exchanges
        assert {s.name for s in data.streams if s.events > 1} == {"slow_count"}
        assert all(s.first_event_ms <= (s.total_ms or 0) for s in data.streams)

    def test_hop_comparison(self, data: ReportData) -> None:
        """The gateway's dropped header is blamed on the box between edge and inner."""
        changed = [c for c in data.hop_comparisons if c.rules]
        assert [c.rules for c in changed] == [("hop.header-changed",)]
        assert changed[0].between == "edge \u2192 inner"
        assert HOP_PAIR.search(changed[0].box)
        assert len(changed[0].exchange_ids) == 2

    def test_tool_name(self, data: ReportData) -> None:
        """The hostile tool name is kept as data (escaping is the renderer's job)."""
        assert SCRIPT_NAME in {row.name for row in data.rows}


class TestRenderReport:
    """render_report is pure, self-contained and escapes every piece of evidence."""

    def test_escaped(self, data: ReportData) -> None:
        """A <script> tool name shows as text and never becomes an element."""
        page = render_report(data)
        parsed = parse(page)
        assert SCRIPT_NAME not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "script" not in {tag for tag, _ in parsed.tags}
        assert SCRIPT_NAME in "".join(parsed.text)

    def test_attributes_escaped(self) -> None:
        """Evidence that tries to break out of an attribute or a tag stays text."""
        evil = '"><img src=x onerror=alert(1)>'
        record = {"kind": "exchange", "exchangeId": evil, "hop": evil, "era": evil,
                  "method": evil, "ingress": {"receivedAt": 1.0, "body": {
                      "params": {"name": evil}}},
                  "egress": {"endAt": 1.5}, "findings": [
                      {"rule": evil, "boundary": evil, "message": evil}]}
        pair = {"kind": "hop-comparison", "box": evil, "between": [evil, evil],
                "exchangeIds": [evil, evil], "findings": [{"rule": "hop.body-changed",
                                                          "message": evil}]}
        summary = BundleSummary(path=evil, ok=False, records=2, exchanges=1, errors=1,
                                problems=(evil,))
        page = render_report(collect([(summary, [record, pair])],
                                     decision={"action": evil, "reasons": [
                                         {"rule": evil, "findings": [evil], "message": evil}],
                                         "sources": {evil: {"passed": False}}}))
        tags = {tag for tag, _ in parse(page).tags}
        assert "img" not in tags and "script" not in tags
        assert evil not in page

    def test_self_contained(self, data: ReportData) -> None:
        """No external asset: no src, href, link, import, url() or script; a strict CSP."""
        page = render_report(data)
        tags = parse(page).tags
        assert not [a for _, attrs in tags for a in attrs if a in ("src", "href")]
        assert not {"link", "script", "img", "iframe", "object"} & {t for t, _ in tags}
        assert "@import" not in page and "url(" not in page
        csp = [a["content"] for t, a in tags if t == "meta"
               and a.get("http-equiv") == "Content-Security-Policy"]
        assert csp and (csp[0] or "").startswith("default-src 'none'")

    def test_sections(self, data: ReportData) -> None:
        """Every section is there; the SVG charts mark p50, p95 and p99."""
        page = render_report(data)
        tags = parse(page).tags
        ids = [a.get("id") for t, a in tags if t == "section"]
        assert ids == ["decision", "summary", "rules", "hops", "latency", "sse", "exchanges"]
        marks = [a.get("data-percentile") for t, a in tags if t == "g" and "data-percentile" in a]
        assert marks == ["p50", "p95", "p99"] * 2
        assert [t for t, _ in tags].count("svg") == 2
        assert "no gate decision (run" in page

    def test_row_limit(self, data: ReportData) -> None:
        """The per-exchange table stops at max_rows and says so."""
        page = render_report(data, max_rows=5)
        assert f"Showing the first 5 of {data.exchanges} exchanges" in page
        rows = page.split('<table class="exchanges">')[1].split("</table>")[0]
        assert rows.count("<tr>") == 6  # the head and five rows

    def test_empty(self) -> None:
        """Evidence without exchanges still renders, without charts."""
        summary = BundleSummary(path="b", ok=True, records=0, exchanges=0)
        page = render_report(collect([(summary, [])]))
        assert "<svg" not in page
        assert "No rule fired" in page and "No answer was an event stream" in page

    def test_decision(self, data: ReportData) -> None:
        """A decision shows its action, reasons with finding ids, and the sources."""
        decision = {"action": "rollback", "reasons": [
            {"rule": "gate.conformance", "findings": ["request.header.mismatch"],
             "message": "request.header.mismatch: 2 finding(s)"}],
            "sources": {"conformance": {"passed": False}, "sdk": {"passed": True}},
            "rollback": {"ready": True}, "evidenceDigest": "d" * 64}
        text = "".join(parse(render_report(replace(data, decision=decision))).text)
        assert "rollback" in text and "gate.conformance" in text
        assert "conformance: fail" in text and "sdk: pass" in text and "d" * 64 in text


class TestReportCommand:
    """`mcp-tap report` writes the page and exits 0; bad input is one line and exit 2."""

    def test_writes(self, evidence: Path, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
        """The page is written; --json summarises it on one line."""
        out = tmp_path / "report.html"
        code = main(["report", str(evidence), "--out", str(out), "--json"])
        captured = capsys.readouterr()
        summary = orjson.loads(captured.out)
        assert (code, captured.err) == (0, "")
        assert summary["out"] == str(out) and summary["decision"] is None
        assert summary["rules"]["request.header.mismatch"] == 2
        assert out.read_text().startswith("<!DOCTYPE html>")

    def test_with_gate(self, evidence: Path, tmp_path: Path, gate_files: tuple[Path, Path],
                       capsys: pytest.CaptureFixture[str]) -> None:
        """With --policy and --rollback the page carries the gate's own decision."""
        policy, rollback = gate_files
        bundles = [str(b) for b in find_bundles(evidence)]
        assert main(["gate", *bundles, "--policy", str(policy), "--rollback", str(rollback),
                     "--json"]) == 1
        gate = orjson.loads(capsys.readouterr().out)
        out = tmp_path / "report.html"
        code = main(["report", str(evidence), "--out", str(out), "--policy", str(policy),
                     "--rollback", str(rollback)])
        line = capsys.readouterr().out
        assert code == 0 and line.endswith("decision rollback)\n")
        page = out.read_text()
        assert gate["action"] == "rollback" and gate["evidenceDigest"] in page

    def test_policy_alone(self, evidence: Path, tmp_path: Path,
                          gate_files: tuple[Path, Path],
                          capsys: pytest.CaptureFixture[str]) -> None:
        """A policy without rollback evidence (or the reverse) is bad input, not ignored."""
        out = tmp_path / "report.html"
        garbage = tmp_path / "garbage.toml"
        garbage.write_bytes(b"\xff not toml [")
        for extra in (["--policy", str(gate_files[0])], ["--rollback", str(gate_files[1])],
                      ["--policy", str(garbage)], ["--rollback", str(tmp_path / "missing")]):
            assert main(["report", str(evidence), "--out", str(out), *extra]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "Traceback" not in err
            assert "--policy and --rollback go together" in err
        assert not out.exists()

    def test_bad_input(self, evidence: Path, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
        """A missing bundle or an unwritable output is one line on stderr and exit 2."""
        for argv in (
            [str(tmp_path / "missing"), "--out", str(tmp_path / "r.html")],
            [str(evidence), "--out", str(tmp_path / "no" / "such" / "dir" / "r.html")],
            [str(evidence), "--out", str(tmp_path / "r.html"), "--max-rows", "0"],
        ):
            code = main(["report", *argv])
            captured = capsys.readouterr()
            assert (code, captured.out, captured.err.count("\n")) == (2, "", 1)
            assert captured.err.startswith("mcp-tap: error: ")


# --- the page in a real browser ---------------------------------------------------------------


def _chromium() -> str:
    """The Chromium binary; fails (never skips silently) unless MCP_TAP_SKIP_BROWSER=1."""
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        if os.environ.get("MCP_TAP_SKIP_BROWSER") == "1":
            pytest.skip("MCP_TAP_SKIP_BROWSER=1 and chromium is not installed")
        pytest.fail("headless Chromium is required: apt-get install -y chromium "
                    "(scripts/test.sh does it), or set MCP_TAP_SKIP_BROWSER=1")
    return found


def _browser(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--hide-scrollbars",
               f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture
def rendered(evidence: Path, tmp_path: Path,
             gate_files: tuple[Path, Path]) -> Iterator[tuple[str, Path]]:
    """The report with the gate's decision, written to a file for the browser."""
    policy, rollback = gate_files
    report = load_report([evidence], policy=policy, rollback=rollback,
                         generated="2026-01-01 00:00:00Z")
    page = tmp_path / "report.html"
    page.write_text(render_report(report))
    yield _chromium(), page


class TestBrowser:
    """Headless Chromium renders the page; the assertions read the rendered DOM."""

    def test_rendered_dom(self, rendered: tuple[str, Path], tmp_path: Path) -> None:
        """The decision, a rule with its count, the hop box and the percentile markers."""
        binary, page = rendered
        result = _browser(binary, tmp_path / "profile", "--dump-dom", page.as_uri())
        assert result.returncode == 0, result.stderr[-2000:]
        dom = parse(result.stdout)
        text = " ".join(" ".join(dom.text).split())
        assert re.search(r'id="action">rollback<', result.stdout)
        assert "gate.conformance [ request.header.mismatch ]" in text
        assert "request.header.mismatch must request -32020 2" in text
        assert "hop.header-changed must hop 1" in text
        assert HOP_PAIR.search(text) and "edge \u2192 inner" in text and "1 changed" in text
        marks = {a.get("data-percentile") for t, a in dom.tags if t == "g"}
        assert {"p50", "p95", "p99"} <= marks
        assert [t for t, _ in dom.tags].count("svg") == 2
        assert "p95 " in text and "SSE first-event latency" in text
        # The hostile tool name is text in the rendered DOM, never an element.
        assert SCRIPT_NAME in text
        assert "script" not in {t for t, _ in dom.tags}

    def test_screenshot(self, rendered: tuple[str, Path], tmp_path: Path) -> None:
        """A 1280x1600 screenshot is produced (and refreshed in docs/ on request)."""
        binary, page = rendered
        shot = tmp_path / "report.png"
        result = _browser(binary, tmp_path / "profile", f"--screenshot={shot}",
                          "--window-size=1280,1600", page.as_uri())
        assert result.returncode == 0, result.stderr[-2000:]
        data = shot.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
        if os.environ.get("MCP_TAP_UPDATE_SCREENSHOT") == "1":
            (REPO / "docs" / "report.png").write_bytes(data)

