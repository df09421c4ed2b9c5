"""Tests of ``mcp_tap.report`` and the ``report`` command.

The evidence is REAL: the real SDK server (``peers.run_origin``) behind two tap hops
(``taps.running_tap``) with a small aiohttp gateway between them that drops the
``Mcp-Param-Region`` header, driven with golden requests, SSE ``slow_count`` calls, a header
mismatch, a tool named ``<script>...``, a bearer token and a legacy SDK client; and a
single-hop capture of the real SDK client in both eras (``captures.record``). The page is
rendered by headless Chromium (Debian's ``chromium``) and the assertions run on the
rendered DOM.

Set ``MCP_TAP_UPDATE_SCREENSHOT=1`` to refresh ``docs/report.png`` from the browser test.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import re
import shutil
import subprocess
import tracemalloc
from collections.abc import AsyncIterator, Iterator, Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
import pytest
from aiohttp import web
from captures import record
from peers import free_port, modern_meta, raw_modern_request, run_origin, sdk_call_tool
from releases import raw_bundle, rollback_payload
from taps import hop_url, running_tap, tap_options

from mcp_tap.cli import main
from mcp_tap.core.catalog import CATALOG
from mcp_tap.core.citations import citations
from mcp_tap.evidence import find_bundles, iter_records
from mcp_tap.gate.evaluation import evaluate_files
from mcp_tap.report import (
    Bounds,
    BundleSummary,
    ReportData,
    Reservoir,
    collect,
    load_report,
    percentile,
    render_report,
)
from mcp_tap.report import plots as report_plots
from mcp_tap.report.decision import changes

SCRIPT_NAME = "<script>alert(1)</script>"
DROPPED = "mcp-param-region"
SIGNER = "release-controller@prod"
KEY_ENV = "MCP_TAP_TEST_REPORT_ROLLBACK_KEY"
KEY = "mcp-tap report test rollback key, not a secret"
TOKEN = "sk-report-test-7f3a9c0e1d2b4a6f"
REPO = Path(__file__).resolve().parents[2]
HOP_PAIR = re.compile(r"\(hop edge upstream\)")
SESSION = web.AppKey("session", aiohttp.ClientSession)

POLICY = f"""
[health]
hop = "edge"
min_samples = 5
max_error_rate = 0.05
min_observation_seconds = 0.0

[rollback]
trusted_signers = ["{SIGNER}"]
hmac_key_env = "{KEY_ENV}"
"""


# --- a real two-hop capture and a real single-hop capture ---------------------------------------


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
                    headers["Authorization"] = f"Bearer {TOKEN}"
                    assert (await http.post(url, headers=headers, json=body)).status_code == 200
                for n in range(2):
                    headers, body = raw_modern_request(
                        "tools/call", {"name": "slow_count", "arguments": {"n": 3}},
                        request_id=30 + n, meta=modern_meta(progress_token=f"p{n}"))
                    answer = await http.post(url, headers=headers, json=body)
                    assert answer.headers["content-type"].startswith("text/event-stream")
                for n in range(2):
                    headers, body = raw_modern_request(
                        "tools/call", {"name": "echo", "arguments": {"text": "x"}},
                        request_id=40 + n)
                    headers["Mcp-Name"] = "add"  # header mismatch
                    assert (await http.post(url, headers=headers, json=body)).status_code == 400
                headers, body = raw_modern_request(
                    "tools/call", {"name": SCRIPT_NAME, "arguments": {}}, request_id=43)
                await http.post(url, headers=headers, json=body)
                headers, body = raw_modern_request(
                    "tools/call", {"name": "lookup", "arguments": {"region": "eu-west",
                                                                   "query": "q"}},
                    request_id=44, param_headers={"Region": "eu-west"})
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
def single_hop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of the real SDK client (both eras) through one hop in front of the SDK server."""
    path = tmp_path_factory.mktemp("single")
    with run_origin() as origin:
        recorded = asyncio.run(record(path, origin.removesuffix("/mcp")))
    return recorded.bundle


@pytest.fixture(scope="module")
def data(evidence: Path) -> ReportData:
    """The report data of the two-hop capture, without a gate decision."""
    return load_report([evidence], generated="2026-01-01 00:00:00Z")


@pytest.fixture
def gate_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A policy and rollback evidence attested with `mcp-tap attest` (HMAC key in the env)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    return policy, attest(tmp_path, SIGNER, capsys)


def attest(tmp_path: Path, signer: str, capsys: pytest.CaptureFixture[str]) -> Path:
    """Rollback evidence for 1.4.2 attested by ``signer`` with `mcp-tap attest`."""
    payload = tmp_path / f"payload-{signer}.json"
    payload.write_bytes(orjson.dumps(rollback_payload()))
    rollback = tmp_path / f"rollback-{signer}.json"
    code = main(["attest", str(payload), "--signer", signer, "--hmac-key-env", KEY_ENV,
                 "--out", str(rollback)])
    capsys.readouterr()
    assert code == 0
    return rollback


