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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


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
        """
        return _STATE_OF(self)  # (replaced by _STATE_OF itself below)

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
RARE_USUAL = {
    "client_gone": "False",
    "egress_body": "None",
    "egress_changes": "None",
    "egress_end_at": "end_at",
    "egress_pairs": "None",
    "egress_status": "status",
    "forwarded_pairs": "None",
    "head_changes": "None",
    "interim": "None",
    "session": "None",
    "session_version": "None",
    "tap_error": "None",
    "trace_id": "''",
    "upgraded": "False",
}
"""The other flat fields and their usual values, as Python expressions (``end_at`` and
``status``: the values of those fields): handed over as one tuple, or None when every one
has its usual value."""
RARE_NAMES = tuple(RARE_USUAL)
LISTED = ("egress_changes", "head_changes", "interim")
"""List fields that are None in the forwarder until they hold something (three empty lists
fewer per exchange, ~1.1k instructions): read back as lists (:data:`RARE_READ`, or [] for
a None among the rare ones handed over), as the recorder reads them."""
RARE_READ = {n: "[]" if n in LISTED else v for n, v in RARE_USUAL.items()}
"""What the readers of the flat tuple build for the rare fields when it holds None."""
assert sorted((*COMMON_NAMES, *RARE_NAMES, "handover_key")) == sorted(FLAT_NAMES)


def _generated(source: str, name: str) -> Any:
    """The function ``name`` defined by ``source`` (built from the field names above and
    nothing from outside: one display per tuple, each ``self.name`` a specialised slot
    load, as dataclasses make their methods)."""
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    return namespace[name]


def _state_source() -> str:
    common = ", ".join("end_at" if n == "end_at" else "status" if n == "status"
                       else f"self.{n}" for n in COMMON_NAMES)
    rare = ", ".join(f"self.{n}" for n in RARE_NAMES)
    # One test per field, the first unusual one ending it (no tuple of the fields and of
    # their usual values built to compare them): ``is`` for None and False (what the
    # tuple comparison's identity test finds for them), ``==`` for the rest.
    usual = " and ".join(
        f"self.{n} is {v}" if v in ("None", "False") else f"self.{n} == {v}"
        for n, v in RARE_USUAL.items())
    body = "cap, chunks, times, size, ended, digest"
    return (
        "def state(self):\n"
        "    end_at = self.end_at\n"
        "    status = self.status\n"
        f"    if {usual}:\n"
        "        rare = None\n"
        "    else:\n"
        f"        rare = ({rare},)\n"
        "    request = self.request\n"
        "    if request._hash is not None:\n"
        "        request.finish()\n"
        "    response = self.response\n"
        "    if response is not None:\n"
        "        if response._hash is not None:\n"
        "            response.finish()\n"
        f"        response = ({', '.join(f'response.{n}' for n in body.split(', '))})\n"
        "    tunnel = self.tunnel\n"
        "    if tunnel is not None:\n"
        "        tunnel = (tunnel[0].state(), tunnel[1].state())\n"
        f"    return (({common}, rare), "
        f"({', '.join('None' if n == 'times' else f'request.{n}' for n in body.split(', '))}),"
        " response, tunnel)\n"
    )


# RawExchange.state in one frame: the flat tuple, the rare ones' test (a chain of one test per
# field, no tuple built) and both bodies' states, with no call per body; the method itself (no
# wrapper call).
_STATE_OF: Callable[[RawExchange], tuple[Any, ...]] = _generated(_state_source(), "state")
_STATE_OF.__doc__ = RawExchange.state.__doc__
RawExchange.state = _STATE_OF  # type: ignore[method-assign,assignment]


def flat_unpacking_source() -> str:
    """Source lines (a function body's, for :func:`_generated`) that unpack the flat tuple
    named ``flat`` into one local per field: :data:`COMMON_NAMES`, then the
    :data:`RARE_NAMES` fields from their tuple, or their usual values (:data:`RARE_READ`)
    when it is None; a :data:`LISTED` field the forwarder left None is read as a new list."""
    rare = ", ".join(RARE_NAMES)
    return (
        f"    ({', '.join(COMMON_NAMES)}, rare) = flat\n"
        "    if rare is None:\n"
        f"        ({rare},) = ({', '.join(RARE_READ.values())},)\n"
        "    else:\n"
        f"        ({rare},) = rare\n"
        + "".join(f"        if {n} is None:\n            {n} = []\n" for n in LISTED)
    )


def _fields_source() -> str:
    value = {n: n for n in (*COMMON_NAMES, *RARE_NAMES)}  # handover_key: None
    return (
        "def fields(flat):\n"
        + flat_unpacking_source()
        + f"    return {{{', '.join(f'{n!r}: {value.get(n)}' for n in FLAT_NAMES)}}}\n"
    )


flat_fields: Callable[[tuple[Any, ...]], dict[str, Any]] = _generated(_fields_source(), "fields")
"""The flat fields of :meth:`RawExchange.state` by name, in :data:`FLAT_NAMES` order (a
tuple of another shape raises ValueError)."""


def _exchange_restored(*values: Any) -> RawExchange:
    raw = RawExchange.__new__(RawExchange)
    for name, value in zip(RawExchange.__slots__, values, strict=True):
        setattr(raw, name, value)
    return raw
