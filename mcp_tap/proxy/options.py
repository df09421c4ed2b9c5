"""Proxy options: small frozen value objects, loaded from TOML, environment and flags.

Precedence: command-line flags > environment (``MCP_TAP_<SECTION>_<KEY>``, e.g.
``MCP_TAP_EVIDENCE_DIR``, ``MCP_TAP_UPSTREAM_VERIFY_TLS``) > the config file > defaults.
The single hop comes from ``--listen``/``--upstream``/``--hop``, else from
``MCP_TAP_HOP_LISTEN``/``MCP_TAP_HOP_UPSTREAM``/``MCP_TAP_HOP_NAME`` (fields not given there
come from the file's one ``[[hop]]``), else from the file's ``[[hop]]`` tables.
A variable that starts with a section's prefix but names none of its options is an error,
like an unknown key in the file. Numbers are finite and within the ranges in :func:`_number`.
``config/tap.toml`` documents every option.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from mcp_tap.core.eras import MODERN_VERSIONS
from mcp_tap.core.hashing import DigestKey
from mcp_tap.core.hops import HopThresholds
from mcp_tap.core.redaction import ArgumentPolicy, RedactionPolicy
from mcp_tap.errors import InputError
from mcp_tap.files import read_file
from mcp_tap.proxy.tracing import check_tracing
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
    """One listener: its name, where it listens and the upstream it forwards to."""

    name: str
    listen: str
    upstream: str


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
    # (1250 captures at ~130-260 us each, 0.2-0.35 s measured at full load) so that a
    # full-load backlog drains without a loss; short enough that a stalled or restarting
    # recording process delays a client by at most half a second (far under any client's
    # timeout) before losses are counted.
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
    needs no extra (``pip install 'mcp-tap[otel]'`` otherwise). ``sample_ratio``: the share
    of traces the tap starts that it records (a parent's sampled flag decides the others).
    ``export_delay_s``: how long finished spans wait to be sent in one batch.
    """

    add_traceparent: bool = True  # only where hop correlation needs it (two hops or more)
    sampled: bool = False  # the sampled flag of a traceparent the tap adds (never a client's)
    otlp_endpoint: str = ""
    service_name: str = "mcp-tap"
    sample_ratio: float = 1.0
    export_delay_s: float = 5.0


@dataclass(frozen=True, slots=True)
class EraOptions:
    """What the judge accepts and how it audits era selection."""

    supported_versions: tuple[str, ...] = MODERN_VERSIONS
    legacy_allowed: bool = False


@dataclass(frozen=True, slots=True)
class AdminOptions:
    """The admin listener (health, readiness, metrics); empty ``listen`` disables it."""

    listen: str = "127.0.0.1:9464"


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


_SECTIONS: dict[str, type[Any]] = {
    "evidence": EvidenceOptions,
    "capture": CaptureOptions,
    "recording": RecordingOptions,
    "upstream": UpstreamOptions,
    "listener": ListenerOptions,
    "tracing": TracingOptions,
    "eras": EraOptions,
    "admin": AdminOptions,
    "gate": GateOptions,
    "hop_comparison": HopComparisonOptions,
}


# Numeric options, checked in one place (:func:`_number`). Listed here: options that must be
# above zero (zero would stop the writer or the handover) and ones with their own maximum;
# every other integer is at most _MAX_COUNT and every other number at most _MAX_NUMBER. NaN
# and infinity are never an option's value.
_POSITIVE = frozenset(
    {
        "evidence.max_segment_bytes",
        "evidence.max_segment_age_s",
        "evidence.queue_size",
        "recording.queue_size",
        "upstream.max_connections",
        "listener.max_head_bytes",
        "tracing.export_delay_s",
    }
)
_MAX_COUNT = 10_000_000  # queue sizes, SSE events, connections
_MAX_BYTES = 1 << 40  # 1 TiB
_MAX_NUMBER = 1e9  # seconds, milliseconds, ratios (1e9 s is over 30 years)
_MAXIMUM: dict[str, int | float] = {
    "evidence.max_segment_bytes": _MAX_BYTES,
    "capture.max_body_bytes": _MAX_BYTES,
    "tracing.sample_ratio": 1,
    "tracing.export_delay_s": 3600,
    "recording.max_wait_ms": 60_000,  # a minute: a longer hold is a stall, not flow control
}


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _number(where: str, name: str, value: Any, integer: bool) -> int | float:
    kind = "an integer" if integer else "a number"
    number: int | float
    try:
        if isinstance(value, bool) or (integer and isinstance(value, float)):
            raise ValueError(value)
        digits = value.strip() if isinstance(value, str) else ""
        if digits.isdigit() and len(digits.lstrip("0")) > 30:
            number = math.inf  # int() refuses over 4300 digits; any of these is far too large
        else:
            number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise InputError(f"{where} must be {kind}, got {_shown(value)}") from None
    positive = name in _POSITIVE
    maximum = _MAXIMUM.get(name, _MAX_COUNT if integer else _MAX_NUMBER)
    low = "above 0" if positive else "at least 0"
    # The comparisons first: math.isfinite cannot take an int too large for a float.
    if number < 0 or (positive and number == 0) or number > maximum or not math.isfinite(number):
        raise InputError(
            f"{where} must be {kind} {low} and at most {int(maximum)}, got {_shown(value)}"
        )
    return number