@pytest.fixture
def gated(evidence: Path, gate_files: tuple[Path, Path]) -> ReportData:
    """The two-hop report with the gate's decision (rollback: conformance and health fail)."""
    policy, rollback = gate_files
    return load_report([evidence], policy=policy, rollback=rollback,
                       generated="2026-01-01 00:00:00Z")


def rule_counts(report: ReportData) -> dict[str, int]:
    """Map rule id to its count in the report."""
    return {r.rule: r.count for r in report.rules}


class _Page(HTMLParser):
    """Collects the text of an HTML document, its tags, and the text under each id."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ids: dict[str, list[str]] = {}
        self._open: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if tag in ("br", "meta", "circle", "line", "rect", "polyline"):
            return
        self._open.append((tag, found.get("id")))
        if found.get("id"):
            self.ids[str(found["id"])] = []

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            name, _ = self._open.pop()
            if name == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _, ident in self._open:
            if ident:
                self.ids[ident].append(data)

    def under(self, ident: str) -> str:
        """The whitespace-normalised text under the element with ``ident``."""
        return " ".join(" ".join(self.ids[ident]).split())

    def hrefs(self) -> list[str]:
        """Every href on the page."""
        return [str(a["href"]) for t, a in self.tags if t == "a" and a.get("href")]


def parse(page: str) -> _Page:
    """Parse a page into its text, tags and the text under each id."""
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


def exchange_records(bundle_dir: Path) -> list[dict[str, Any]]:
    """The exchange records of every bundle under ``bundle_dir``, streamed in order."""
    return [r for b in find_bundles(bundle_dir) for r in iter_records(b)
            if r.get("kind") == "exchange"]


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


class TestReservoir:
    """A reservoir keeps at most its size, counts everything and samples uniformly."""

    def test_bounded_exact_counts(self) -> None:
        """10,000 values into 100 slots: 100 kept, exact count, minimum and maximum."""
        reservoir = Reservoir(100)
        for value in range(10_000):
            reservoir.add(float(value))
        done = reservoir.snapshot()
        assert (len(done.values), done.count, done.low, done.high) == (100, 10_000, 0.0, 9999.0)
        assert done.sampled and len(set(done.values)) == 100
        # Uniform: the kept values are spread over the stream, not its first 100.
        assert max(done.values) > 5_000 and 3_000 < sum(done.values) / 100 < 7_000

    def test_small_series_whole(self) -> None:
        """Fewer values than the size are all kept, in order, and not called a sample."""
        reservoir = Reservoir(10)
        for value in (3.0, 1.0, 2.0):
            reservoir.add(value)
        assert reservoir.snapshot().values == (3.0, 1.0, 2.0)
        assert not reservoir.sampled


class TestCollect:
    """collect turns the real capture's records into counts, groups and samples."""

    def test_counts(self, data: ReportData, evidence: Path) -> None:
        """Rules, eras, hops, streams and latency samples match what was driven."""
        counts = rule_counts(data)
        # Each request crosses both hops, so request rules count once per hop.
        assert counts["request.header.mismatch"] == 4
        assert counts["hop.header-changed"] == 1
        assert counts["request.header.missing"] == 1
        assert data.exchanges == len(exchange_records(evidence))
        assert data.exchanges == sum(b.exchanges for b in data.bundles)
        assert set(data.eras) == {"modern", "legacy"}
        assert data.hops == ("edge", "inner")
        assert all(b.ok for b in data.bundles)
        assert data.latency.count == len(data.latency.values) == data.exchanges
        assert {s.name for s in data.streams if s.events > 1} == {"slow_count"}
        assert all(s.first_event_ms <= (s.total_ms or 0) for s in data.streams)

    def test_rule_groups(self, data: ReportData, evidence: Path) -> None:
        """One group per rule, with the first and last exchange that carried it."""
        records = exchange_records(evidence)
        carrying = [r["exchangeId"] for r in records
                    if any(f["rule"] == "request.header.mismatch" for f in r["findings"])]
        group = next(g for g in data.rules if g.rule == "request.header.mismatch")
        assert group.first is not None and group.last is not None
        assert (group.first.exchange_id, group.last.exchange_id) == (carrying[0], carrying[-1])
        assert group.strength == "must" and group.code == -32020
        assert group.cite == CATALOG["request.header.mismatch"].cite
        assert group.by_hop == {"edge": 2, "inner": 2}
        assert len({g.rule for g in data.rules}) == len(data.rules)
        # Violations come before warnings.
        strengths = [g.strength for g in data.rules]
        assert strengths == sorted(strengths, key=lambda s: s != "must")

    def test_hop_comparison(self, data: ReportData) -> None:
        """The gateway's dropped header is blamed on the box, and both exchanges are kept."""
        assert [c.rules for c in data.hop_changes] == [("hop.header-changed",)]
        change = data.hop_changes[0]
        assert change.between == "edge \u2192 inner" and HOP_PAIR.search(change.box)
        assert len(change.exchanges) == 2
        assert {r.anchor for r in change.exchanges} <= data.detail_anchors()
        assert [b.changed for b in data.hop_boxes] == [{"headers": 1}]

    def test_second_pass_only_when_reiterable(self, evidence: Path) -> None:
        """An iterator is read once: the pair's exchanges are kept only from a collection."""
        bundle = find_bundles(evidence)[0]
        summary = BundleSummary(path=str(bundle), ok=True, records=0, exchanges=0)
        tight = Bounds(lead=0, errors=0, rules=1)
        listed = collect([(summary, list(iter_records(bundle)))], bounds=tight)
        streamed = collect([(summary, iter_records(bundle))], bounds=tight)
        wanted = {r.anchor for c in listed.hop_changes for r in c.exchanges}
        assert wanted <= listed.detail_anchors()
        # The outer exchange carries no finding of its own: only the second pass keeps it.
        assert wanted - streamed.detail_anchors()

    def test_tool_name(self, data: ReportData) -> None:
        """The hostile tool name is kept as data (escaping is the renderer's job)."""
        assert SCRIPT_NAME in {row.name for row in data.rows}


