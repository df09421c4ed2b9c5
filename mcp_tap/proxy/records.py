"""The evidence record of one judged exchange: redacted views, sealed digests, findings.

:class:`RecordBuilder` turns a :class:`~mcp_tap.proxy.captured.Captured` and its
:class:`~mcp_tap.core.exchange.Judgement` into the ``exchange`` record the evidence writer
chains: headers, bodies (JSON redacted, or redacted text), SSE events, keyed digests of every
body, and finding messages scrubbed of the values redaction removed.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from mcp_tap.core import deepjson
from mcp_tap.core.eras import Era
from mcp_tap.core.exchange import Judgement
from mcp_tap.core.findings import Finding
from mcp_tap.core.hashing import DigestKey, seal_hex
from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.jsonrpc import KIND_REQUEST, Kind
from mcp_tap.core.redaction import Redacted, Redactor
from mcp_tap.core.redaction.clean import CLEAN_CHECK_MIN
from mcp_tap.proxy.capture import BodyCapture
from mcp_tap.proxy.captured import Captured

_RAW_TEXT_CHARS = 4096  # of a body that is not JSON
# Levels a record wraps around a body (record > origin > sse > event > data) and its chain
# digest's canonical JSON adds none: a body nested deeper than orjson writes minus these is
# stored as redacted JSON text.
_RECORD_LEVELS = 6
_MAX_HEADS = 256  # redacted head views remembered (attacker-chosen heads start over)


_ERA_TEXT = {era: str(era) for era in Era}  # str() of each member, looked up
_KIND_TEXT = {kind: str(kind) for kind in Kind}


def request_parts(j: Judgement) -> tuple[Kind | None, str | None, Any]:
    """The judged request's kind, method and id (``Judgement.kind``, ``.method`` and
    ``.rpc_id``), read from its classified message at once rather than through three
    chains of properties."""
    request = j.request
    if request is None:
        return None, None, None
    classified = request.classified
    kind = classified.kind
    message = classified.message
    if not isinstance(message, dict):
        return kind, None, None
    method = message.get("method")
    return (kind, method if isinstance(method, str) else None,
            message.get("id") if kind is KIND_REQUEST else None)


class RecordBuilder:
    """Builds exchange records with one redactor and one digest key (one bundle's)."""

    def __init__(self, redactor: Redactor, digest_key: DigestKey) -> None:
        """Records redacted by ``redactor`` with body digests keyed by ``digest_key``."""
        self.redactor = redactor
        self.digest_key = digest_key
        self.digests = digest_key.describe()
        self._ids: list[str] = []  # exchange ids drawn, not yet given (see exchange_id)
        # Redacted views of the header maps seen last, by identity: materialize shares one
        # (immutable) header map per distinct head, so a repeated head is redacted once, and
        # an id is looked up without hashing the head's strings. Each entry holds its map,
        # so the id stays that map's while it is remembered. The views are shared by records
        # as a head's view is shared by two views of one record: nothing mutates a record.
        self._heads: dict[int, tuple[HeaderMap, list[list[str]]]] = {}

    def header_lists(self, headers: HeaderMap) -> list[list[str]]:
        """:meth:`Redactor.redact_header_lists` of ``headers``' pairs, remembered (bounded)."""
        known = self._heads.get(id(headers))
        if known is not None and known[0] is headers:
            return known[1]
        view = self.redactor.redact_header_lists(headers.pairs)
        if len(self._heads) >= _MAX_HEADS:
            self._heads.clear()
        self._heads[id(headers)] = (headers, view)
        return view

    def exchange_id(self) -> str:
        """A random exchange id (64 bits, hex), drawn 256 at a time (one system call)."""
        ids = self._ids
        if not ids:
            drawn = secrets.token_hex(8 * 256)
            # Cut at once, last first: pop() then gives them in the order they were drawn.
            ids[:] = [drawn[at : at + 16] for at in range(len(drawn) - 16, -1, -16)]
        return ids.pop()

    def _body_json(
        self, capture: BodyCapture | None, messages: Any,
        written: deepjson.WrittenJson | None = None,
    ) -> tuple[Any, str | None]:
        """The redacted body for a view, and a note when it is stored as text (``written``:
        what the judge wrote of it as JSON, see :class:`~mcp_tap.core.deepjson.WrittenJson`)."""
        if capture is None or not capture.complete:
            return None, None
        body = capture.body  # a property: read once
        if not body:
            return None, None
        if messages is None:
            try:
                messages = orjson.loads(body)
            except orjson.JSONDecodeError:
                text = body[:_RAW_TEXT_CHARS].decode("utf-8", "replace")
                return {"raw": self.redactor.redact_text(text)}, None
        return self._recordable(self.redactor.walk_message_text(messages, body, written), 2)

    def _recordable(self, done: Redacted, levels: int) -> tuple[Any, str | None]:
        """``done``'s value, or its redacted JSON text when orjson cannot write it."""
        if done.depth + levels + _RECORD_LEVELS <= deepjson.ORJSON_MAX_DEPTH:
            return done.value, None
        note = f"JSON nested {done.depth} deep is stored as redacted text"
        return {"raw": deepjson.dumps(done.value)}, note

    def _sse_json(self, cap: Captured, j: Judgement) -> list[dict[str, Any]]:
        # The judge parsed these events' data: one message per event with data, in order,
        # when every one of them parsed (it judged exactly cap.sse; see Recorder._judge).
        # Then the record redacts those messages and parses nothing again.
        events = [t.event for t in cap.sse]
        texts = [e.data for e in events]
        parsed: Iterator[Any] | None = None
        if not cap.sse_incomplete and j.response_messages and len(j.response_messages) == (
                len(texts) - texts.count("")):
            parsed = iter(j.response_messages)
        red = self.redactor
        written = j.context.written if j.context is not None else None
        # walk_message without its call per event when no argument policy picks targets.
        walk = red.walk_message if red.policy.argument_policies else red.walk_plain
        out = []
        for t, event, text in zip(cap.sse, events, texts, strict=True):
            data: Any
            note = None
            try:
                message = (next(parsed) if parsed is not None and text != ""
                           else orjson.loads(text))
                if len(text) < CLEAN_CHECK_MIN:
                    done = walk(message)
                else:
                    done = red.walk_message_text(
                        message, text.encode("utf-8", "surrogatepass"), written)
                data, note = self._recordable(done, 4)
            except orjson.JSONDecodeError:
                data = red.redact_text(text)
            shown = {"at": t.at, "data": data, "event": event.event, "id": event.id}  # sorted
            if note is not None:
                shown["data"], shown["note"] = data["raw"], note
            out.append(shown)
        return out

    def secrets(self, cap: Captured, j: Judgement) -> list[str]:
        """The values redaction removes from this exchange (headers and JSON-RPC messages)."""
        return self.redactor.removed_values(
            (cap.request_headers.pairs, cap.response_headers.pairs),
            (j.request_message, *j.response_messages))

    def findings_json(self, found: Sequence[Finding], secrets: list[str]) -> list[dict[str, Any]]:
        """Findings for the evidence: messages quote wire values, so they are redacted too."""
        out = []
        for f in found:
            data = f.to_json()
            data["message"] = self.redactor.scrub(f.message, secrets)
            out.append(data)
        return out

    def _origin_view(
        self,
        cap: Captured,
        j: Judgement,
        response_headers: list[list[str]],
        origin_digest: str,
        content_type: str | None,
    ) -> dict[str, Any] | None:
        """The record's origin view (None: the origin never answered)."""
        response = cap.response
        if cap.status is None or response is None:
            return None
        is_sse = content_type == "text/event-stream"
        body, note = (None, None) if is_sse else self._body_json(
            response, j.response_messages[0] if len(j.response_messages) == 1 else None,
            j.context.written if j.context is not None else None,
        )
        # Keys in the order the chain digest sorts them (sorting sorted keys is cheaper).
        origin = {
            "body": body,
            "bodyDigest": origin_digest,
            "bodySize": response.size,
            "contentType": content_type,
            "endAt": cap.end_at,
            "ended": response.ended,
            "firstByteAt": cap.first_byte_at,
            "framing": cap.response_framing or None,
            # What the origin received differs from what the client sent only by these.
            "headChanges": cap.head_changes,
            "headers": response_headers,
            "sse": self._sse_json(cap, j) if is_sse else None,
            "status": cap.status,
            "truncated": not response.complete,
        }
        if note is not None:
            origin["bodyNote"] = note
        if cap.interim:
            origin["interim"] = cap.interim
        return origin

    def build(
        self,
        cap: Captured,
        j: Judgement,
        found: list[Finding],
        parts: tuple[Any, str | None, Any] | None = None,
    ) -> dict[str, Any]:
        """The exchange record of ``cap`` judged ``j`` with findings ``found``.

        ``parts``: :func:`request_parts` of ``j``, when the caller has read them already.
        """
        red = self.redactor
        response = cap.response
        content_type = cap.response_headers.content_type()
        key = self.digest_key
        kind, method, rpc_id = request_parts(j) if parts is None else parts
        # A head that passed as it came is one header map for both views: redacted once
        # (the record holds the same list twice; nothing mutates a record's lists).
        response_headers = self.header_lists(cap.response_headers)
        request_headers = self.header_lists(cap.request_headers)
        # Spliced, the client got the origin's bytes: one sealed digest for both views.
        same_bytes = response is not None and cap.egress_digest == response.digest
        origin_digest = seal_hex(key, response.digest) if response is not None else ""
        origin = self._origin_view(cap, j, response_headers, origin_digest, content_type)
        request = cap.request
        request_body, request_note = self._body_json(request, j.request_message)
        forwarded_headers = (request_headers if cap.forwarded_headers is cap.request_headers
                             else self.header_lists(cap.forwarded_headers))
        if request_body is not j.request_message and j.request_message is not None:
            # Redaction hid something in the body: an Mcp-Param-* header may mirror it.
            request_headers = red.redact_mirrored(request_headers, j.request_message)
            forwarded_headers = red.redact_mirrored(forwarded_headers, j.request_message)
        tap_error = cap.tap_error
        if tap_error is not None:
            # A library's reason may quote the upstream URL: no query, no userinfo.
            tap_error = {**tap_error, "reason": red.redact_reason(str(tap_error["reason"]))}
        # Keys in the order the chain digest sorts them (sorting sorted keys is cheaper).
        record = {
            "client": cap.client,
            "digests": self.digests,
            "egress": {
                "bodyDigest": origin_digest if same_bytes else seal_hex(key, cap.egress_digest),
                "bodySize": cap.egress_bytes,
                "clientGone": cap.client_gone,
                "endAt": cap.egress_end_at,
                "headChanges": cap.egress_changes,
                "headers": response_headers
                if cap.egress_headers is cap.response_headers
                else self.header_lists(cap.egress_headers),
                # Same bytes and status as the origin view: the origin's findings hold here too.
                "sameAsOrigin": same_bytes and cap.egress_status == cap.status,
                "sentAt": cap.sent_at,
                "status": cap.egress_status,
            },
            "era": _ERA_TEXT.get(j.era) or str(j.era),
            "exchangeId": self._ids.pop() if self._ids else self.exchange_id(),
            "findings": self.findings_json(found, self.secrets(cap, j)) if found else [],
            "hop": cap.hop,
            "ingress": {
                "body": request_body,
                "bodyDigest": seal_hex(key, request.digest),
                "bodySize": request.size,
                "ended": request.ended,
                "forwardedAt": cap.forwarded_at,
                "forwardedHeaders": forwarded_headers,
                "framing": cap.request_framing or None,
                "headers": request_headers,
                "httpMethod": cap.http_method,
                "path": red.redact_url(cap.path),
                "receivedAt": cap.received_at,
                "truncated": not request.complete,
            },
            "kind": "exchange",
            "messageKind": _KIND_TEXT.get(kind) or str(kind) if kind else None,
            "method": method,
            "origin": origin,
            "rpcId": rpc_id,
            "tapError": tap_error,
            "traceId": cap.trace_id,
            "upgraded": cap.upgraded,
        }
        if request_note is not None:
            record["ingress"]["bodyNote"] = request_note
        if cap.tunnel is not None:
            # The tunnel's bytes are not HTTP: sizes and digests of every byte, nothing judged.
            up, down = cap.tunnel
            record["tunnel"] = {
                "clientBytes": up.size, "clientDigest": seal_hex(key, up.digest),
                "originBytes": down.size, "originDigest": seal_hex(key, down.digest),
                "truncated": up.truncated or down.truncated,
            }
        return record
