"""Bounded capture of what streams past: raw chunks in the forwarder, decoded in the recorder.

The forwarding process keeps only raw chunks and their arrival times (:class:`RawBody`), at
most ``cap`` bytes of each body. Digests, header maps, decoding (gzip, deflate, SSE) and JSON
parsing happen in the recorder (:class:`BodyCapture` is built there from a :class:`RawBody`).
The digest still covers every byte: a body that grows past the cap starts an incremental hash
in the forwarder (over the kept part first, then every later byte), the only hashing the
forwarder ever does. Every body digest is made by :func:`new_body_hash`.
"""

from __future__ import annotations

import hashlib
import operator
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol


class BodyHash(Protocol):
    """An incremental digest of a body's bytes."""

    def update(self, data: bytes, /) -> None:
        """Take in more bytes."""
        ...

    def hexdigest(self) -> str:
        """The hex digest of every byte taken in."""
        ...


def new_body_hash() -> BodyHash:
    """The one place a body digest starts (SHA-256 of the bytes on the wire)."""
    return hashlib.sha256()


class RawBody:
    """One body as it passed: the first ``cap`` bytes as chunks (with arrival times), size,
    whether its end was seen, and (only past the cap) a running digest."""

    __slots__ = ("_hash", "cap", "chunks", "digest", "ended", "kept", "size", "times")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.chunks: list[bytes] = []
        self.times: list[float] = []
        self.size = 0
        self.kept = 0
        self.ended = False
        self.digest = ""  # set once past the cap (at finish); otherwise the recorder makes it
        self._hash: BodyHash | None = None

    def feed(self, chunk: bytes, at: float = 0.0) -> None:
        """Account for one chunk that passed through (``at``: its arrival time)."""
        self.size += len(chunk)
        if self._hash is not None:
            self._hash.update(chunk)
            return
        room = self.cap - self.kept
        if len(chunk) <= room:
            self.chunks.append(chunk)
            self.times.append(at)
            self.kept += len(chunk)
            return
        # Past the cap: keep what fits, and hash from the first byte on from here.
        if room:
            self.chunks.append(chunk[:room])
            self.times.append(at)
            self.kept = self.cap
        digest = new_body_hash()
        for kept in self.chunks:
            digest.update(kept)
        digest.update(chunk[room:])
        self._hash = digest

    def take(self, pieces: Sequence[bytes], at: float) -> None:
        """:meth:`feed` of each piece, all arrived at ``at`` (one call for a parser's pieces)."""
        n = len(pieces)
        size = len(pieces[0]) if n == 1 else sum(map(len, pieces))  # (usually one piece)
        if self._hash is None and size <= self.cap - self.kept:  # the usual case: all kept
            self.size += size
            self.kept += size
            self.chunks += pieces
            if n == 1:
                self.times.append(at)
            else:
                self.times += [at] * n
            return
        for piece in pieces:
            self.feed(piece, at)

    def finish(self) -> None:
        """Freeze the running digest (if any) into :attr:`digest` before the hand-over."""
        if self._hash is not None:
            self.digest = self._hash.hexdigest()
            self._hash = None

    @property
    def truncated(self) -> bool:
        """Whether bytes past the cap were not kept."""
        return self.size > self.kept

    def state(self) -> tuple[Any, ...]:
        """Everything the recorder needs, as plain values (digest frozen first)."""
        if self._hash is not None:
            self.finish()
        return (self.cap, self.chunks, self.times, self.size, self.ended, self.digest)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_raw_restored, self.state())


SPENT = RawBody(0)
"""What a parser holds in place of its finished message's body, until its next message's
(nothing is fed to it: a test checks it stays empty)."""


def _raw_restored(
    cap: int, chunks: list[bytes], times: list[float] | None, size: int, ended: bool,
    digest: str,
) -> RawBody:
    body = RawBody(cap)
    if times is None:  # a request body's state: every chunk arrived "at" 0.0
        times = [0.0] * len(chunks)
    body.chunks, body.times, body.size, body.ended, body.digest = (
        chunks, times, size, ended, digest)
    body.kept = sum(len(c) for c in chunks)
    return body


