"""Resumable legacy streams: follow a request's SSE stream across its connections.

In the legacy era a server MAY close the *connection* after an event with an id without
ending the *stream* (2025-11-25 "Sending Messages to the Server" 6, "Resumability and
Redelivery"): the client polls with a GET carrying ``Last-Event-ID`` and the response may
arrive there. So a connection that closed without the response is not yet an unterminated
stream. :class:`ResumeTracker` parks such a stream under (session, last event id), hands it
to the GET that resumes it, and reports ``sse.unterminated`` only when the stream really
ended without its answer: its session ended, or nothing resumed it within the idle limit.

Sans-IO like the rest of the core: times are passed in, nothing here reads a clock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from mcp_tap.core.catalog import finding
from mcp_tap.core.eras import Era
from mcp_tap.core.findings import Finding
from mcp_tap.core.requests import RequestVerdict
from mcp_tap.core.response_message import ResponseContext
from mcp_tap.core.response_stream import check_sse_stream
from mcp_tap.core.sse import SSEEvent

DEFAULT_IDLE_LIMIT_S = 300.0
_MAX_PARKED = 10000  # streams remembered at once: hostile traffic cannot grow memory


@dataclass(frozen=True, slots=True)
class Parked:
    """A request stream whose connection closed after an event id, before the response."""

    session: str
    event_id: str
    verdict: RequestVerdict
    context: ResponseContext
    since: float
    where: str
    connections: int = 1


def last_event_id(events: Iterable[SSEEvent]) -> str | None:
    """The id of the last event that carried a non-empty one (the client's resume cursor)."""
    found: str | None = None
    for event in events:
        if event.id:
            found = event.id
    return found


def resumable(verdict: RequestVerdict, findings: Iterable[Finding]) -> bool:
    """Whether a judged legacy stream ended its connection without the response."""
    return verdict.era is Era.LEGACY and any(f.rule == "sse.unterminated" for f in findings)


def awaiting_resumption(
    verdict: RequestVerdict | None, events: Iterable[SSEEvent], findings: Iterable[Finding]
) -> list[Finding]:
    """The findings of one legacy exchange judged without what follows it (a fixture): a
    stream whose connection closed after an event id, before the response, is parked as
    the proxy parks it (the server MAY close the connection without ending the stream,
    2025-11-25 transports "Sending Messages to the Server" 6), so it is not yet
    ``sse.unterminated``; its resumption, never seen, would be judged on its own."""
    found = list(findings)
    if verdict is None or last_event_id(events) is None or not resumable(verdict, found):
        return found
    return [f for f in found if f.rule != "sse.unterminated"]


class ResumeTracker:
    """Correlates legacy GET resumptions with the request streams they continue."""

    def __init__(self, idle_limit_s: float = DEFAULT_IDLE_LIMIT_S) -> None:
        """Track parked streams; one unresumed for ``idle_limit_s`` seconds has ended."""
        if idle_limit_s <= 0:
            raise ValueError("idle_limit_s must be positive")
        self.idle_limit_s = idle_limit_s
        # (session, event id) -> the stream parked there, oldest first (read only outside)
        self.parked: OrderedDict[tuple[str, str], Parked] = OrderedDict()

    def __len__(self) -> int:
        return len(self.parked)

    def park(self, stream: Parked) -> list[Finding]:
        """Remember a stream that may be resumed; returns findings for any stream pushed out."""
        key = (stream.session, stream.event_id)
        self.parked[key] = stream
        self.parked.move_to_end(key)
        out: list[Finding] = []
        while len(self.parked) > _MAX_PARKED:
            _, old = self.parked.popitem(last=False)
            out.append(_ended(old, "the tap stopped following it (too many open streams)"))
        return out

    def resume(self, session: str, event_id: str) -> Parked | None:
        """The stream a GET with ``Last-Event-ID: event_id`` in ``session`` resumes, if any."""
        return self.parked.pop((session, event_id), None)

    def judge_resumed(
        self,
        stream: Parked,
        status: int,
        events: list[SSEEvent],
        now: float,
        *,
        where: str = "origin",
    ) -> list[Finding]:
        """Judge the continuation of ``stream`` on a resuming GET's events.

        The continuation is judged with the original request's verdict (relatedness, the
        response and its id). When it again closes after an event id without the response,
        it is parked again under that id instead of being reported.
        """
        if status != 200:
            # The server refused the resumption (404: its session ended): the stream ended.
            return [_ended(stream, f"its resumption was answered HTTP {status}")]
        found, _ = check_sse_stream(
            stream.verdict, status, events, stream.context, where=where, resumed=True
        )
        cursor = last_event_id(events)
        if resumable(stream.verdict, found) and cursor:
            self.park(
                Parked(
                    stream.session,
                    cursor,
                    stream.verdict,
                    stream.context,
                    now,
                    stream.where,
                    stream.connections + 1,
                )
            )
            found = [f for f in found if f.rule != "sse.unterminated"]
        return found

    def end_session(self, session: str) -> list[Finding]:
        """The session ended (DELETE, or 404 for it): its parked streams ended unanswered."""
        keys = [k for k in self.parked if k[0] == session]
        return [_ended(self.parked.pop(k), "its session ended") for k in keys]

    def expire(self, now: float) -> list[Finding]:
        """Streams not resumed within the idle limit ended unanswered."""
        out: list[Finding] = []
        for key in [k for k, s in self.parked.items() if now - s.since > self.idle_limit_s]:
            out.append(
                _ended(self.parked.pop(key), f"nothing resumed it for {self.idle_limit_s:g} s")
            )
        return out


def _ended(stream: Parked, why: str) -> Finding:
    rid = stream.verdict.id
    return finding(
        "sse.unterminated",
        f"the stream of {stream.verdict.method} (id {rid!r}) ended before the final response "
        f"after {stream.connections} connection(s): {why}",
        stream.where,
        era=stream.verdict.era,
    )
