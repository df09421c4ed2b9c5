"""Prometheus metrics: exact series, promtool-clean exposition, a real Prometheus scraping."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from peers import free_port, raw_modern_request
from taps import hop_url, running_tap, tap_options

from mcp_tap.proxy.metrics import ADDED_LATENCY_BUCKETS_S, ExchangeTally, Metrics
from mcp_tap.proxy.server import TapServer

_TIMEOUT = 60.0
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
PROMETHEUS = "/usr/bin/prometheus"

# The query an Argo Rollouts AnalysisTemplate (prometheus provider) would run against the
# tap: the share of exchanges whose client got a 5xx or no answer at all.
ERROR_RATIO_QUERY = (
    'sum(mcptap_answers_total{status_class=~"5xx|none"} or vector(0)) / sum(mcptap_answers_total)'
)


def _promtool(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PROMTOOL, "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
        check=False,
    )


def _admin(tap: TapServer, path: str) -> str:
    assert tap.admin_address is not None
    host, port = tap.admin_address
    return f"http://{host}:{port}{path}"


async def _until(condition: Callable[[], Any]) -> Any:
    async with asyncio.timeout(_TIMEOUT):  # a hang guard, not a timing assertion
        while not (result := await condition()):
            await asyncio.sleep(0.2)
        return result


async def _traffic(tap: TapServer, client: httpx.AsyncClient) -> list[int]:
    """Three clean tools/list calls and one with a mismatched Mcp-Method (answered 400)."""
    statuses = []
    for i in range(3):
        headers, body = raw_modern_request("tools/list", request_id=i)
        statuses.append((await client.post(hop_url(tap), headers=headers, json=body)).status_code)
    headers, body = raw_modern_request("tools/list", request_id=9)
    bad = {**headers, "Mcp-Method": "tools/call"}
    statuses.append((await client.post(hop_url(tap), headers=bad, json=body)).status_code)
    return statuses


class TestSeries:
    """The tap's own series and how they are rendered."""

    def test_a_counter_past_a_million_stays_exact(self) -> None:
        """A counter far past six significant digits still moves by one."""
        m = Metrics()
        m.exchanges.inc(10_000_000, hop="tap", era="modern")
        m.exchanges.inc(hop="tap", era="modern")
        assert 'mcptap_exchanges_total{era="modern",hop="tap"} 1.0000001e+07' in m.render()

    def test_label_values_escape_newlines_and_quotes(self) -> None:
        """A newline or quote in a label value is escaped, not a broken line."""
        m = Metrics()
        m.tap_errors.inc(hop='a"b\nc', reason="upstream-timeout")
        text = m.render()
        assert 'mcptap_tap_errors_total{hop="a\\"b\\nc",reason="upstream-timeout"} 1.0' in text
        assert _promtool(text).returncode == 0

    def test_added_latency_buckets_start_at_50_microseconds(self) -> None:
        """A 70 us added latency lands in the 100 us bucket, not the 50 us one."""
        m = Metrics()
        m.added.observe(0.00007, hop="tap")
        lines = m.render().splitlines()
        assert ADDED_LATENCY_BUCKETS_S[0] == 0.00005
        assert 'mcptap_added_latency_seconds_bucket{hop="tap",le="5e-05"} 0.0' in lines
        assert 'mcptap_added_latency_seconds_bucket{hop="tap",le="0.0001"} 1.0' in lines

    def test_answers_are_counted_by_status_class(self) -> None:
        """The forwarder's own counts, read at scrape time: answers per status class (no
        answer at all is its own class, a class never seen has no line), in flight per hop,
        and two readers of one hop add up."""
        m = Metrics()
        m.forwarder(lambda: {"tap": (1, [1, 0, 2, 0, 1, 1]), "idle": (0, [0] * 6)})
        m.forwarder(lambda: {"tap": (2, [0, 0, 1, 0, 0, 0])})
        lines = m.render().splitlines()
        assert 'mcptap_answers_total{hop="tap",status_class="2xx"} 3.0' in lines
        assert 'mcptap_answers_total{hop="tap",status_class="4xx"} 1.0' in lines
        assert 'mcptap_answers_total{hop="tap",status_class="5xx"} 1.0' in lines
        assert 'mcptap_answers_total{hop="tap",status_class="none"} 1.0' in lines
        assert not [line for line in lines if 'status_class="1xx"' in line]
        assert not [line for line in lines if line.startswith('mcptap_answers_total{hop="idle"')]
        assert 'mcptap_in_flight_exchanges{hop="tap"} 3.0' in lines
        assert 'mcptap_in_flight_exchanges{hop="idle"} 0.0' in lines
        assert _promtool("\n".join(lines) + "\n").returncode == 0

    def test_restore_leaves_the_forwarder_series_alone(self) -> None:
        """A snapshot from the recording process never overwrites in-flight or answers."""
        recording, proxy = Metrics(), Metrics()
        recording.exchanges.inc(hop="tap", era="modern")
        proxy.forwarder(lambda: {"tap": (1, [0, 0, 1, 0, 0, 0])})
        proxy.restore(recording.snapshot())
        lines = proxy.render().splitlines()
        assert proxy.exchanges.value(hop="tap", era="modern") == 1
        assert 'mcptap_in_flight_exchanges{hop="tap"} 1.0' in lines
        assert 'mcptap_answers_total{hop="tap",status_class="2xx"} 1.0' in lines

    def test_evidence_counters_get_one_family_each(self) -> None:
        """Records written, records lost, bytes and segments are separate families."""
        m = Metrics()
        counters = {"written": 5, "lost": 2, "lost_disk": 1, "lost_invalid": 0}
        m.evidence(lambda: {**counters, "bytes_written": 4096, "segments": 2, "disk_errors": 1})
        lines = m.render().splitlines()
        assert "mcptap_evidence_records_written_total 5.0" in lines
        assert 'mcptap_evidence_records_lost_total{reason="queue"} 2.0' in lines
        assert 'mcptap_evidence_records_lost_total{reason="disk"} 1.0' in lines
        assert "mcptap_evidence_written_bytes_total 4096.0" in lines
        assert "mcptap_evidence_segments_opened_total 2.0" in lines
        assert "mcptap_evidence_disk_errors_total 1.0" in lines

    def test_build_and_process_info_are_exposed(self) -> None:
        """Build info, process and platform collectors are in every scrape."""
        text = Metrics().render()
        assert 'mcptap_build_info{python="' in text
        assert "process_resident_memory_bytes " in text
        assert "process_start_time_seconds " in text
        assert "python_info{" in text


