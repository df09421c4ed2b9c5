"""W3C trace context for hop correlation: read a client's ``traceparent``, or make one.

A client's header is never changed (its sampled flag included). One the tap adds carries the
tap's own sampling decision when it exports spans (:func:`mcp_tap.proxy.tracing.root_flags`),
else the flag the ``[tracing] sampled`` option gives ("00" by default): the tap must not make
a downstream tracer sample a request nobody asked to sample.
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING

from mcp_tap.proxy.tracing import root_flags

if TYPE_CHECKING:
    from mcp_tap.proxy.options import TracingOptions

_TRACEPARENT = re.compile(rb"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


def trace_id_of(values: list[bytes]) -> str:
    """The trace id of a request's ``traceparent`` values ("" when not one valid header).

    An invalid one (bad hex, all-zero ids, version ``ff``) is left alone, untouched and
    unused: pairing on it could join strangers' requests.
    """
    if len(values) != 1:
        return ""
    m = _TRACEPARENT.fullmatch(values[0].strip())
    if m is None or m.group(1) == b"ff" or m.group(2) == b"0" * 32 or m.group(3) == b"0" * 16:
        return ""
    return m.group(2).decode()


def new_traceparent(options: TracingOptions) -> tuple[str, bytes]:
    """A fresh trace id and the ``traceparent`` value that carries it."""
    ids = secrets.token_hex(24)  # one read of the system's randomness for both ids
    trace_id = ids[:32]
    if options.otlp_endpoint:
        flags = root_flags(options, trace_id)
    else:
        flags = "01" if options.sampled else "00"
    return trace_id, f"00-{trace_id}-{ids[32:]}-{flags}".encode()
