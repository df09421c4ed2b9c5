"""OpenTelemetry: spans per exchange reach a real OTLP/HTTP receiver, trace context honoured."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from aiohttp import web
from gateways import Gateway
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from peers import raw_modern_request
from taps import exchanges, hop_url, running_tap, tap_options

from mcp_tap.errors import InputError
from mcp_tap.logs import configure_logging
from mcp_tap.proxy.options import RecordingOptions, TracingOptions, load_options
from mcp_tap.proxy.tracing import parse_traceparent, root_flags

_TIMEOUT = 30.0
CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
META_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@dataclass
class Receiver:
    """A real OTLP/HTTP traces endpoint: decodes every export with the OTLP protobufs."""

    url: str = ""
    spans: list[dict[str, Any]] = field(default_factory=list)
    content_types: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.content_types.append(request.content_type)
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.read())
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        {
                            "resource": resource,
                            "name": span.name,
                            "kind": span.kind,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                            "events": [
                                (e.name, {a.key: _value(a.value) for a in e.attributes})
                                for e in span.events
                            ],
                            "links": [(lk.trace_id.hex(), lk.span_id.hex()) for lk in span.links],
                            "status": span.status.code,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                        }
                    )
        return web.Response(body=b"", content_type="application/x-protobuf")

    async def wait_for(self, n: int) -> list[dict[str, Any]]:
        async with asyncio.timeout(_TIMEOUT):  # a hang guard, not a timing assertion
            while len(self.spans) < n:
                await asyncio.sleep(0.05)
        return self.spans


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@pytest.fixture
async def receiver(serve_app: Any) -> AsyncIterator[Receiver]:
    """A real OTLP/HTTP receiver on loopback."""
    rec = Receiver()
    app = web.Application()
    app.router.add_post("/v1/traces", rec.handle)
    rec.url = (await serve_app(app)).rstrip("/") + "/v1/traces"
    yield rec


def _options(tmp_path: Path, origin_base: str, receiver: Receiver, **tracing: Any) -> Any:
    opts = tap_options(tmp_path, upstream=origin_base)
    return replace(
        opts,
        tracing=TracingOptions(otlp_endpoint=receiver.url, export_delay_s=0.05, **tracing),
    )


def _reset_logging() -> None:
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "mcp-tap-json"]:
        root.removeHandler(handler)
    structlog.reset_defaults()


class TestSpans:
    """One span per exchange, exported with OTLP."""

    async def test_spans_carry_semconv_attributes_and_findings(
        self,
        tmp_path: Path,
        origin_base: str,
        receiver: Receiver,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """A clean tools/call and a mismatched one give two spans with HTTP, JSON-RPC, MCP
        attributes; the finding's rule id is on its span; logs and evidence name the span."""
        configure_logging("info")
        call, body = raw_modern_request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
        async with (
            running_tap(_options(tmp_path, origin_base, receiver)) as tap,
            httpx.AsyncClient(timeout=_TIMEOUT) as client,
        ):
            good = await client.post(hop_url(tap), headers=call, json=body)
            bad_headers = {**call, "Mcp-Method": "tools/list"}
            bad = await client.post(hop_url(tap), headers=bad_headers, json={**body, "id": 2})
            spans = await receiver.wait_for(2)
        recs = exchanges(tap)
        log_lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
        _reset_logging()

        assert (good.status_code, bad.status_code) == (200, 400)
        assert receiver.content_types == ["application/x-protobuf"] * len(receiver.content_types)
        first, second = sorted(spans, key=lambda s: s["start"])
        assert first["name"] == "tools/call echo"
        assert first["kind"] == 2  # SPAN_KIND_SERVER
        assert first["resource"]["service.name"] == "mcp-tap"
        attrs = first["attributes"]
        assert attrs["http.request.method"] == "POST"
        assert attrs["http.response.status_code"] == 200
        assert attrs["url.path"] == "/mcp"
        assert attrs["rpc.system"] == "jsonrpc"
        assert attrs["rpc.method"] == attrs["mcp.method.name"] == "tools/call"
        assert attrs["rpc.jsonrpc.request_id"] == "1"
        assert attrs["gen_ai.tool.name"] == "echo"
        assert attrs["mcp.protocol.version"] == "2026-07-28"
        assert attrs["mcp_tap.hop"] == "tap"
        assert "mcp_tap.finding.rules" not in attrs and first["events"] == []
        assert first["start"] < first["end"]
        rules = second["attributes"]["mcp_tap.finding.rules"]
        assert rules == ["request.header.mismatch"]
        assert second["events"] == [
            (
                "mcp_tap.finding",
                {
                    "mcp_tap.finding.rule": "request.header.mismatch",
                    "mcp_tap.finding.boundary": "request",
                    "mcp_tap.finding.code": -32020,
                },
            )
        ]
        assert second["status"] == 0  # a 4xx is no error of a server span
        # The evidence and the exchange log lines name the very span that was exported.
        by_id = {s["attributes"]["mcp_tap.exchange_id"]: s for s in spans}
        for rec in recs:
            span = by_id[rec["exchangeId"]]
            assert rec["span"] == {
                "traceId": span["trace_id"],
                "spanId": span["span_id"],
                "sampled": True,
            }
            # One hop forwards byte-exact: no traceparent was added, so the wire has no trace
            # id and the span (a root) carries the one the evidence names.
            assert rec["traceId"] == "" and span["parent_span_id"] == ""
        lines = [line for line in log_lines if line.get("event") == "exchange"]
        assert {(line["exchange_id"], line["trace_id"]) for line in lines} == {
            (r["exchangeId"], r["span"]["traceId"]) for r in recs
        }

    async def test_the_added_traceparent_is_the_taps_span(
        self, tmp_path: Path, origin_base: str, receiver: Receiver
    ) -> None:
        """With no client trace context, the header the tap adds (two hops: correlation needs
        it) carries its span's ids and the sampled flag of its own sampling decision."""
        headers, body = raw_modern_request("tools/list")
        async with Gateway() as gateway:
            opts = tap_options(tmp_path, hops=[("edge", gateway.url), ("origin", origin_base)])
            opts = replace(opts, tracing=TracingOptions(otlp_endpoint=receiver.url,
                                                        export_delay_s=0.05))
            async with (
                running_tap(opts) as tap,
                httpx.AsyncClient(timeout=_TIMEOUT) as client,
            ):
                gateway.upstream = hop_url(tap, "origin", path="")
                answer = await client.post(hop_url(tap, "edge"), headers=headers, json=body)
                assert answer.status_code == 200
                spans = await receiver.wait_for(2)
        edge = next(r for r in exchanges(tap) if r["hop"] == "edge")
        span = next(s for s in spans if s["attributes"]["mcp_tap.exchange_id"]
                    == edge["exchangeId"])
        added = [v for k, v in edge["ingress"]["forwardedHeaders"] if k == "traceparent"]
        assert added == [f"00-{span['trace_id']}-{span['span_id']}-01"]
        assert span["parent_span_id"] == ""

    async def test_meta_traceparent_is_the_parent_and_http_one_a_link(
        self, tmp_path: Path, origin_base: str, receiver: Receiver
    ) -> None:
        """``params._meta.traceparent`` parents the span; a different HTTP one is a link, and
        both reach the origin untouched."""
        meta_tp = f"00-{META_TRACE}-00f067aa0ba902b7-01"
        http_tp = f"00-{CLIENT_TRACE}-b7ad6b7169203331-01"
        headers, body = raw_modern_request("tools/list")
        body["params"]["_meta"]["traceparent"] = meta_tp
        async with (
            running_tap(_options(tmp_path, origin_base, receiver)) as tap,
            httpx.AsyncClient(timeout=_TIMEOUT) as client,
        ):
            answer = await client.post(
                hop_url(tap), headers={**headers, "traceparent": http_tp}, json=body
            )
            (span,) = await receiver.wait_for(1)
        (rec,) = exchanges(tap)
        assert answer.status_code == 200
        assert (span["trace_id"], span["parent_span_id"]) == (META_TRACE, "00f067aa0ba902b7")
        assert span["links"] == [(CLIENT_TRACE, "b7ad6b7169203331")]
        assert [v for k, v in rec["ingress"]["forwardedHeaders"] if k == "traceparent"] == [http_tp]
        assert rec["ingress"]["body"]["params"]["_meta"]["traceparent"] == meta_tp

    async def test_an_unsampled_parent_is_not_sampled(
        self, tmp_path: Path, origin_base: str, receiver: Receiver
    ) -> None:
        """A client's traceparent with sampled=0 gives no exported span, the header goes on
        unchanged, and the evidence says the span was not sampled."""
        tp = f"00-{CLIENT_TRACE}-b7ad6b7169203331-00"
        headers, body = raw_modern_request("tools/list")
        marker, marker_body = raw_modern_request("ping", request_id=7)
        async with (
            running_tap(_options(tmp_path, origin_base, receiver)) as tap,
            httpx.AsyncClient(timeout=_TIMEOUT) as client,
        ):
            await client.post(hop_url(tap), headers={**headers, "traceparent": tp}, json=body)
            # A sampled exchange after it: once its span arrives, the first one had its chance.
            await client.post(hop_url(tap), headers=marker, json=marker_body)
            spans = await receiver.wait_for(1)
            tap.recorder.tracing.flush()  # type: ignore[union-attr]
        unsampled, marked = exchanges(tap)
        assert [s["attributes"]["rpc.method"] for s in spans] == ["ping"]
        assert unsampled["span"] == {
            "traceId": CLIENT_TRACE,
            "spanId": unsampled["span"]["spanId"],
            "sampled": False,
        }
        assert [v for k, v in unsampled["ingress"]["forwardedHeaders"] if k == "traceparent"] == [
            tp
        ]
        assert marked["span"]["sampled"] is True

    async def test_spans_come_from_the_recording_process(
        self, tmp_path: Path, origin_base: str, receiver: Receiver
    ) -> None:
        """With the recording process, its spans reach the receiver too."""
        opts = replace(
            _options(tmp_path, origin_base, receiver), recording=RecordingOptions(mode="process")
        )
        headers, body = raw_modern_request("tools/list")
        async with running_tap(opts) as tap, httpx.AsyncClient(timeout=_TIMEOUT) as client:
            assert (await client.post(hop_url(tap), headers=headers, json=body)).status_code == 200
            (span,) = await receiver.wait_for(1)
        (rec,) = exchanges(tap)
        assert rec["span"]["spanId"] == span["span_id"]
        assert span["attributes"]["mcp.method.name"] == "tools/list"


