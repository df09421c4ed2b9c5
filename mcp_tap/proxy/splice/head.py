"""Message heads as raw bytes: split into lines, and rewritten only where a feature needs it.

The forwarder never re-serialises a head. It finds the head's end itself (``CRLF CRLF``;
the C parser, which validates the same bytes, accepts no bare LF), keeps the header lines as
they came (order, case, duplicates, any byte value), and builds a new head only when one of
these changes applies, each listed as a change for the evidence:

- hop-by-hop fields (RFC 9110 7.6.1): ``Connection``, the fields it names, ``Keep-Alive``,
  ``Proxy-Connection``, ``TE``, ``Upgrade`` (kept on an upgrade and its 101, which the tap
  tunnels), ``Proxy-Authenticate`` / ``Proxy-Authorization``. ``Transfer-Encoding`` is
  hop-by-hop too, but the tap passes the framing through untouched, so it stays;
- ``Host``, only with ``[upstream] host = "rewrite"``;
- the request target, only when the upstream URL has a base path;
- ``traceparent``, only when hop correlation needs one and the client sent none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEAD_END = b"\r\n\r\n"

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "upgrade",
        "proxy-connection",
    }
)
"""Hop-by-hop field names the tap drops (``Transfer-Encoding`` stays: framing is spliced)."""

_HOP_BY_HOP_BYTES = frozenset(n.encode() for n in HOP_BY_HOP)
_UPGRADE_KEPT = frozenset({b"connection", b"upgrade"})
_WHY_HOP = "hop-by-hop (RFC 9110 7.6.1)"

Pairs = tuple[tuple[bytes, bytes], ...]

# Any line that may name a hop-by-hop field (over-matching is harmless: it only sends the head
# down the full split-and-rewrite path). The C parser has already refused whitespace before a
# colon and obs-fold lines, so a field name always starts right after a CRLF.
_HOP_HINT = re.compile(rb"\r\n(?:connection|keep-alive|proxy-|te|upgrade)").search
# (One regex scan costs less than five ``bytes.find`` scans; ``bytes.find`` rather than ``in``
# elsewhere: on 3.11, ``in`` first tries its operand as an int and formats a TypeError.)


def may_change(lower: bytes) -> bool:
    """Whether a head (lowercased) may hold a hop-by-hop field: if not, it passes as is."""
    return _HOP_HINT(lower) is not None


def field(raw: bytes, lower: bytes, key: bytes) -> bytes | None:
    """The first value of the field ``key`` (``b"\\r\\nname:"``, lowercase) of a head the parser
    accepted, found in its lowercased copy ``lower``; None when absent."""
    at = lower.find(key)
    if at < 0:
        return None
    start = at + len(key)
    return raw[start : raw.find(b"\r\n", start)].strip(b" \t")


@dataclass(frozen=True, slots=True)
class Head:
    """One parsed head: its start line and header lines, as the bytes that came in."""

    start: bytes
    lines: tuple[bytes, ...]  # header lines without CRLF; an obs-fold continuation joined
    lower: tuple[bytes, ...]  # each line's field name, lowercased

    def pairs(self) -> Pairs:
        """``(name, value)`` byte pairs in order (value without surrounding whitespace)."""
        out = []
        for line in self.lines:
            name, _, value = line.partition(b":")
            out.append((name, value.strip(b" \t")))
        return tuple(out)

    def first(self, lower_name: bytes) -> bytes | None:
        """The first value of a (lowercase) field name, None when absent."""
        for line, name in zip(self.lines, self.lower, strict=True):
            if name == lower_name:
                return line.partition(b":")[2].strip(b" \t")
        return None

    def has(self, lower_name: bytes) -> bool:
        """Whether a field of that (lowercase) name is present."""
        return lower_name in self.lower


def parse_head(raw: bytes) -> Head:
    """Split a head (with its final CRLF CRLF) into start line and header lines.

    Syntax is the C parser's job (it sees the same bytes first); this only cuts lines.
    """
    parts = raw[: -len(HEAD_END)].split(b"\r\n")
    lines: list[bytes] = []
    for part in parts[1:]:
        if part[:1] in (b" ", b"\t") and lines:
            lines[-1] += b"\r\n" + part  # obs-fold: kept byte for byte with its field
        else:
            lines.append(part)
    lower = tuple(line.partition(b":")[0].strip().lower() for line in lines)
    return Head(parts[0], tuple(lines), lower)


def _connection_named(head: Head) -> set[bytes]:
    named: set[bytes] = set()
    for line, name in zip(head.lines, head.lower, strict=True):
        if name == b"connection":
            for token in line.partition(b":")[2].split(b","):
                token = token.strip().lower()
                if token:
                    named.add(token)
    return named


def _dropped(head: Head, upgrade: bool) -> set[bytes]:
    """The lowercase names this head loses as hop-by-hop."""
    if _HOP_BY_HOP_BYTES.isdisjoint(head.lower):
        return set()
    drop = set(_HOP_BY_HOP_BYTES) | _connection_named(head)
    drop -= {b"transfer-encoding", b"content-length"}  # the framing passes through untouched
    if upgrade:
        drop -= _UPGRADE_KEPT
    return drop


def rewrite(
    head: Head,
    raw: bytes,
    *,
    upgrade: bool = False,
    host: bytes | None = None,
    target_prefix: bytes = b"",
    add: tuple[tuple[bytes, bytes, str], ...] = (),
) -> tuple[bytes, list[dict[str, str]]]:
    """The head to forward and the changes made (``raw`` itself when none applies).

    ``host`` replaces (or adds) ``Host``; ``target_prefix`` goes before an origin-form
    target; ``add`` are ``(name, value, why)`` fields appended at the end.
    """
    drop = _dropped(head, upgrade)
    prefix = target_prefix if target_prefix and _origin_form(head) else b""
    if not drop and host is None and not prefix and not add:
        return raw, []
    changes: list[dict[str, str]] = []
    start = head.start
    if prefix:
        method, target, version = start.split(b" ", 2)
        start = b" ".join((method, prefix + target, version))
        changes.append({"change": "target", "why": "the upstream URL has a base path"})
    out = [start]
    host_done = False
    for line, name in zip(head.lines, head.lower, strict=True):
        if name in drop:
            changes.append(
                {"change": "removed", "header": _name(line), "why": _WHY_HOP}
            )
            continue
        if name == b"host" and host is not None:
            if host_done:
                changes.append({"change": "removed", "header": _name(line),
                                "why": "[upstream] host = rewrite"})
                continue
            host_done = True
            out.append(line.partition(b":")[0] + b": " + host)
            changes.append({"change": "rewritten", "header": _name(line),
                            "why": "[upstream] host = rewrite"})
            continue
        out.append(line)
    if host is not None and not host_done:
        out.append(b"Host: " + host)
        changes.append({"change": "added", "header": "Host", "why": "[upstream] host = rewrite"})
    for name_b, value, why in add:
        out.append(name_b + b": " + value)
        changes.append({"change": "added", "header": name_b.decode("latin-1"), "why": why})
    out.append(b"")
    out.append(b"")
    return b"\r\n".join(out), changes


def _origin_form(head: Head) -> bool:
    parts = head.start.split(b" ", 2)
    return len(parts) == 3 and parts[1].startswith(b"/")


def _name(line: bytes) -> str:
    return line.partition(b":")[0].strip().decode("latin-1")