@dataclass(slots=True)
class BodyCapture:
    """One body as the recorder judges it: digest and size of all bytes, a decoded copy of at
    most ``cap`` bytes (``gzip``/``deflate`` decoded; other encodings are unreadable)."""

    cap: int
    encoding: str = ""
    size: int = 0
    truncated: bool = False
    decode_failed: bool = False
    ended: bool = False  # the body's end was seen (not cut short by a client or upstream)
    digest: str = ""
    _chunks: list[bytes] = field(default_factory=list)

    @classmethod
    def from_raw(cls, raw: RawBody, encoding: str) -> BodyCapture:
        """Decode a forwarded body's kept chunks (bounded by the cap, even for a gzip bomb)."""
        return cls.from_state(raw.state(), encoding)

    @classmethod
    def from_state(cls, state: tuple[Any, ...], encoding: str) -> BodyCapture:
        """:meth:`from_raw` of a body's hand-off state (:meth:`RawBody.state`)."""
        cap, chunks, _, size, ended, digest = state
        kept = len(chunks[0]) if len(chunks) == 1 else sum(map(len, chunks))
        capture = cls(cap, encoding, size, size > kept, False, ended, digest)
        if not digest:
            hasher = new_body_hash()
            for chunk in chunks:
                hasher.update(chunk)
            capture.digest = hasher.hexdigest()
        # the usual header value first, so the common case skips the strip and lower
        enc = encoding if not encoding or encoding == "identity" else encoding.strip().lower()
        if enc in ("", "identity"):
            capture._chunks = list(chunks)
            return capture
        if enc in ("gzip", "x-gzip"):
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            inflater = zlib.decompressobj()
        else:
            capture.decode_failed = True  # br, zstd: forwarded untouched, judged as unreadable
            return capture
        kept = 0
        for chunk in chunks:
            try:
                data = inflater.decompress(chunk, max(0, cap - kept) + 1)
            except zlib.error:
                capture.decode_failed = True
                return capture
            if kept + len(data) > cap:
                data = data[: cap - kept]
                capture.truncated = True
            if data:
                capture._chunks.append(data)
                kept += len(data)
            if capture.truncated:
                break
        return capture

    @property
    def body(self) -> bytes:
        """The captured (decoded, capped) body."""
        if len(self._chunks) > 1:
            self._chunks = [b"".join(self._chunks)]
        return self._chunks[0] if self._chunks else b""

    @property
    def complete(self) -> bool:
        """Whether :attr:`body` holds the whole decoded body: kept in full and read to its end."""
        return self.ended and not self.truncated and not self.decode_failed


Pairs = tuple[tuple[bytes, bytes], ...]
Head = Pairs | bytes  # header byte pairs, or a whole raw head (the recorder splits it)