class TestPromtool:
    """``promtool check metrics`` on what a running tap exposes."""

    def test_promtool_rejects_the_old_style(self) -> None:
        """promtool does fail a counter without _total (so a clean pass means something)."""
        old = "# HELP mcptap_evidence_records x\n# TYPE mcptap_evidence_records counter\n"
        result = _promtool(old + 'mcptap_evidence_records{kind="lost"} 0\n')
        assert 'counter metrics should have "_total" suffix' in result.stdout + result.stderr

    async def test_a_running_taps_metrics_are_promtool_clean(
        self, tmp_path: Path, origin_base: str
    ) -> None:
        """After real traffic (a 400 among 200s), the scrape passes promtool with no remark."""
        async with (
            running_tap(tap_options(tmp_path, upstream=origin_base, admin=True)) as tap,
            httpx.AsyncClient(timeout=_TIMEOUT) as client,
        ):
            statuses = await _traffic(tap, client)

            async def answered() -> bool:
                return tap.metrics.exchanges.value(hop="tap", era="modern") >= 4

            await _until(answered)
            scrape = await client.get(_admin(tap, "/metrics"))
        assert statuses == [200, 200, 200, 400]
        assert scrape.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        lines = scrape.text.splitlines()
        assert 'mcptap_answers_total{hop="tap",status_class="2xx"} 3.0' in lines
        assert 'mcptap_answers_total{hop="tap",status_class="4xx"} 1.0' in lines
        assert 'mcptap_in_flight_exchanges{hop="tap"} 0.0' in lines
        result = _promtool(scrape.text)
        assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.fixture
