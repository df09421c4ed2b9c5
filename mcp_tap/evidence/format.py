"""The on-disk evidence format: its version, file names, record digests and migrations.

A bundle is a directory::

    bundle.json                       {"format": 2, "bundleId", "createdAt", "tool", "toolVersion",
                                       "signing"[, "closed"], "signature"}
    segment-000001.jsonl              one orjson record per line, every line ends in "\\n"
    segment-000001.manifest.json      written when the segment is closed
    segment-000002.jsonl
    ...

Every record carries ``seq`` (per bundle, from 0, in write order), ``prev`` (the ``digest``
of the record with the previous ``seq``, ``""`` for seq 0, so the chain crosses segments)
and ``digest`` (:func:`record_digest`).

A segment manifest is ``{"format", "segment", "firstSeq", "lastSeq", "count", "bytes",
"fileSha256", "chainHead", "prevSegmentChainHead", "createdAt", "closedAt"}``; for an empty
segment ``lastSeq`` is ``firstSeq - 1`` and ``chainHead`` equals ``prevSegmentChainHead``.

A manifest may also carry ``"tallies"``: what the gate needs of the segment's records,
counted by the recording process as it wrote them and covered by the manifest's signature
(:mod:`mcp_tap.gate.segments`: health counts per hop, latency measures exact or as a
DDSketch, findings by rule, strength and hop, hop boxes, the SDK differential, gap records).
The member is versioned on its own (``tallies.version``, :data:`TALLY_VERSION`), so adding
it changed no record and no other member, and a reader of this format that does not know
it ignores it: ``verify`` checks every manifest as before, and the gate reads the records of
a segment whose manifest has no tallies (older bundles, unsigned ones) or tallies of a
version it does not know.

On a clean shutdown the writer adds ``"closed": {"at", "segments", "records", "lastSeq",
"chainHead", "lost", "end"[, "reason", "inflight"]}`` to ``bundle.json``. Without it nothing
would reveal that whole trailing segments were deleted, because each surviving segment would
still verify on its own. ``end`` is ``"closed"`` only for a writer its proxy drained; a
recording process whose forwarder vanished writes ``"abrupt"`` with the ``reason`` and the
number of exchanges it knew to be ``inflight`` (lost: they will never be recorded).

Format 2 (this version) adds, over format 1:

* ``bundleId`` (random, in ``bundle.json`` and every manifest), so a manifest cannot be moved
  from one bundle into another;
* ``signing``: ``{"algorithm": "ed25519", "publicKey": "<hex>"}``, or ``null`` for an unsigned
  bundle; when signed, ``bundle.json`` (opening and closing summary alike) and every manifest
  carry ``signature`` (Base64 Ed25519 over :func:`signed_bytes`: the canonical JSON of the
  object without ``signature``). The manifests' chain heads cover every record, gap records
  included, so the signatures cover the whole chain;
* the line layout: the writer writes each record as its canonical JSON without ``digest``
  with ``,"digest":"<hex>"`` appended as the last member, so a verifier can hash the bytes as
  stored (:func:`line_digest`) without re-serialising.

The migration from 1 changes no record; a format-1 manifest is read as unsigned.

Versioning: ``format`` in ``bundle.json`` (and in every manifest) is the version of the whole
bundle. Readers accept :data:`FORMAT_VERSION` and every older version from which
:data:`MIGRATIONS` has an unbroken path of upgrades; anything else is rejected with
:class:`~mcp_tap.errors.BundleFormatError`. Migrations rewrite the *shape* of records and
manifests for consumers. They never touch integrity: the rule "``digest`` is the SHA-256 of
the canonical JSON of the stored record without ``digest``; ``prev`` links by ``seq``" is
checked on the record exactly as stored, so a future format that changes that rule must
bring its own verifier rather than a migration.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from mcp_tap.core.hashing import canonical_json, digest, sha256_hex
from mcp_tap.core.jsonrpc import Kind, classify
from mcp_tap.errors import BundleFormatError

FORMAT_VERSION: Final = 2
"""The evidence format this mcp-tap writes."""

TALLY_VERSION: Final = 1
"""The version of a manifest's ``tallies`` member this mcp-tap writes and reads."""