def _coerce(section: str, key: str, value: Any, default: Any, where: str) -> Any:
    if isinstance(default, bool):
        if isinstance(value, str):
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
        if isinstance(value, bool):
            return value
        raise InputError(f"{where} must be a boolean, got {value!r}")
    if isinstance(default, int | float):
        return _number(where, f"{section}.{key}", value, isinstance(default, int))
    if isinstance(default, tuple):
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise InputError(f"{where} must be a list of strings, got {value!r}")
        return tuple(i.strip() for i in items if i.strip())
    if not isinstance(value, str):
        raise InputError(f"{where} must be a string, got {value!r}")
    return value


def _env_name(section: str, key: str) -> str:
    return f"MCP_TAP_{section.upper()}_{key.upper()}"


def _section(name: str, data: Any, env: Mapping[str, str]) -> Any:
    cls = _SECTIONS[name]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"[{name}] must be a table")
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise InputError(f"[{name}] has unknown option(s): {', '.join(sorted(unknown))}")
    # A variable that names this section but none of its options is a typo, not a silent
    # no-op (as an unknown key in the file is an error too). Variables that do not start
    # with a section's prefix belong to other tools and tests and are left alone.
    prefix = f"MCP_TAP_{name.upper()}_"
    known_env = {_env_name(name, key) for key in known}
    for variable in sorted(env):
        if variable.startswith(prefix) and variable not in known_env:
            raise InputError(
                f"environment variable {variable} names no [{name}] option; "
                f"known: {', '.join(sorted(known_env))}"
            )
    defaults = cls()
    values: dict[str, Any] = {}
    for f in fields(cls):
        default = getattr(defaults, f.name)
        variable = _env_name(name, f.name)
        where = f"[{name}] {f.name}"
        raw: Any = env.get(variable)
        if raw is not None:
            where = f"{variable}: {where}"
        else:
            raw = data.get(f.name)
        if raw is not None:
            values[f.name] = _coerce(name, f.name, raw, default, where)
    return cls(**values)


_REDACTION_KEYS = frozenset(
    {"extra_keys", "allow_keys", "argument", "digest_key_file", "digest_key_env"})


def _redaction(data: Any) -> RedactionPolicy:
    """``[redaction]``: secret name patterns, allowed names, argument policies."""
    if data is None:
        return RedactionPolicy()
    if not isinstance(data, dict):
        raise InputError("[redaction] must be a table")
    unknown = set(data) - _REDACTION_KEYS
    if unknown:
        raise InputError(f"[redaction] has unknown option(s): {', '.join(sorted(unknown))}")
    names: dict[str, list[str]] = {}
    for option in ("extra_keys", "allow_keys"):
        value = data.get(option, [])
        if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
            raise InputError(f"[redaction] {option} must be a list of strings")
        names[option] = value
    policies: list[ArgumentPolicy] = []
    for i, item in enumerate(data.get("argument", [])):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("method"), str)
            or not isinstance(item.get("argument"), str)
        ):
            raise InputError(f"[[redaction.argument]] #{i} needs string method and argument")
        tool = item.get("tool")
        if tool is not None and not isinstance(tool, str):
            raise InputError(f"[[redaction.argument]] #{i} tool must be a string")
        try:
            policies.append(ArgumentPolicy(item["method"], tool, item["argument"]))
        except ValueError as exc:
            raise InputError(f"[[redaction.argument]] #{i}: {exc}") from None
    try:
        return RedactionPolicy(
            extra_keys=frozenset(names["extra_keys"]),
            argument_policies=tuple(policies),
            allow_keys=frozenset(names["allow_keys"]),
        )
    except ValueError as exc:
        raise InputError(f"[redaction]: {exc}") from None


