"""The on-disk evidence format: its version, file names, record digests and migrations.

A bundle is a directory::

    bundle.json                       {"format": 1, "createdAt", "tool", "toolVersion"[, "closed"]}
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

On a clean shutdown the writer adds ``"closed": {"at", "segments", "records", "lastSeq",
"chainHead", "lost"}`` to ``bundle.json``. Without it nothing would reveal that whole trailing
segments were deleted, because each surviving segment would still verify on its own.

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

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from mcp_tap.core.hashing import digest
from mcp_tap.core.jsonrpc import Kind, classify
from mcp_tap.errors import BundleFormatError

FORMAT_VERSION: Final = 1
"""The evidence format this mcp-tap writes."""

BUNDLE_FILE: Final = "bundle.json"
TOOL_NAME: Final = "mcp-tap"

# The writer owns these keys; whatever a caller put there is replaced.
WRITER_KEYS: Final = frozenset({"seq", "prev", "digest"})

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


MIGRATIONS: dict[int, Migration] = {}
"""Older format version -> the migration that lifts it by one. Empty: version 1 is the first."""


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
