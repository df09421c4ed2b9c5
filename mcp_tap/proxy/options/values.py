"""The proxy's option value objects, one per config section, and the checks of a listen
address, an upstream URL, a hop name and the ``[tracing]`` section."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcp_tap.core.eras import MODERN_VERSIONS
from mcp_tap.core.hashing import DigestKey
from mcp_tap.core.hops import HopThresholds
from mcp_tap.core.redaction import RedactionPolicy
from mcp_tap.errors import InputError
from mcp_tap.urls import check_http_url


def parse_listen(value: str, what: str = "listen") -> tuple[str, int]:
    """Parse ``HOST:PORT`` (IPv6 as ``[::1]:PORT``) into a host and a port."""
    host, sep, port = value.rpartition(":")
    if (
        not sep
        or not (port.isascii() and port.isdigit() and len(port) <= 5)
        or not 0 <= int(port) <= 65535
        or not value.isprintable()
    ):
        raise InputError(f"{what}: {value!r} is not HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def check_upstream(value: str, what: str = "upstream") -> str:
    """Validate an upstream base URL (see :func:`mcp_tap.urls.check_http_url`), minus a
    trailing ``/``."""
    return check_http_url(value, what).rstrip("/")


def check_hop_name(value: str, what: str = "hop name") -> str:
    """A hop name: non-empty, printable, no whitespace (it is a log field and a label)."""
    if not value or not value.isprintable() or any(ch.isspace() for ch in value):
        raise InputError(
            f"{what}: {value!r} is not a hop name (non-empty, printable, no whitespace)"
        )
    return value


@dataclass(frozen=True, slots=True)
class HopOptions:
    """One listener: its name, where it listens and the upstream it forwards to.

    ``box``: what the upstream is when another hop stands behind it (two hops in one tap):
    ``http`` (a load balancer, mesh or HTTP proxy: bodies pass unchanged) or
    ``mcp-gateway`` (an MCP server to the client, an MCP client to the origin).
    """

    name: str
    listen: str
    upstream: str
    box: str = "http"


@dataclass(frozen=True, slots=True)
class EvidenceOptions:
    """Where and how evidence bundles are written."""

    dir: str = "evidence"
    max_segment_bytes: int = 64 * 1024 * 1024
    max_segment_age_s: float = 300.0
    queue_size: int = 10000
    # Ed25519 key that signs manifests and bundle.json: a key file (PEM or 64 hex digits),
    # else the environment variable named here; neither set: bundles are marked unsigned.
    signing_key_file: str = ""
    signing_key_env: str = "MCP_TAP_SIGNING_KEY"
    # Seal the gate's tallies into every segment's manifest (mcp_tap.gate.segments), so the
    # gate merges them instead of reading the records; costs the recording process CPU.
    tallies: bool = True
    # Ship every sealed segment, its manifest and bundle.json to s3://BUCKET/PREFIX, under
    # PREFIX/<release>/<pod>/<bundle>/ (mcp_tap.evidence.shipping); "" ships nothing.
    # Credentials and endpoint come from the AWS_* environment only, never from here.
    ship: str = ""
    release: str = ""  # the release label keys carry (required with ship)
    spool_max_bytes: int = 1 << 30  # sealed bytes that may wait for the store
    retention: str = ""  # Object Lock retention of shipped objects ("7d", "12h"; "": none)
    lock_mode: str = "COMPLIANCE"  # or GOVERNANCE


RECORDING_MODES = ("inline", "process")


@dataclass(frozen=True, slots=True)
class RecordingOptions:
    """Where exchanges are judged, redacted and written.

    ``process`` (the default): in a separate recording process, so judging runs on another
    CPU and never delays the next request; when ``queue_size`` captures wait for it, more are
    counted lost and leave a gap in the evidence. ``inline``: on the forwarding event loop,
    right after the exchange ends (one process, no hand-over).

    ``max_wait_ms`` (process mode): when half of ``queue_size`` waits for the recording
    process, the forwarder stops reading from its clients until 3/8 are left, for at
    most this long per pause (see :mod:`mcp_tap.proxy.holdback`); 0 turns this off.
    """

    mode: str = "process"
    queue_size: int = 10000
    # 500 ms: long enough for the recording process to take an eighth of the default queue
    # (1250 captures; the time it takes at full load is in docs/benchmark.md, "Figures the
    # code relies on") so that a full-load backlog drains without a loss; short enough that
    # a stalled or restarting recording process delays a client by at most half a second
    # (far under any client's timeout) before losses are counted.
    max_wait_ms: int = 500


@dataclass(frozen=True, slots=True)
class CaptureOptions:
    """How much of each body is kept for judging (the digest always covers every byte)."""

    max_body_bytes: int = 1024 * 1024
    max_sse_events: int = 10000


@dataclass(frozen=True, slots=True)
class UpstreamOptions:
    """The upstream leg: timeouts, TLS, connection pool."""

    connect_timeout_s: float = 10.0
    idle_timeout_s: float = 300.0
    verify_tls: bool = True
    ca_file: str = ""
    pool_size: int = 100  # idle connections kept for reuse
    # Connections to the upstream at once (each bound to one exchange in flight); at the cap
    # the tap answers 503 with ``X-Mcp-Tap-Error: saturated``.
    max_connections: int = 1024
    keepalive_s: float = 2.0  # how long an idle upstream connection is kept for reuse
    host: str = "preserve"  # or "rewrite": the origin sees the upstream's authority as Host


HOST_MODES = ("preserve", "rewrite")


@dataclass(frozen=True, slots=True)
class ListenerOptions:
    """The client side of each hop: limits and timeouts of the forwarding core."""

    head_timeout_s: float = 10.0  # a request head must arrive whole within this (slowloris)
    max_head_bytes: int = 65536  # a larger head gets 431
    write_timeout_s: float = 30.0  # a client that reads nothing for this long is cut
    drain_timeout_s: float = 10.0  # on SIGTERM, exchanges still running after this are cut


@dataclass(frozen=True, slots=True)
class TracingOptions:
    """W3C trace context and OpenTelemetry spans (:mod:`mcp_tap.proxy.tracing`).

    ``add_traceparent``: add a ``traceparent`` when the client sent none and two hops or
    more run here (hop correlation); ``sampled``: that header's sampled flag when no spans
    are exported (with ``otlp_endpoint`` set, the tap's own sampling decision sets it).
    ``otlp_endpoint``: the OTLP/HTTP traces URL
    (e.g. ``http://127.0.0.1:4318/v1/traces``) spans are exported to; empty exports none and
    needs no extra (``pip install 'mcp-tap-proxy[otel]'`` otherwise). ``sample_ratio``: the share
    of traces the tap starts that it records (a parent's sampled flag decides the others).
    ``export_delay_s``: how long finished spans wait to be sent in one batch.
    """

    add_traceparent: bool = True  # only where hop correlation needs it (two hops or more)
    sampled: bool = False  # the sampled flag of a traceparent the tap adds (never a client's)
    otlp_endpoint: str = ""
    service_name: str = "mcp-tap"
    sample_ratio: float = 1.0
    export_delay_s: float = 5.0


def check_tracing(options: TracingOptions) -> None:
    """Bad-input checks for ``[tracing]``: a usable OTLP endpoint and the extra installed."""
    if not options.otlp_endpoint:
        return
    check_http_url(options.otlp_endpoint, "[tracing] otlp_endpoint")
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise InputError(
            "[tracing] otlp_endpoint is set but OpenTelemetry is not installed: "
            "pip install 'mcp-tap-proxy[otel]'"
        ) from None


@dataclass(frozen=True, slots=True)
class EraOptions:
    """What the judge accepts and how it audits era selection."""

    supported_versions: tuple[str, ...] = MODERN_VERSIONS
    legacy_allowed: bool = False


@dataclass(frozen=True, slots=True)
class AdminOptions:
    """The admin listener (health, readiness, metrics); empty ``listen`` disables it.

    ``token_env``: the name of an environment variable holding a bearer token; when set,
    every admin route but ``/healthz`` and ``/readyz`` needs ``Authorization: Bearer``
    with it (the token itself is never in the config)."""

    listen: str = "127.0.0.1:9464"
    token_env: str = ""


@dataclass(frozen=True, slots=True)
class GateOptions:
    """The admin listener's canary analysis (``GET /gate``, ``POST /gate/flagger``).

    ``policy`` is the gate policy file; empty disables the endpoint. The decision covers the
    bundle this run is writing plus ``evidence`` (more candidate bundles or evidence
    directories) against ``baseline``, with the attested ``rollback`` evidence (empty: the
    gate holds). Files are read at each evaluation, so a renewed attestation counts.
    """

    policy: str = ""
    rollback: str = ""
    evidence: tuple[str, ...] = ()
    baseline: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HopComparisonOptions:
    """Cross-hop correlation window and SSE buffering thresholds."""

    window_s: float = 60.0
    # A pair made without a shared trace id (a box that drops traceparent): the two requests
    # began at most this many seconds apart.
    params_window_s: float = 5.0
    min_inner_spread_ms: float = 100.0
    max_outer_spread_ratio: float = 0.2
    first_event_delay_ms: float = 250.0

    def thresholds(self) -> HopThresholds:
        """The core's threshold object."""
        return HopThresholds(
            self.min_inner_spread_ms, self.max_outer_spread_ratio, self.first_event_delay_ms
        )


@dataclass(frozen=True, slots=True)
class TapOptions:
    """Everything ``mcp-tap proxy`` runs with."""

    hops: tuple[HopOptions, ...]
    evidence: EvidenceOptions = field(default_factory=EvidenceOptions)
    capture: CaptureOptions = field(default_factory=CaptureOptions)
    recording: RecordingOptions = field(default_factory=RecordingOptions)
    upstream: UpstreamOptions = field(default_factory=UpstreamOptions)
    listener: ListenerOptions = field(default_factory=ListenerOptions)
    tracing: TracingOptions = field(default_factory=TracingOptions)
    eras: EraOptions = field(default_factory=EraOptions)
    admin: AdminOptions = field(default_factory=AdminOptions)
    gate: GateOptions = field(default_factory=GateOptions)
    hop_comparison: HopComparisonOptions = field(default_factory=HopComparisonOptions)
    redaction: RedactionPolicy = field(default_factory=RedactionPolicy)
    digest_key: DigestKey | None = None  # the operator's body-digest key; None: one per bundle