def redaction_policy(table: Any) -> RedactionPolicy:
    """Parse a ``[redaction]`` table (the proxy config's) into a policy; InputError if bad."""
    return _redaction(table)
_DIGEST_KEY_FILE_ENV = "MCP_TAP_REDACTION_DIGEST_KEY_FILE"
_DIGEST_KEY_ENV_ENV = "MCP_TAP_REDACTION_DIGEST_KEY_ENV"


def _digest_key(data: Any, env: Mapping[str, str]) -> DigestKey | None:
    """The operator's body-digest key: ``[redaction] digest_key_file`` or ``digest_key_env``.

    Like ``attest``'s HMAC key: a file (one trailing newline ignored) or the name of an
    environment variable holding it, never the key itself in the config. Neither: ``None``,
    and each bundle draws its own key.
    """
    table = data if isinstance(data, dict) else {}
    path = env.get(_DIGEST_KEY_FILE_ENV, table.get("digest_key_file"))
    variable = env.get(_DIGEST_KEY_ENV_ENV, table.get("digest_key_env"))
    known = {_DIGEST_KEY_FILE_ENV, _DIGEST_KEY_ENV_ENV, variable}
    for name in sorted(env):  # a typo in a variable is an error, as in the other sections
        if name.startswith("MCP_TAP_REDACTION_") and name not in known:
            raise InputError(
                f"environment variable {name} names no [redaction] option; known: "
                f"{_DIGEST_KEY_ENV_ENV}, {_DIGEST_KEY_FILE_ENV}")
    if path is not None and variable is not None:
        raise InputError("[redaction] digest_key_file and digest_key_env exclude each other")
    if path is not None:
        if not isinstance(path, str):
            raise InputError("[redaction] digest_key_file must be a string")
        secret = read_file(path, "digest key file")
        for ending in (b"\r\n", b"\n"):
            if secret.endswith(ending):
                secret = secret[: -len(ending)]
                break
        where = f"digest key file {path}"
    elif variable is not None:
        if not isinstance(variable, str) or not variable:
            raise InputError("[redaction] digest_key_env must name an environment variable")
        value = env.get(variable)
        if value is None:
            raise InputError(f"[redaction] digest_key_env: environment variable {variable} "
                             "is not set")
        secret = value.encode("utf-8", "surrogateescape")
        where = f"environment variable {variable}"
    else:
        return None
    try:
        return DigestKey(secret, "operator")
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None


