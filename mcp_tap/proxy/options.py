"""Proxy options: small frozen value objects, loaded from TOML, environment and flags.

Precedence: command-line flags > environment (``MCP_TAP_<SECTION>_<KEY>``, e.g.
``MCP_TAP_EVIDENCE_DIR``, ``MCP_TAP_UPSTREAM_VERIFY_TLS``) > the config file > defaults.
``config/tap.toml`` documents every option.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp_tap.core.eras import MODERN_VERSIONS
from mcp_tap.core.hops import HopThresholds
from mcp_tap.core.redaction import ArgumentPolicy, RedactionPolicy
from mcp_tap.errors import InputError


def parse_listen(value: str, what: str = "listen") -> tuple[str, int]:
    """Parse ``HOST:PORT`` (IPv6 as ``[::1]:PORT``) into a host and a port."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InputError(f"{what}: {value!r} is not HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def check_upstream(value: str, what: str = "upstream") -> str:
    """Validate an upstream base URL (http or https with a host)."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{what}: {value!r} is not an http(s) URL")
    return value.rstrip("/")


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


RECORDING_MODES = ("inline", "process")


@dataclass(frozen=True, slots=True)
class RecordingOptions:
    """Where exchanges are judged, redacted and written.

    ``process`` (the default): in a separate recording process, so judging runs on another
    CPU and never delays the next request; when ``queue_size`` captures wait for it, more are
    counted lost and leave a gap in the evidence. ``inline``: on the forwarding event loop,
    right after the exchange ends (one process, no hand-over).
    """

    mode: str = "process"
    queue_size: int = 10000


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
    pool_size: int = 100


@dataclass(frozen=True, slots=True)
class TracingOptions:
    """W3C trace context: add a ``traceparent`` when the client sent none."""

    add_traceparent: bool = True


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
    tracing: TracingOptions = field(default_factory=TracingOptions)
    eras: EraOptions = field(default_factory=EraOptions)
    admin: AdminOptions = field(default_factory=AdminOptions)
    hop_comparison: HopComparisonOptions = field(default_factory=HopComparisonOptions)
    redaction: RedactionPolicy = field(default_factory=RedactionPolicy)


_SECTIONS: dict[str, type[Any]] = {
    "evidence": EvidenceOptions,
    "capture": CaptureOptions,
    "recording": RecordingOptions,
    "upstream": UpstreamOptions,
    "tracing": TracingOptions,
    "eras": EraOptions,
    "admin": AdminOptions,
    "hop_comparison": HopComparisonOptions,
}


def _coerce(section: str, key: str, value: Any, default: Any) -> Any:
    where = f"[{section}] {key}"
    if isinstance(default, bool):
        if isinstance(value, str):
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
        if isinstance(value, bool):
            return value
        raise InputError(f"{where} must be a boolean, got {value!r}")
    if isinstance(default, int):
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise InputError(f"{where} must be an integer, got {value!r}") from None
        if number < 0 or isinstance(value, bool):
            raise InputError(f"{where} must be a non-negative integer, got {value!r}")
        return number
    if isinstance(default, float):
        try:
            number_f = float(value)
        except (TypeError, ValueError):
            raise InputError(f"{where} must be a number, got {value!r}") from None
        if number_f < 0 or isinstance(value, bool):
            raise InputError(f"{where} must be a non-negative number, got {value!r}")
        return number_f
    if isinstance(default, tuple):
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise InputError(f"{where} must be a list of strings, got {value!r}")
        return tuple(i.strip() for i in items if i.strip())
    if not isinstance(value, str):
        raise InputError(f"{where} must be a string, got {value!r}")
    return value


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
    defaults = cls()
    values: dict[str, Any] = {}
    for f in fields(cls):
        default = getattr(defaults, f.name)
        raw = env.get(f"MCP_TAP_{name.upper()}_{f.name.upper()}", data.get(f.name))
        if raw is not None:
            values[f.name] = _coerce(name, f.name, raw, default)
    return cls(**values)


def _redaction(data: Any) -> RedactionPolicy:
    if data is None:
        return RedactionPolicy()
    if not isinstance(data, dict):
        raise InputError("[redaction] must be a table")
    extra = data.get("extra_keys", [])
    if not isinstance(extra, list) or not all(isinstance(k, str) for k in extra):
        raise InputError("[redaction] extra_keys must be a list of strings")
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
        return RedactionPolicy(extra_keys=frozenset(extra), argument_policies=tuple(policies))
    except ValueError as exc:
        raise InputError(f"[redaction]: {exc}") from None


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
        if not isinstance(name, str) or not name:
            raise InputError(f"[[hop]] #{i} name must be a non-empty string")
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
    if config_file:
        try:
            data = tomllib.loads(Path(config_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"{config_file}: cannot read ({exc.strerror or exc})") from None
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
    if sections["recording"].queue_size == 0:
        raise InputError("[recording] queue_size must be positive")
    hops = _hops(data.get("hop"))
    if listen or upstream:
        if not (listen and upstream):
            raise InputError("--listen and --upstream go together")
        parse_listen(listen, "--listen")
        hops = (HopOptions(hop or "tap", listen, check_upstream(upstream, "--upstream")),)
    if not hops:
        raise InputError("no hop to run: give --listen and --upstream, or [[hop]] in --config")
    opts = TapOptions(hops=hops, redaction=_redaction(data.get("redaction")), **sections)
    if evidence_dir:
        opts = replace(opts, evidence=replace(opts.evidence, dir=evidence_dir))
    if admin is not None:
        opts = replace(opts, admin=AdminOptions(admin))
    if opts.admin.listen:
        parse_listen(opts.admin.listen, "admin listen")
    return opts