class RawExchange:
    """Everything the forwarder saw of one exchange, raw: heads as received, raw bodies, time
    stamps. The recorder turns it into a judged record (see ``recorder.materialize``)."""

    __slots__ = (
        "client",
        "client_gone",
        "egress_body",
        "egress_bytes",
        "egress_changes",
        "egress_end_at",
        "egress_pairs",
        "egress_status",
        "end_at",
        "first_byte_at",
        "forwarded_at",
        "forwarded_pairs",
        "handover_key",
        "head_changes",
        "hop",
        "http_method",
        "interim",
        "path",
        "received_at",
        "request",
        "request_framing",
        "request_pairs",
        "response",
        "response_framing",
        "response_pairs",
        "sent_at",
        "session",
        "session_version",
        "status",
        "tap_error",
        "trace_id",
        "tunnel",
        "upgraded",
        "upstream",
    )

    def __init__(
        self, hop: str, upstream: str, client: str, http_method: str, path: str,
        request_pairs: Head, request: RawBody, received_at: float,
    ) -> None:
        self.hop, self.upstream, self.client = hop, upstream, client
        self.http_method, self.path = http_method, path
        self.request_pairs = request_pairs
        self.forwarded_pairs: Head | None = None  # None: forwarded as received
        self.head_changes: list[dict[str, str]] | None = None  # None: none (see LISTED)
        self.request = request
        self.received_at = received_at
        self.trace_id = ""
        self.forwarded_at: float | None = None
        self.status: int | None = None
        self.response_pairs: Head = ()
        self.response: RawBody | None = None
        self.first_byte_at: float | None = None
        self.end_at: float | None = None
        self.egress_status: int | None = None
        self.egress_pairs: Head | None = None  # None: the origin's, as received
        self.egress_changes: list[dict[str, str]] | None = None
        self.egress_body: bytes | None = None  # the tap's own answer (502/503/504/400)
        self.egress_bytes = 0
        self.sent_at: float | None = None
        self.egress_end_at: float | None = None
        self.client_gone = False
        self.tap_error: dict[str, Any] | None = None
        self.session_version: str | None = None
        self.handover_key: int | None = None
        self.request_framing = ""  # "length", "chunked", "none"
        self.response_framing = ""  # "length", "chunked", "close", "none"
        self.upgraded = False
        # After an Upgrade: the tunnel's bytes client to origin and back (capped, digested).
        self.tunnel: tuple[RawBody, RawBody] | None = None
        self.interim: list[int] | None = None  # 1xx statuses forwarded before the final answer
        self.session: str | None = None  # the Mcp-Session-Id the request named

    def __reduce__(self) -> tuple[Any, ...]:
        return (_exchange_restored, _STATE(self))

    def egress_changed(self, changes: list[dict[str, str]]) -> None:
        """Add to :attr:`egress_changes` (None until there is one: see :data:`LISTED`)."""
        if changes:
            if self.egress_changes is None:
                self.egress_changes = []
            self.egress_changes += changes

    def interim_sent(self, status: int) -> None:
        """Add an interim (1xx) status forwarded to :attr:`interim`."""
        if self.interim is None:
            self.interim = []
        self.interim.append(status)

    def state(self) -> tuple[Any, ...]:
        """The exchange as plain values (tuples, lists, bytes, str, numbers) for the hand-over:
        marshal (the hand-off's encoding) takes them whole, with no per-object call back into
        Python and no lookup of a reconstructor. :meth:`restored` turns them back.

        ``(flat, request body, response body, tunnel)``: ``flat`` is the
        :data:`COMMON_NAMES` fields, then the :data:`RARE_NAMES` ones as a tuple, or None
        when each has its usual value (:data:`RARE_USUAL`): what most exchanges hand over is
        14 objects fewer to encode and decode. A body is :meth:`RawBody.state`, the
        request's without its arrival times (None: each of its chunks is stamped 0.0, and
        only an answer's times are read, for its SSE events). ``handover_key`` is not in it.

        Written out field by field (one tuple display each, one test per rare field, the
        first unusual one ending the chain, no call per body): the layout is pinned to
        :data:`COMMON_NAMES` and :data:`RARE_USUAL` by tests/proxy/test_handoff_layout.py.
        """
        end_at = self.end_at
        status = self.status
        # ``is`` for None and False (what a tuple comparison's identity test finds), ``==``
        # for the rest; no tuple of the fields and their usual values is built to compare.
        if (self.client_gone is False and self.egress_body is None
                and self.egress_changes is None and self.egress_end_at == end_at
                and self.egress_pairs is None and self.egress_status == status
                and self.forwarded_pairs is None and self.head_changes is None
                and self.interim is None and self.session is None
                and self.session_version is None and self.tap_error is None
                and self.trace_id == "" and self.upgraded is False):
            rare: tuple[Any, ...] | None = None
        else:
            rare = (self.client_gone, self.egress_body, self.egress_changes,
                    self.egress_end_at, self.egress_pairs, self.egress_status,
                    self.forwarded_pairs, self.head_changes, self.interim, self.session,
                    self.session_version, self.tap_error, self.trace_id, self.upgraded)
        request = self.request
        if request._hash is not None:
            request.finish()
        body = self.response
        response: tuple[Any, ...] | None = None
        if body is not None:
            if body._hash is not None:
                body.finish()
            response = (body.cap, body.chunks, body.times, body.size, body.ended, body.digest)
        tunnel = self.tunnel
        return ((self.hop, self.upstream, self.client, self.http_method, self.path,
                 self.received_at, self.forwarded_at, self.first_byte_at, self.sent_at,
                 end_at, status, self.egress_bytes, self.request_framing,
                 self.response_framing, self.request_pairs, self.response_pairs, rare),
                (request.cap, request.chunks, None, request.size, request.ended,
                 request.digest),
                response,
                None if tunnel is None else (tunnel[0].state(), tunnel[1].state()))

    @classmethod
    def restored(cls, state: tuple[Any, ...]) -> RawExchange:
        """The exchange :meth:`state` describes."""
        flat, request, response, tunnel = state
        raw = cls.__new__(cls)
        for name, value in flat_fields(flat).items():
            setattr(raw, name, value)  # (handover_key: None, the message carries it)
        raw.request = _raw_restored(*request)
        raw.response = None if response is None else _raw_restored(*response)
        raw.tunnel = None if tunnel is None else (_raw_restored(*tunnel[0]),
                                                  _raw_restored(*tunnel[1]))
        return raw