class TestBounds:
    """A bundle larger than every bound renders with each bound respected and exact counts."""

    BOUNDS = Bounds(samples=64, rules=2, errors=3, hop_changes=1, lead=4, rows=25, streams=5)

    @staticmethod
    def _copies(records: list[dict[str, Any]], count: int) -> Iterator[dict[str, Any]]:
        """``count`` exchange records cycled from a real capture, each with its own id."""
        for index in range(count):
            source = records[index % len(records)]
            yield {**source, "exchangeId": f"copy{index:07d}", "digest": f"{index:064x}"}

    def test_large_bundle(self, evidence: Path, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
        """3,000 real exchanges on disk: every list stops at its bound, every count is exact."""
        import mcp_tap.evidence as evidence_package
        import mcp_tap.evidence.reader as reader

        records = exchange_records(evidence)
        bundle = raw_bundle(tmp_path / "big", list(self._copies(records, 3_000)))

        def whole(*_args: object, **_kwargs: object) -> None:
            raise AssertionError("the report must stream, not read a whole bundle")

        monkeypatch.setattr(reader, "read_bundle", whole)
        monkeypatch.setattr(evidence_package, "read_bundle", whole)
        big = load_report([bundle], bounds=self.BOUNDS)
        bounds = self.BOUNDS
        assert big.exchanges == 3_000 and big.latency.count == 3_000
        assert len(big.latency.values) == bounds.samples and big.latency.sampled
        assert all(len(s.values) <= bounds.samples for s in big.latency_by_hop.values())
        assert len(big.rows) == bounds.rows and len(big.streams) == bounds.streams
        assert big.stream_count > bounds.streams
        assert len(big.details) <= bounds.kept()
        assert len(big.health.error_refs) == bounds.errors < big.health.errors
        # Three rules in the capture, two named groups: the third is counted under "(other)".
        assert len(big.rules) == bounds.rules + 1
        assert "(other)" in {g.rule for g in big.rules}
        assert sum(g.count for g in big.rules) == sum(
            len(r["findings"]) for r in self._copies(records, 3_000))
        page = parse(render_report(big))
        text = " ".join(" ".join(page.text).split())
        assert "Showing the first 25 of 3000 exchanges" in text
        assert "3000 exchanges, plotted from a uniform sample of 64" in text
        assert f"The first 3 of {big.health.errors} errors" in text
        assert len([t for t, a in page.tags if t == "article"]) == len(big.details)

    def test_memory_flat(self, evidence: Path) -> None:
        """Peak memory of collecting 20,000 records is that of 2,000: nothing grows with N."""
        records = exchange_records(evidence)
        summary = BundleSummary(path="b", ok=True, records=0, exchanges=0)
        peaks = []
        for count in (2_000, 20_000):
            tracemalloc.start()
            done = collect([(summary, self._copies(records, count))], bounds=self.BOUNDS)
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            assert done.exchanges == count
        assert peaks[1] < peaks[0] * 1.25 + 256 * 1024, peaks


class TestDecisionCard:
    """The decision card names the policy, the rollback target and what would change it."""

    def test_card(self, gated: ReportData, gate_files: tuple[Path, Path]) -> None:
        """Policy file and digest, rollback version and signer, one change row per reason."""
        decision = gated.decision
        assert decision is not None and decision["action"] == "rollback"
        page = parse(render_report(gated))
        card = page.under("decision")
        assert page.under("policy-file") == "policy.toml"
        assert decision["policyDigest"] in card
        assert page.under("rollback-version") == "1.4.2"
        assert page.under("rollback-signer") == SIGNER
        assert "Clearing every reason below would make it promote" in card
        rows = changes(decision)
        assert [r.reason for r in rows] == [r["rule"] for r in decision["reasons"]]
        assert all(r.measured not in ("", "-") and r.threshold not in ("", "-") for r in rows)

    def test_thresholds_and_measurements(self, gated: ReportData) -> None:
        """Each blocking reason states its measured value against the policy's threshold."""
        assert gated.decision is not None
        window = gated.decision["sources"]["health"]["window"]
        rows = {(r.reason, r.source): r for r in changes(gated.decision)}
        rate = rows[("gate.health.error-rate", "health")]
        assert f"error rate {window['errorRate']:.4f}" in rate.measured
        assert "at most 0.0500" in rate.threshold
        allowed = math.floor(0.05 * window["samples"])
        assert f"\u2264 {allowed} errors in {window['samples']} samples" in rate.threshold
        assert f"{window['errors'] - allowed} fewer errors" in rate.change
        mismatch = next(r for r in changes(gated.decision)
                        if "request.header.mismatch" in r.change)
        assert mismatch.measured.startswith("4 finding(s)") and "edge 2" in mismatch.measured
        # Who caused it: the header mismatch is the client's request, not the server's doing.
        assert mismatch.measured.endswith(", caused by the client")
        # The rule in "to change it" links to its group, which the page holds.
        page = parse(render_report(gated))
        assert "#rule-request.header.mismatch" in page.hrefs()
        assert "rule-request.header.mismatch" in page.ids

    def test_health_thresholds(self, evidence: Path, tmp_path: Path,
                               gate_files: tuple[Path, Path]) -> None:
        """Samples, latency and duration reasons each name the measurement and the limit."""
        strict = tmp_path / "strict.toml"
        strict.write_text(POLICY.replace("min_samples = 5", "min_samples = 1000").replace(
            "min_observation_seconds = 0.0",
            "min_observation_seconds = 3600.0\nmax_latency_ms = 0.001"))
        report = load_report([evidence], policy=strict, rollback=gate_files[1])
        assert report.decision is not None
        window = report.decision["sources"]["health"]["window"]
        rows = {r.reason: r for r in changes(report.decision)}
        samples = rows["gate.health.samples"]
        assert samples.measured == f"{window['samples']} samples"
        assert samples.threshold == "at least 1000 samples"
        assert samples.change.startswith(f"{1000 - window['samples']} more requests")
        latency = rows["gate.health.latency"]
        assert latency.measured == f"p95 latency {window['latencyMs']['p95']:.1f} ms"
        assert latency.threshold == "at most 0.0 ms"
        duration = rows["gate.health.duration"]
        assert duration.measured == f"{window['observationSeconds']:.1f} s observed"
        assert duration.threshold == "at least 3600.0 s"

    def test_hold(self, evidence: Path, tmp_path: Path, gate_files: tuple[Path, Path],
                  capsys: pytest.CaptureFixture[str]) -> None:
        """An untrusted signer: hold, the target shown unverified, and what it would become."""
        untrusted = attest(tmp_path, "someone@elsewhere", capsys)
        held = load_report([evidence], policy=gate_files[0], rollback=untrusted)
        assert held.decision is not None and held.decision["action"] == "hold"
        page = parse(render_report(held))
        card = page.under("decision")
        assert "NOT VERIFIED" in card and page.under("rollback-signer") == "someone@elsewhere"
        assert "With a verified target it would be rollback" in card
        assert any(r.source == "rollback" and "attest" in r.change
                   for r in changes(held.decision))

    def test_no_decision(self, data: ReportData) -> None:
        """Without a policy the card says so and gives the conformance verdict only."""
        text = parse(render_report(data)).under("decision")
        assert "no gate decision (run" in text and "exchanges without findings" in text


class TestHealthSection:
    """Health shows the gate's window, its thresholds and links every counted error."""

    def test_errors_are_the_gates(self, gated: ReportData, evidence: Path,
                                  gate_files: tuple[Path, Path]) -> None:
        """The errors counted, and the window's samples, are exactly the gate's."""
        decision = evaluate_files([evidence], *gate_files).to_json()
        window = decision["sources"]["health"]["window"]
        health = gated.health
        assert (health.samples, health.errors) == (window["samples"], window["errors"])
        assert health.hop == "edge" and window["errors"] == len(health.error_refs) >= 1
        # The header mismatches the client sent, refused with 400/-32020: the client's doing,
        # counted apart and not as errors, by the gate and the page alike.
        assert health.rejected == window["errorCounts"]["clientRejected"] >= 2
        assert all(ref.hop == "edge" for ref, _ in health.error_refs)
        assert all(kinds and "http_4xx" not in kinds for _, kinds in health.error_refs)

    def test_linked_samples_window_thresholds(self, gated: ReportData) -> None:
        """Every error links to an exchange in the view; window and thresholds are shown."""
        page = parse(render_report(gated))
        section = page.under("health")
        for ref, _ in gated.health.error_refs:
            assert f"#{ref.anchor}" in page.hrefs() and ref.anchor in page.ids
        assert "FAIL" in section and "error rate" in section and "\u2264 0.0500" in section
        assert (f"{gated.health.samples} requests, {gated.health.errors} server-side errors"
                in section)
        assert f"{gated.health.rejected} request(s) the client got wrong" in section
        assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z \u2192 ", section)
        assert "fail" in page.under("health").split("error rate")[1][:40]


class TestFindingsSection:
    """Findings are grouped by rule with strength, citation, count and linked examples."""

    def test_grouped(self, data: ReportData) -> None:
        """One row per rule; the mismatch row links its first and last example."""
        page = parse(render_report(data))
        rows = [a for t, a in page.tags if t == "tr" and str(a.get("id", "")).startswith("rule-")]
        assert len(rows) == len(data.rules)
        row = page.under("rule-request.header.mismatch")
        group = next(g for g in data.rules if g.rule == "request.header.mismatch")
        assert group.first is not None and group.last is not None
        assert group.first.anchor != group.last.anchor
        assert "violation" in row and " 4 " in f" {row} "
        assert group.first.exchange_id in row and group.last.exchange_id in row
        # The spec is cited by its public address, never a path only the developers have.
        (first, *_rest) = citations(CATALOG["request.header.mismatch"].cite)
        assert first.url is not None and first.url.startswith("https://modelcontextprotocol.io/")
        assert first.url in row and first.text in row and "shared/spec" not in row
        for anchor in (group.first.anchor, group.last.anchor):
            assert f"#{anchor}" in page.hrefs() and anchor in page.ids

    def test_warnings(self, single_hop: Path) -> None:
        """A SHOULD rule is labelled a warning, never a violation."""
        report = load_report([single_hop])
        warned = [g for g in report.rules if g.strength == "should"]
        page = parse(render_report(report))
        for group in warned:
            assert "warning" in page.under(f"rule-{group.rule}")
            assert "violation" not in page.under(f"rule-{group.rule}")


class TestExchangeView:
    """The exchange view shows the recorded (redacted) request, response and SSE events."""

    def test_redacted_request_response_events(self, data: ReportData, evidence: Path) -> None:
        """A kept SSE exchange shows every event; the bearer token shows only redacted."""
        page_text = render_report(data)
        page = parse(page_text)
        assert TOKEN not in page_text
        records = {r["exchangeId"]: r for r in exchange_records(evidence)}
        streamed = [d for d in data.details if d.event_count > 1]
        assert streamed
        for detail in streamed:
            view = page.under(detail.ref.anchor)
            assert f"SSE events ({len(records[detail.ref.exchange_id]['origin']['sse'])})" in view
            assert "notifications/progress" in view
        echo = [d for d in data.details if d.name == "echo" and "hi " in d.request_body]
        assert echo
        view = page.under(echo[0].ref.anchor)
        assert "Authorization: Bearer [REDACTED]" in view and '"text": "hi' in view
        assert '"result"' in view

    def test_only_recorded_fields(self, data: ReportData, evidence: Path) -> None:
        """Headers shown are the recorded ingress and origin headers, nothing else."""
        records = {r["exchangeId"]: r for r in exchange_records(evidence)}
        for detail in data.details:
            recorded = records[detail.ref.exchange_id]
            assert list(detail.request_headers) == [tuple(p) for p in
                                                    recorded["ingress"]["headers"]]
            assert list(detail.response_headers) == [tuple(p) for p in
                                                     (recorded["origin"] or {}).get("headers", [])]


class TestHopsSection:
    """Between-hops appears only for a capture with hop comparisons."""

    def test_single_hop(self, single_hop: Path) -> None:
        """One hop: a per-hop table and no (empty) between-hops section."""
        report = load_report([single_hop])
        page = parse(render_report(report))
        assert report.hops == ("tap",) and report.hop_comparisons == 0
        assert "between-hops" not in page.ids
        assert "Between hops" not in page.under("hops") and "box" not in page.under("hops")

    def test_two_hops(self, data: ReportData) -> None:
        """Two hops: the box between them, what it changed, and the pair's exchanges."""
        page = parse(render_report(data))
        assert "between-hops" in page.ids
        text = page.under("hops")
        assert HOP_PAIR.search(text) and "edge \u2192 inner" in text and "1 changed" in text
        for ref in data.hop_changes[0].exchanges:
            assert f"#{ref.anchor}" in page.hrefs()


class TestPlots:
    """The plots keep the legend out of the plot area and label both axes, by construction."""

    @pytest.mark.parametrize("values", [
        [1.0, 2.0, 3.0], [0.01, 0.5, 3.0, 700.0, 90_000.0], [5.0] * 40,
        [float(v) for v in range(1, 2_000)],
    ])
    def test_geometry(self, values: list[float]) -> None:
        """The legend band lies above the plot area; every data mark lies inside it."""
        for svg in (report_plots.histogram_svg(values, len(values)),
                    report_plots.percentile_svg(values, len(values))):
            legend = re.search(r'<rect class="legend-box" x="[\d.]+" y="([\d.]+)" '
                               r'width="[\d.]+" height="([\d.]+)"', svg)
            assert legend is not None
            assert float(legend[1]) + float(legend[2]) < report_plots.TOP
            ys = [float(y) for y in re.findall(r'class="[^"]*data[^"]*"[^>]*?\by[12]?="([\d.]+)"',
                                                svg)]
            ys += [float(y) for y in re.findall(r'\bcy="([\d.]+)"', svg)[3:]]
            ys += [float(p.split(",")[1]) for p in
                   " ".join(re.findall(r'points="([^"]+)"', svg)).split()]
            assert ys and all(report_plots.TOP - 4 <= y <= report_plots.BASE for y in ys)
            assert len(re.findall(r'class="axis-label"', svg)) == 2

    def test_curve_holds_the_percentiles(self) -> None:
        """Each marked percentile's dot lies on the nearest-rank step curve."""
        values = [float(v) for v in (1, 2, 3, 5, 8, 13, 21, 34, 55, 89)]
        svg = report_plots.percentile_svg(values, len(values))
        points = [tuple(map(float, p.split(","))) for p in
                  re.search(r'points="([^"]+)"', svg)[1].split()]  # type: ignore[index]
        for cx, cy in re.findall(r'<circle class="data" cx="([\d.]+)" cy="([\d.]+)"', svg):
            x, y = float(cx), float(cy)
            assert any(a[0] <= x <= b[0] and a[1] == b[1] == y
                       for a, b in itertools.pairwise(points))


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
        exchange = {"kind": "exchange", "exchangeId": evil, "hop": evil, "era": evil,
                    "method": evil, "rpcId": 1, "ingress": {"receivedAt": 1.0, "headers": [
                        [evil, evil]], "body": {"params": {"name": evil}}},
                    "origin": {"status": 500, "body": {"error": {"message": evil}},
                               "sse": [{"at": 1.2, "event": evil, "id": evil, "data": evil}],
                               "headers": [[evil, evil]], "endAt": 1.5},
                    "egress": {"endAt": 1.5}, "findings": [
                        {"rule": evil, "boundary": evil, "message": evil}]}
        pair = {"kind": "hop-comparison", "box": evil, "between": [evil, evil],
                "exchangeIds": [evil, evil], "findings": [{"rule": "hop.body-changed",
                                                          "message": evil}]}
        summary = BundleSummary(path=evil, ok=False, records=2, exchanges=1, errors=1,
                                problems=(evil,))
        decision = {"action": evil, "policyDigest": evil, "reasons": [
            {"rule": evil, "findings": [evil], "message": evil, "details": {"box": evil}},
            {"rule": "gate.conformance", "findings": [evil], "message": evil,
             "details": {"count": 1, "hops": {evil: 1}}}],
            "sources": {evil: {"passed": False}},
            "rollback": {"given": True, "previousVersion": evil, "signer": evil}}
        page = render_report(collect([(summary, [exchange, pair])], decision=decision,
                                     policy_path=evil))
        tags = {tag for tag, _ in parse(page).tags}
        assert "img" not in tags and "script" not in tags
        assert evil not in page
        assert all(h.startswith("#") for h in parse(page).hrefs())

    def test_control_characters_shown_not_obeyed(self) -> None:
        """Terminal escapes, CR/LF and a bidi override in names, messages and bodies reach
        the page as visible escapes: a reader (or ``cat``) sees what was sent, and a
        right-to-left override cannot reorder the text around it."""
        evil = "evil\x1b]8;;https://x.invalid/\x07\x1b[2J\r\nFAKE LINE\u202egnp.exe\x9b31m"
        exchange = {"kind": "exchange", "exchangeId": "x1", "hop": "edge", "era": "modern",
                    "method": "tools/call", "rpcId": 1, "ingress": {
                        "receivedAt": 1.0, "headers": [["Mcp-Name", evil]],
                        "body": {"method": "tools/call", "params": {"name": evil}}},
                    "origin": {"status": 200, "body": {"error": {"message": evil}},
                               "sse": [{"at": 1.2, "event": "message", "data": evil}],
                               "headers": [], "endAt": 1.5},
                    "egress": {"endAt": 1.5}, "findings": [
                        {"rule": "response.id", "boundary": "response", "message": evil}]}
        summary = BundleSummary(path="b", ok=False, records=1, exchanges=1, errors=1,
                                problems=(evil,))
        page = render_report(collect([(summary, [exchange])]))
        unsafe = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
        assert unsafe.search(page) is None, unsafe.findall(page)[:5]
        assert "evil\\x1b]8;;" in page and "\\u202egnp.exe" in page

    def test_self_contained(self, data: ReportData) -> None:
        """No external asset: no src, no link outside the page, no script; a strict CSP."""
        page = render_report(data)
        parsed = parse(page)
        tags = parsed.tags
        assert not [a for _, attrs in tags for a in attrs if a == "src"]
        assert parsed.hrefs() and all(h.startswith("#") for h in parsed.hrefs())
        assert not {"link", "script", "img", "iframe", "object"} & {t for t, _ in tags}
        assert "@import" not in page and "url(" not in page
        csp = [a["content"] for t, a in tags if t == "meta"
               and a.get("http-equiv") == "Content-Security-Policy"]
        assert csp and (csp[0] or "").startswith("default-src 'none'")

    def test_sections(self, data: ReportData) -> None:
        """Every section is there, every in-page link has a target, the plots mark p50-p99."""
        page = render_report(data)
        parsed = parse(page)
        ids = [a.get("id") for t, a in parsed.tags if t == "section"]
        assert ids == ["decision", "summary", "health", "rules", "hops", "latency", "sse",
                       "exchanges", "exchange-view"]
        assert {h[1:] for h in parsed.hrefs()} <= set(parsed.ids)
        marks = [a.get("data-percentile") for t, a in parsed.tags
                 if t == "g" and "data-percentile" in a]
        assert marks == ["p50", "p95", "p99"] * 2
        assert [t for t, _ in parsed.tags].count("svg") == 2

    def test_row_limit(self, data: ReportData) -> None:
        """The exchange index stops at max_rows and says so."""
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
        assert summary["rules"]["request.header.mismatch"] == 4
        assert out.read_text().startswith("<!DOCTYPE html>")

    def test_max_rows(self, evidence: Path, tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
        """--max-rows bounds the exchange index while it is collected."""
        out = tmp_path / "report.html"
        assert main(["report", str(evidence), "--out", str(out), "--max-rows", "3"]) == 0
        capsys.readouterr()
        rows = out.read_text().split('<table class="exchanges">')[1].split("</table>")[0]
        assert rows.count("<tr>") == 4

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


# Run in the browser on a test copy of the page (the report itself has no script): the
# rendered boxes of each plot's legend against its data marks, tick labels and axis labels.
_GEOMETRY = """
<script>
const box = (el) => el.getBoundingClientRect();
const meet = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
const out = [];
for (const svg of document.querySelectorAll("svg.plot")) {
  const legend = [...svg.querySelectorAll(".legend *")].map(box);
  const others = [...svg.querySelectorAll(".data, .tick, .axis-label, .plot-title")];
  const labels = [...svg.querySelectorAll(".axis-label")];
  const ticks = [...svg.querySelectorAll(".tick")].map(box);
  out.push({
    plot: svg.getAttribute("class"), legend: legend.length, others: others.length,
    labels: labels.map((l) => l.textContent),
    overlaps: others.filter((o) => legend.some((l) => meet(l, box(o)))).map((o) =>
      o.getAttribute("class") + ":" + (o.textContent || "")),
    labelOverlaps: labels.filter((l) => ticks.some((t) => meet(t, box(l)))).length,
  });
}
document.body.setAttribute("data-geometry", JSON.stringify(out));
</script>
"""


@pytest.fixture
def rendered(gated: ReportData, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The report with the gate's decision, written to a file for the browser."""
    page = tmp_path / "report.html"
    page.write_text(render_report(gated))
    yield _chromium(), page


class TestBrowser:
    """Headless Chromium renders the page; the assertions read the rendered DOM."""

    def test_rendered_dom(self, rendered: tuple[str, Path], tmp_path: Path) -> None:
        """The decision card, a rule group, the hop box, the plots and the exchange view."""
        binary, page = rendered
        result = _browser(binary, tmp_path / "profile", "--dump-dom", page.as_uri())
        assert result.returncode == 0, result.stderr[-2000:]
        dom = parse(result.stdout)
        assert re.search(r'id="action">rollback<', result.stdout)
        assert dom.under("rollback-version") == "1.4.2"
        assert "What would change the decision" in dom.under("decision")
        assert "request.header.mismatch violation" in dom.under("rule-request.header.mismatch")
        hops = dom.under("hops")
        assert HOP_PAIR.search(hops) and "edge \u2192 inner" in hops and "1 changed" in hops
        marks = {a.get("data-percentile") for t, a in dom.tags if t == "g"}
        assert {"p50", "p95", "p99"} <= marks
        assert [t for t, _ in dom.tags].count("svg") == 2
        assert "SSE events" in dom.under("exchange-view")
        text = " ".join(" ".join(dom.text).split())
        # The hostile tool name is text in the rendered DOM, never an element.
        assert SCRIPT_NAME in text
        assert "script" not in {t for t, _ in dom.tags}

    def test_plot_geometry(self, rendered: tuple[str, Path], tmp_path: Path) -> None:
        """In the rendered page no legend box meets a data mark, tick or axis label."""
        binary, page = rendered
        probe = tmp_path / "geometry.html"
        html = page.read_text()
        html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
        probe.write_text(html.replace("</body>", _GEOMETRY + "</body>"))
        result = _browser(binary, tmp_path / "profile", "--window-size=1280,1600",
                          "--dump-dom", probe.as_uri())
        assert result.returncode == 0, result.stderr[-2000:]
        found = re.search(r'data-geometry="([^"]*)"', result.stdout)
        assert found is not None, result.stdout[:500]
        plots: list[Mapping[str, Any]] = orjson.loads(
            found[1].replace("&quot;", '"').replace("&amp;", "&"))
        assert [p["plot"] for p in plots] == ["plot histogram", "plot percentiles"]
        for plot in plots:
            assert plot["legend"] > 0 and plot["others"] > 10
            assert plot["overlaps"] == [] and plot["labelOverlaps"] == 0
            assert len(plot["labels"]) == 2 and all(plot["labels"])

    def test_screenshot(self, rendered: tuple[str, Path], tmp_path: Path) -> None:
        """A 1280x4400 screenshot is produced (and refreshed in docs/ on request)."""
        binary, page = rendered
        shot = tmp_path / "report.png"
        result = _browser(binary, tmp_path / "profile", f"--screenshot={shot}",
                          "--window-size=1280,4400", page.as_uri())
        assert result.returncode == 0, result.stderr[-2000:]
        data = shot.read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
        if os.environ.get("MCP_TAP_UPDATE_SCREENSHOT") == "1":
            (REPO / "docs" / "report.png").write_bytes(data)


def test_the_changes_each_box_made_most_important_first(tmp_path: Path) -> None:
    """A hop-comparison record's changes: one table per box, rules before recorded before
    expected, array indices folded (``/result/tools/*/title``)."""
    from gate_bundles import write_bundle

    changes = [
        {"class": "jsonrpc-id", "direction": "request", "kind": "changed",
         "meaning": "expected", "path": "/id", "before": 2, "after": 1},
        *({"class": "tool-metadata", "direction": "response", "kind": "added",
           "meaning": "recorded", "path": f"/result/tools/{i}/title", "after": "T"}
          for i in range(2)),
        {"class": "param-added", "direction": "request", "kind": "added",
         "meaning": "hop.gateway.param-added",
         "path": "/params/_meta/io.modelcontextprotocol~1logLevel", "after": "debug"},
    ]
    comparison = {"kind": "hop-comparison", "traceId": "a" * 32, "box": "gw",
                  "boxKind": "mcp-gateway", "between": ["edge", "origin"],
                  "exchangeIds": ["e1", "o1"], "pairedBy": "params", "findings": [],
                  "changes": changes}
    bundle = write_bundle(tmp_path / "b", [comparison])
    data = load_report([bundle], generated="2026-01-01 00:00:00Z")
    box = data.box_changes["gw, between hop edge and hop origin"]
    assert [(c["meaning"], c["path"], c["count"]) for c in box["changes"]] == [
        ("hop.gateway.param-added", "/params/_meta/io.modelcontextprotocol~1logLevel", 1),
        ("recorded", "/result/tools/*/title", 2),
        ("expected", "/id", 1),
    ]
    html = render_report(data)
    table = html[html.index("What each box changed"):]
    assert table.index("hop.gateway.param-added") < table.index("/result/tools/*/title") < (
        table.index("<code class=\"mono\">/id</code>"))
