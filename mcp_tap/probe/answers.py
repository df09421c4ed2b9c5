"""Reading a server's answer: its JSON-RPC messages, the final response, what the report shows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from mcp_tap.core.jsonrpc import Kind, classify, parse_json
from mcp_tap.core.responses import decode_sse
from mcp_tap.probe.client import (
    Answer,
)

BODY_LIMIT: Final = 2048
"""How many characters of a response body the report shows (the rest is counted, not shown)."""


def answer_messages(answer: Answer) -> list[Any]:
    """The JSON-RPC messages of an answer: the JSON body, or each SSE event's data."""
    if answer.headers.content_type() == "text/event-stream":
        events, _ = decode_sse(answer.body)
        out: list[Any] = []
        for event in events:
            if event.data:
                try:
                    out.append(parse_json(event.data))
                except ValueError:
                    continue
        return out
    try:
        return [parse_json(answer.body)] if answer.body.strip() else []
    except ValueError:
        return []


def final_response(messages: Iterable[Any]) -> dict[str, Any] | None:
    """The last JSON-RPC response (result or error) among ``messages``."""
    found: dict[str, Any] | None = None
    for message in messages:
        if isinstance(message, dict) and classify(message).kind is Kind.RESPONSE:
            found = message
    return found


def error_code(message: dict[str, Any] | None) -> int | None:
    """The integer error code of a JSON-RPC error response, else ``None``."""
    error = message.get("error") if message else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def shown_body(body: bytes) -> str:
    """A body as the report shows it: text cut at :data:`BODY_LIMIT` characters."""
    text = body.decode("utf-8", "replace")
    if len(text) <= BODY_LIMIT:
        return text
    return text[:BODY_LIMIT] + f"... [{len(body)} bytes, cut at {BODY_LIMIT} characters]"


def answer_summary(status: int, final: dict[str, Any] | None) -> str:
    """One phrase for what the server answered (``HTTP 200 with a result``)."""
    if final is None:
        return f"HTTP {status} without a JSON-RPC response"
    if "error" in final:
        code = error_code(final)
        return f"HTTP {status} with JSON-RPC error {code if code is not None else '?'}"
    return f"HTTP {status} with a result"