_STATE = operator.attrgetter(*RawExchange.__slots__)  # every field at once, in C
# Every flat field of RawExchange.state(), in slot order (what the recording process reads).
FLAT_NAMES = tuple(n for n in RawExchange.__slots__ if n not in ("request", "response", "tunnel"))
COMMON_NAMES = (
    "hop", "upstream", "client", "http_method", "path", "received_at", "forwarded_at",
    "first_byte_at", "sent_at", "end_at", "status", "egress_bytes",
    "request_framing", "response_framing", "request_pairs", "response_pairs",
)
"""The flat fields handed over one by one, in this order (every exchange sets most). Not
``handover_key``: the hand-off message carries it (``("record", key, state)``), and marshal
would index an int that appears twice."""
SAME_AS = object()
"""A :data:`RARE_USUAL` value's marker: "the value of another field" (the second item)."""
RARE_USUAL: dict[str, Any] = {
    "client_gone": False,
    "egress_body": None,
    "egress_changes": None,
    "egress_end_at": (SAME_AS, "end_at"),
    "egress_pairs": None,
    "egress_status": (SAME_AS, "status"),
    "forwarded_pairs": None,
    "head_changes": None,
    "interim": None,
    "session": None,
    "session_version": None,
    "tap_error": None,
    "trace_id": "",
    "upgraded": False,
}
"""The other flat fields and their usual values (``(SAME_AS, name)``: the value of the
field ``name``): handed over as one tuple, or None when every one has its usual value.
Data for the tests that pin :meth:`RawExchange.state` and :func:`unpack_flat` to it."""
RARE_NAMES = tuple(RARE_USUAL)
LISTED = ("egress_changes", "head_changes", "interim")
"""List fields that are None in the forwarder until they hold something (three empty lists
fewer per exchange): read back as lists (a None, handed over or usual, is read as []), as
the recorder reads them."""
assert sorted((*COMMON_NAMES, *RARE_NAMES, "handover_key")) == sorted(FLAT_NAMES)


class Flat(NamedTuple):
    """The flat fields of :meth:`RawExchange.state`, read back (:func:`unpack_flat`): the
    :data:`COMMON_NAMES` fields, then the :data:`RARE_NAMES` ones (their usual values when
    the forwarder sent None for them), a :data:`LISTED` field left None read as a new list.
    Not ``handover_key``: the hand-off message carries it."""

    hop: str
    upstream: str
    client: str
    http_method: str
    path: str
    received_at: float
    forwarded_at: float | None
    first_byte_at: float | None
    sent_at: float | None
    end_at: float | None
    status: int | None
    egress_bytes: int
    request_framing: str
    response_framing: str
    request_pairs: Head
    response_pairs: Head
    client_gone: bool
    egress_body: bytes | None
    egress_changes: list[dict[str, str]]
    egress_end_at: float | None
    egress_pairs: Head | None
    egress_status: int | None
    forwarded_pairs: Head | None
    head_changes: list[dict[str, str]]
    interim: list[int]
    session: str | None
    session_version: str | None
    tap_error: dict[str, Any] | None
    trace_id: str
    upgraded: bool


_new_flat = tuple.__new__


def unpack_flat(flat: tuple[Any, ...]) -> Flat:
    """The :class:`Flat` of a handed-over flat tuple (a tuple of another shape raises
    ValueError). The inverse of the flat part of :meth:`RawExchange.state`."""
    (hop, upstream, client, http_method, path, received_at, forwarded_at, first_byte_at,
     sent_at, end_at, status, egress_bytes, request_framing, response_framing, request_pairs,
     response_pairs, rare) = flat
    if rare is None:  # every rare field has its usual value (RARE_USUAL; [] when LISTED)
        return _new_flat(Flat, (
            hop, upstream, client, http_method, path, received_at, forwarded_at,
            first_byte_at, sent_at, end_at, status, egress_bytes, request_framing,
            response_framing, request_pairs, response_pairs,
            False, None, [], end_at, None, status, None, [], [], None, None, None, "", False))
    (client_gone, egress_body, egress_changes, egress_end_at, egress_pairs, egress_status,
     forwarded_pairs, head_changes, interim, session, session_version, tap_error, trace_id,
     upgraded) = rare
    return _new_flat(Flat, (
        hop, upstream, client, http_method, path, received_at, forwarded_at, first_byte_at,
        sent_at, end_at, status, egress_bytes, request_framing, response_framing,
        request_pairs, response_pairs, client_gone, egress_body,
        [] if egress_changes is None else egress_changes, egress_end_at, egress_pairs,
        egress_status, forwarded_pairs, [] if head_changes is None else head_changes,
        [] if interim is None else interim, session, session_version, tap_error, trace_id,
        upgraded))


def flat_fields(flat: tuple[Any, ...]) -> dict[str, Any]:
    """The flat fields of :meth:`RawExchange.state` by name, in :data:`FLAT_NAMES` order
    (``handover_key`` None: the message carries it)."""
    fields = unpack_flat(flat)._asdict()
    return {name: fields.get(name) for name in FLAT_NAMES}


def _exchange_restored(*values: Any) -> RawExchange:
    raw = RawExchange.__new__(RawExchange)
    for name, value in zip(RawExchange.__slots__, values, strict=True):
        setattr(raw, name, value)
    return raw
