"""Loading the proxy options from TOML, environment and flags.

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
from dataclasses import fields, replace
from typing import Any

from mcp_tap.core.hopdiff import BOX_HTTP, BOX_KINDS
from mcp_tap.errors import InputError
from mcp_tap.files import read_file
from mcp_tap.proxy.options.redaction import REDACTION_TABLES, digest_key, redaction_policy
from mcp_tap.proxy.options.shipping import check_no_credentials, check_shipping
from mcp_tap.proxy.options.values import (
    HOST_MODES,
    RECORDING_MODES,
    AdminOptions,
    CaptureOptions,
    EraOptions,
    EvidenceOptions,
    GateOptions,
    HopComparisonOptions,
    HopOptions,
    ListenerOptions,
    RecordingOptions,
    TapOptions,
    TracingOptions,
    UpstreamOptions,
    check_hop_name,
    check_tracing,
    check_upstream,
    parse_listen,
)
from mcp_tap.tables import TableKeys, check_tables

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


CONFIG_TABLES: TableKeys = {
    "": frozenset({*_SECTIONS, "hop", "redaction"}),
    **{name: frozenset(f.name for f in fields(cls)) for name, cls in _SECTIONS.items()},
    "hop": frozenset(f.name for f in fields(HopOptions)),  # each [[hop]] table
    **REDACTION_TABLES,
}
"""Every table of the config file and its allowed keys (a section's are its options' field
names, so an option added to its dataclass is known here too)."""


# Numeric options, checked in one place (:func:`_number`). Listed here: options that must be
# above zero (zero would stop the writer or the handover) and ones with their own maximum;
# every other integer is at most _MAX_COUNT and every other number at most _MAX_NUMBER. NaN
# and infinity are never an option's value.
_POSITIVE = frozenset(
    {
        "evidence.max_segment_bytes",
        "evidence.max_segment_age_s",
        "evidence.queue_size",
        "evidence.spool_max_bytes",
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
    "evidence.spool_max_bytes": _MAX_BYTES,
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



def _hops(data: Any) -> tuple[HopOptions, ...]:
    if data is None:
        return ()
    if not isinstance(data, list):
        raise InputError("[[hop]] must be an array of tables")
    hops: list[HopOptions] = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise InputError(f"[[hop]] #{i} must be a table")
        box = item.get("box", BOX_HTTP)
        if box not in BOX_KINDS:
            raise InputError(f"[[hop]] #{i} box must be one of {', '.join(BOX_KINDS)}, "
                             f"got {box!r}")
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
                name, item["listen"], check_upstream(item["upstream"], f"[[hop]] {name} upstream"),
                box,
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
    ship: str | None = None,
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
        check_no_credentials(data.get("evidence"), config_file)
        check_tables(data, CONFIG_TABLES, config_file)
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
        redaction=redaction_policy(data.get("redaction")),
        digest_key=digest_key(data.get("redaction"), env),
        **sections,
    )
    if evidence_dir:
        opts = replace(opts, evidence=replace(opts.evidence, dir=evidence_dir))
    if admin is not None:
        opts = replace(opts, admin=replace(opts.admin, listen=admin))
    if ship is not None:
        opts = replace(opts, evidence=replace(opts.evidence, ship=ship))
    if opts.admin.listen:
        parse_listen(opts.admin.listen, "admin listen")
    if opts.admin.token_env and not env.get(opts.admin.token_env, "").strip():
        raise InputError(f"[admin] token_env names {opts.admin.token_env}, which is not set "
                         "(or empty) in the environment")
    check_tracing(opts.tracing)
    check_shipping(opts.evidence, opts.recording.mode)
    return opts