async def prometheus(tmp_path: Path) -> AsyncIterator[Callable[[int], Any]]:
    """Start a real Prometheus (Debian's package) that scrapes a given admin port."""
    if not Path(PROMETHEUS).exists():
        pytest.fail(f"{PROMETHEUS} is missing: apt-get install prometheus (scripts/test.sh)")
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Any] = []

    async def start(target_port: int) -> str:
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: mcp-tap\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
        )
        port = free_port()
        log = (tmp_path / "prometheus.log").open("wb")
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        return f"http://127.0.0.1:{port}"

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    for log in logs:
        log.close()


class TestPrometheusServer:
    """A real Prometheus scrapes the tap and evaluates an AnalysisTemplate's query."""

    async def test_prometheus_scrapes_the_tap_and_answers_the_analysis_query(
        self, tmp_path: Path, origin_base: str, prometheus: Callable[[int], Any]
    ) -> None:
        """The scrape is healthy and the error-ratio and findings queries see the traffic."""
        async with (
            running_tap(tap_options(tmp_path / "ev", upstream=origin_base, admin=True)) as tap,
            httpx.AsyncClient(timeout=_TIMEOUT) as client,
        ):
            assert tap.admin_address is not None
            base = await prometheus(tap.admin_address[1])
            statuses = await _traffic(tap, client)

            async def query(expr: str) -> list[Any] | None:
                try:
                    answer = await client.get(f"{base}/api/v1/query", params={"query": expr})
                except httpx.TransportError:
                    return None  # Prometheus is still starting
                if answer.status_code != 200:
                    return None
                data = answer.json()
                assert data["status"] == "success", data
                result: list[Any] = data["data"]["result"]
                return result or None

            async def seen_all() -> list[Any] | None:
                result = await query('sum(mcptap_answers_total{hop="tap"}) == 4')
                return result

            await _until(seen_all)
            targets = (await client.get(f"{base}/api/v1/targets")).json()
            ratio = await query(ERROR_RATIO_QUERY)
            findings = await query('sum(mcptap_findings_total{rule="request.header.mismatch"})')
            client_errors = await query('sum(mcptap_answers_total{status_class="4xx"})')

        assert statuses == [200, 200, 200, 400]
        (target,) = targets["data"]["activeTargets"]
        assert target["health"] == "up", target
        assert ratio is not None and float(ratio[0]["value"][1]) == 0.0
        assert findings is not None and float(findings[0]["value"][1]) == 1.0
        assert client_errors is not None and float(client_errors[0]["value"][1]) == 1.0


def test_a_batch_of_exchanges_counts_as_one_update_each() -> None:
    """add_exchanges (the recording process, per batch) leaves the very series the per-update
    calls leave: counts, buckets and float sums alike."""
    tallies = [
        ExchangeTally("a", "modern", ["x.rule", "y.rule"], None, 0.0012, 0.0007, None, 0.00004),
        ExchangeTally("a", "modern", [], "connect", None, None, None, 0.0001),
        ExchangeTally("b", "legacy", ["x.rule"], None, 0.3, 0.1, 0.05, None),
        ExchangeTally("a", "unknown", ["x.rule", "x.rule"], None, 2.5, 2.0, 1.5, 0.002),
    ]
    batched, single = Metrics(), Metrics()
    batched.add_exchanges(tallies)
    for hop, era, rules, phase, latency, first_byte, first_event, added in tallies:
        single.exchanges.inc(hop=hop, era=era)
        for rule in rules:
            single.findings.inc(hop=hop, rule=rule)
        if phase is not None:
            single.tap_errors.inc(hop=hop, reason=phase)
        for histogram, value in ((single.latency, latency), (single.first_byte, first_byte),
                                 (single.sse_first_event, first_event), (single.added, added)):
            if value is not None:
                histogram.observe(value, hop=hop)
    assert batched.snapshot() == single.snapshot()
    assert batched.findings.value(hop="a", rule="x.rule") == 3
    assert list(batched.families()) == list(single.families())
