"""The tap's own answers (400, 408, 431, 502, 503, 504): always marked with
``X-Mcp-Tap-Error`` so nobody mistakes them for the origin's, never a bare 500."""

from __future__ import annotations

from http import HTTPStatus

TAP_ERROR_HEADER = "X-Mcp-Tap-Error"

TAP_ERROR_RULES = {
    "saturated": "tap.saturated",
    "draining": "tap.draining",
    "drain-deadline": "tap.drain-deadline",
    "client-write-timeout": "tap.client-write-stall",
}
"""The rule of a tap error's phase, where it is not an upstream failure (400/431 answers are
``tap.bad-request``; every other phase is ``tap.upstream-failure``)."""


def tap_error_rule(status: int | None, phase: str) -> str:
    """The rule id a tap error with this answer status and phase is recorded under."""
    if status in (400, 431):
        return "tap.bad-request"
    return TAP_ERROR_RULES.get(phase, "tap.upstream-failure")


def tap_answer(
    status: int, phase: str, hop: str, close: bool
) -> tuple[bytes, bytes, tuple[tuple[bytes, bytes], ...]]:
    """The head, body and header pairs of one tap answer (``close`` adds Connection: close)."""
    body = f'{{"tap":"mcp-tap","hop":"{hop}","error":"{phase}"}}'.encode()
    pairs: list[tuple[bytes, bytes]] = [
        (b"Content-Type", b"application/json"),
        (b"Content-Length", str(len(body)).encode()),
        (TAP_ERROR_HEADER.encode(), phase.encode()),
    ]
    if close:
        pairs.append((b"Connection", b"close"))
    reason = HTTPStatus(status).phrase.encode()
    lines = [b"HTTP/1.1 %d %s" % (status, reason), *(k + b": " + v for k, v in pairs)]
    head = b"\r\n".join(lines) + b"\r\n\r\n"
    return head, body, tuple(pairs)