def _hops(data: Any) -> tuple[HopOptions, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise InputError("[[hop]] must be an array of tables")
    hops: list[HopOptions] = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise InputError(f"[[hop]] #{i} must be a table")
        missing = [k for k in ("listen", "upstream") if not isinstance(item.get(k), str)]
        if missing:
            raise InputError(f"[[hop]] #{i} needs string {', '.join(missing)}")
        name = item.get("name", f"hop{i + 1}")
        if not isinstance(name, str):
            raise InputError(f"[[hop]] #{i} name must be a string")
        check_hop_name(name, f"[[hop]] #{i} name")
        parse_listen(item["listen"], f"[[hop]] {name} listen")
        hops.append(
            HopOptions(
                name, item["listen"], check_upstream(item["upstream"], f"[[hop]] {name} upstream")
            )
        )
    names = [h.name for h in hops]
    if len(set(names)) != len(names):
        raise InputError("[[hop]] names must be unique")
    return tuple(hops)


# The single hop from the environment, in the options module's MCP_TAP_<SECTION>_<KEY> form
# with "hop" as the section (MCP_TAP_HOP_COMPARISON_* belongs to [hop_comparison]).
_HOP_ENV = {
    "MCP_TAP_HOP_NAME": "name",
    "MCP_TAP_HOP_LISTEN": "listen",
    "MCP_TAP_HOP_UPSTREAM": "upstream",
}


def _hop_env(env: Mapping[str, str]) -> dict[str, str]:
    """``MCP_TAP_HOP_NAME/LISTEN/UPSTREAM`` as ``{name, listen, upstream}``; any other
    ``MCP_TAP_HOP_*`` variable is a typo and an error (it would otherwise do nothing)."""
    found: dict[str, str] = {}
    for variable in sorted(env):
        if not variable.startswith("MCP_TAP_HOP_") or variable.startswith(
            "MCP_TAP_HOP_COMPARISON_"
        ):
            continue
        if variable not in _HOP_ENV:
            raise InputError(
                f"environment variable {variable} names no hop option; "
                f"known: {', '.join(sorted(_HOP_ENV))}"
            )
        if not env[variable]:
            raise InputError(f"environment variable {variable} is empty")
        found[_HOP_ENV[variable]] = env[variable]
    return found


def _env_hop(
    found: dict[str, str], hops: tuple[HopOptions, ...], hop: str | None
) -> tuple[HopOptions, ...]:
    """The one hop ``MCP_TAP_HOP_*`` describe: fields not given come from the config file's
    single ``[[hop]]`` (``--hop`` still names it)."""
    if len(hops) > 1:
        raise InputError(
            f"MCP_TAP_HOP_* describe one hop but the config file has {len(hops)} [[hop]] tables"
        )
    base = hops[0] if hops else None
    listen = found.get("listen", base.listen if base else None)
    upstream = found.get("upstream", base.upstream if base else None)
    if listen is None or upstream is None:
        missing = "MCP_TAP_HOP_UPSTREAM" if upstream is None else "MCP_TAP_HOP_LISTEN"
        raise InputError(
            f"{missing} is not set: MCP_TAP_HOP_LISTEN and MCP_TAP_HOP_UPSTREAM go together "
            "(or give --listen and --upstream)"
        )
    name = hop if hop is not None else found.get("name", base.name if base else "tap")
    name = check_hop_name(name, "--hop" if hop is not None else "MCP_TAP_HOP_NAME")
    parse_listen(listen, "MCP_TAP_HOP_LISTEN")
    return (HopOptions(name, listen, check_upstream(upstream, "MCP_TAP_HOP_UPSTREAM")),)


def load_options(
    config_file: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    listen: str | None = None,
    upstream: str | None = None,
    hop: str | None = None,
    evidence_dir: str | None = None,
    admin: str | None = None,
) -> TapOptions:
    """Build the options from a TOML file, the environment and flags (flags win)."""
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    if config_file is not None:
        raw = read_file(config_file, "config file")
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{config_file}: not valid TOML ({exc})") from None
    unknown = set(data) - set(_SECTIONS) - {"hop", "redaction"}
    if unknown:
        raise InputError(f"{config_file}: unknown section(s): {', '.join(sorted(unknown))}")
    sections = {name: _section(name, data.get(name), env) for name in _SECTIONS}
    if sections["recording"].mode not in RECORDING_MODES:
        raise InputError(
            f"[recording] mode must be one of {', '.join(RECORDING_MODES)}, "
            f"got {sections['recording'].mode!r}"
        )
    if sections["upstream"].host not in HOST_MODES:
        raise InputError(
            f"[upstream] host must be one of {', '.join(HOST_MODES)}, "
            f"got {sections['upstream'].host!r}"
        )
    hops = _hops(data.get("hop"))
    from_env = _hop_env(env)
    if listen == "":
        raise InputError("--listen is empty: give the HOST:PORT to listen on")
    if upstream == "":
        raise InputError("--upstream is empty: give the http(s) URL to forward to")
    if listen is not None or upstream is not None:
        # A flag wins over its variable; the other half may come from the environment (an
        # image sets MCP_TAP_HOP_LISTEN, the user passes --upstream).
        listen = listen if listen is not None else from_env.get("listen")
        upstream = upstream if upstream is not None else from_env.get("upstream")
        if listen is None or upstream is None:
            raise InputError("--listen and --upstream go together")
        parse_listen(listen, "--listen")
        name = check_hop_name(hop if hop is not None else from_env.get("name", "tap"), "--hop")
        hops = (HopOptions(name, listen, check_upstream(upstream, "--upstream")),)
    elif from_env:
        hops = _env_hop(from_env, hops, hop)
    elif hop is not None:
        raise InputError("--hop names the hop of --listen and --upstream; give those too")
    if not hops:
        raise InputError("no hop to run: give --listen and --upstream, or [[hop]] in --config")
    opts = TapOptions(
        hops=hops,
        redaction=_redaction(data.get("redaction")),
        digest_key=_digest_key(data.get("redaction"), env),
        **sections,
    )
    if evidence_dir:
        opts = replace(opts, evidence=replace(opts.evidence, dir=evidence_dir))
    if admin is not None:
        opts = replace(opts, admin=AdminOptions(admin))
    if opts.admin.listen:
        parse_listen(opts.admin.listen, "admin listen")
    check_tracing(opts.tracing)
    return opts