class TestTraceFlags:
    """The sampled flag of a header the tap adds."""

    def test_no_spans_means_the_flag_is_never_set(self) -> None:
        """Without an OTLP endpoint the tap records nothing, so it never claims it did."""
        assert root_flags(TracingOptions(), "f" * 32) == "00"

    def test_the_flag_follows_the_ratio_rule(self) -> None:
        """The flag is the SDK's trace-id ratio decision on the low 64 bits."""
        opts = TracingOptions(otlp_endpoint="http://127.0.0.1:4318/v1/traces", sample_ratio=0.5)
        assert root_flags(opts, "0" * 16 + "7" + "f" * 15) == "01"
        assert root_flags(opts, "0" * 16 + "8" + "0" * 15) == "00"
        assert root_flags(replace(opts, sample_ratio=0.0), "0" * 31 + "1") == "00"

    def test_invalid_traceparents_are_not_parents(self) -> None:
        """Version ff, all-zero ids and bad hex are no trace context."""
        assert parse_traceparent(f"00-{CLIENT_TRACE}-b7ad6b7169203331-01") == (
            CLIENT_TRACE,
            "b7ad6b7169203331",
            True,
        )
        for bad in (
            f"ff-{CLIENT_TRACE}-b7ad6b7169203331-01",
            f"00-{'0' * 32}-b7ad6b7169203331-01",
            f"00-{CLIENT_TRACE}-{'0' * 16}-01",
            f"00-{CLIENT_TRACE.upper()}-b7ad6b7169203331-01",
            None,
            7,
        ):
            assert parse_traceparent(bad) is None


class TestOptions:
    """``[tracing]`` options are checked as bad input."""

    def test_a_bad_endpoint_is_bad_input(self) -> None:
        """An endpoint that is not an http(s) URL is a one-line error."""
        env = {"MCP_TAP_TRACING_OTLP_ENDPOINT": "grpc://collector:4317"}
        with pytest.raises(InputError, match="otlp_endpoint"):
            load_options(None, env=env, listen="127.0.0.1:0", upstream="http://127.0.0.1:1")

    def test_a_ratio_above_one_is_bad_input(self) -> None:
        """sample_ratio is a share: at most 1."""
        env = {"MCP_TAP_TRACING_SAMPLE_RATIO": "1.5"}
        with pytest.raises(InputError, match="sample_ratio must be a number"):
            load_options(None, env=env, listen="127.0.0.1:0", upstream="http://127.0.0.1:1")

    def test_a_missing_extra_is_bad_input(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An endpoint without the [otel] extra installed says how to install it."""
        monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if absent
        env = {"MCP_TAP_TRACING_OTLP_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}
        with pytest.raises(InputError, match=r"mcp-tap-proxy\[otel\]"):
            load_options(None, env=env, listen="127.0.0.1:0", upstream="http://127.0.0.1:1")