BUNDLE_FILE: Final = "bundle.json"
TOOL_NAME: Final = "mcp-tap"

# The writer owns these keys; whatever a caller put there is replaced.
WRITER_KEYS: Final = frozenset({"seq", "prev", "digest"})

SIGNATURE: Final = "signature"
SIGNING: Final = "signing"
ED25519: Final = "ed25519"
END_CLOSED: Final = "closed"
END_ABRUPT: Final = "abrupt"
END_OPEN: Final = "open"  # never on disk: verify's word for a bundle still being written

# canonical_json's options, plus a refusal of dataclasses: orjson writes them in field order
# even with OPT_SORT_KEYS, so one would hash differently once read back as a dict.
_LINE_OPTIONS: Final = (
    orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS
)
# The same minus OPT_NON_STR_KEYS, which sends every dict down orjson's slower path: for a
# record whose keys are all str (every record the tap makes) the bytes are the same, and
# any other key makes it raise, so the record is written with _LINE_OPTIONS instead.
_STR_KEYS_OPTIONS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS

# A format-2 line ends in this member: `,"digest":"` + 64 hex digits + `"}`.
DIGEST_MEMBER: Final = b',"digest":"'
DIGEST_TAIL: Final = len(DIGEST_MEMBER) + 64 + 2
_LINE_END: Final = b'"}\n'  # the digest's closing quote, the record's brace, the newline

_SEGMENT_RE: Final = re.compile(r"^segment-(\d{6,})\.jsonl$")
_MANIFEST_RE: Final = re.compile(r"^segment-(\d{6,})\.manifest\.json$")


def segment_name(number: int) -> str:
    """Return the file name of segment ``number`` (numbers start at 1)."""
    return f"segment-{number:06d}.jsonl"


def manifest_name(number: int) -> str:
    """Return the file name of the manifest of segment ``number``."""
    return f"segment-{number:06d}.manifest.json"


def segment_number(filename: str) -> int | None:
    """Return the number of a segment file name, or None if ``filename`` is not one."""
    match = _SEGMENT_RE.match(filename)
    return int(match.group(1)) if match else None


def manifest_number(filename: str) -> int | None:
    """Return the segment number of a manifest file name, or None if it is not one."""
    match = _MANIFEST_RE.match(filename)
    return int(match.group(1)) if match else None


def record_digest(record: Mapping[str, Any]) -> str:
    """Return the digest a record must carry: SHA-256 of its canonical JSON without ``digest``."""
    return digest({key: value for key, value in record.items() if key != "digest"})


def encode_record(record: Mapping[str, Any]) -> tuple[bytes, str]:
    """Return ``(line, digest)``: the record's format-2 line (with ``\\n``) and its digest.

    ``record`` must not hold ``digest``. One canonical serialisation serves both: the digest
    is over the canonical JSON, and the line is that JSON with the digest as its last member.
    Raises ``TypeError`` (orjson's) for a record JSON cannot hold.
    """
    pieces: list[bytes | memoryview] = []
    record_hash = encode_record_into(record, pieces)
    return b"".join(pieces), record_hash


def encode_record_into(record: Mapping[str, Any], out: list[bytes | memoryview]) -> str:
    """:func:`encode_record`'s line appended to ``out`` in pieces, for a caller that joins
    many lines at once (each line is then copied once, not once per piece); returns the
    digest. Nothing is appended when it raises."""
    try:
        body = orjson.dumps(record, option=_STR_KEYS_OPTIONS)
    except TypeError:  # a key that is no str (or no JSON at all: raised again below)
        body = orjson.dumps(record, option=_LINE_OPTIONS)
    record_hash = sha256_hex(body)
    if body == b"{}":
        out += (b'{"digest":"', record_hash.encode(), _LINE_END)
    else:
        out += (memoryview(body)[:-1], DIGEST_MEMBER, record_hash.encode(), _LINE_END)
    return record_hash


