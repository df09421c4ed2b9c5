"""What replay works on: its options, a recorded exchange to replay, an HTTP answer reduced to
what the comparison needs (and the small JSON helpers the modules share).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.sse import SSEEvent


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How to replay: the target URL, injected headers, ignored paths, timeout, hop filter."""

    target: str
    headers: tuple[tuple[str, str], ...] = ()
    ignore: tuple[tuple[str, ...], ...] = ()
    timeout: float = 30.0
    hop: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer reduced to what the comparison needs.

    ``messages`` are the decoded JSON-RPC messages (the JSON body, or each SSE event's
    data); ``sse_events`` is set for ``text/event-stream`` answers; ``body_size`` counts the
    body's bytes (0: empty); ``truncated`` marks a recorded body the tap did not keep whole.
    """

    status: int
    headers: HeaderMap
    body: bytes
    messages: tuple[Any, ...] = ()
    sse_events: tuple[SSEEvent, ...] | None = None
    body_size: int = 0
    truncated: bool = False

    @property
    def is_sse(self) -> bool:
        """Whether the answer was an event stream."""
        return self.headers.content_type() == "text/event-stream"


@dataclass(frozen=True, slots=True)
class Case:
    """One recorded exchange to replay: its request and the recorded origin answer."""

    exchange_id: str
    hop: str
    era: str
    method: str | None
    kind: str
    body: Any
    headers: HeaderMap
    session: str | None
    recorded: Answer
    recorded_session: str | None = None

    @property
    def is_notification(self) -> bool:
        """Whether the request is a JSON-RPC notification (no answer owed but 202)."""
        return self.kind == "notification"


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def encode_json(value: Any) -> bytes:
    """``value`` as JSON bytes."""
    return orjson.dumps(value)


def decode_event_data(data: str) -> Any:
    """An SSE event's data as JSON (``None`` when blank, the text when not JSON)."""
    if not data.strip():
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data