def line_digest(line: bytes) -> str | None:
    """The digest of a record line in the writer's layout (bytes before the digest member,
    closed again), or None when the line is not in that layout (then hash the parsed record
    with :func:`record_digest`). ``line`` is without its newline.
    """
    tail = len(line) - DIGEST_TAIL
    if tail < 1 or not line.startswith(DIGEST_MEMBER, tail):
        return None
    # Hash in place (no copy of the line): SHA-256 of line[:tail] + "}".
    hasher = hashlib.sha256(memoryview(line)[:tail])
    hasher.update(b"}")
    return hasher.hexdigest()


def signed_bytes(value: Mapping[str, Any]) -> bytes:
    """The bytes a bundle signature covers: canonical JSON of ``value`` without ``signature``."""
    return canonical_json({key: item for key, item in value.items() if key != SIGNATURE})


Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


def answer_is_whole(view: Mapping[str, Any]) -> bool:
    """Whether a recorded ``origin`` / ``egress`` view holds the whole answer.

    ``truncated`` is true whenever the view is not the complete body: cut at the capture
    cap, undecodable, or not read to its end (``ended: false``). A stream the client left
    after the response arrived (the SDK stops reading then) is not ended, yet holds every
    event up to the response, so its answer is whole. Events past the capture cap are
    dropped from the end, the response with them, so a capped stream never passes this test.
    """
    if not view.get("truncated"):
        return True
    if view.get("ended", True):
        return False
    events = view.get("sse")
    return isinstance(events, list) and any(
        isinstance(e, dict) and classify(e.get("data")).kind is Kind.RESPONSE for e in events)


def _unchanged(value: dict[str, Any]) -> dict[str, Any]:
    return value


@dataclass(frozen=True, slots=True)
class Migration:
    """How to lift one format version to the next: a record upgrade and a manifest upgrade.

    ``MIGRATIONS[n]`` turns version ``n`` into version ``n + 1``. Upgrades return new dicts
    (or the same one unchanged) and must keep ``seq``, ``prev``, ``digest`` and ``kind``.
    """

    record: Upgrade = _unchanged
    manifest: Upgrade = _unchanged


def _unsigned_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    return {**manifest, "format": 2}


MIGRATIONS: dict[int, Migration] = {1: Migration(manifest=_unsigned_manifest)}
"""Older format version -> the migration that lifts it by one (1 -> 2: manifests unsigned)."""


def supported_formats() -> tuple[int, ...]:
    """Return every format version this mcp-tap can read, ascending."""
    versions = [FORMAT_VERSION]
    # Walk down from the current version; a hole in the registry ends the readable range.
    version = FORMAT_VERSION - 1
    while version in MIGRATIONS:
        versions.append(version)
        version -= 1
    return tuple(sorted(versions))


def check_format(value: object, where: str) -> int:
    """Return ``value`` as a readable format version, or raise :class:`BundleFormatError`.

    ``where`` names the file in the message, e.g. ``"dir/bundle.json: evidence format 7 is
    not supported (this mcp-tap reads 1)"``.
    """
    supported = supported_formats()
    reads = ", ".join(str(v) for v in supported)
    # bool is an int subclass; `true` is not a version.
    if isinstance(value, bool) or not isinstance(value, int):
        shown = "missing" if value is None else repr(value)
        raise BundleFormatError(
            f"{where}: evidence format {shown} is not a version number (this mcp-tap reads {reads})"
        )
    if value not in supported:
        raise BundleFormatError(
            f"{where}: evidence format {value} is not supported (this mcp-tap reads {reads})"
        )
    return value


def upgrade_record(record: dict[str, Any], from_format: int) -> dict[str, Any]:
    """Lift a record stored in ``from_format`` to the current format."""
    for version in range(from_format, FORMAT_VERSION):
        record = MIGRATIONS[version].record(record)
    return record


def upgrade_manifest(manifest: dict[str, Any], from_format: int) -> dict[str, Any]:
    """Lift a segment manifest stored in ``from_format`` to the current format."""
    for version in range(from_format, FORMAT_VERSION):
        manifest = MIGRATIONS[version].manifest(manifest)
    return manifest
