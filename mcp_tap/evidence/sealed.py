"""verify's reading of a sealed segment from its signed manifest alone, for a caller that
takes the manifest's ``tallies`` instead of the records (the gate, :mod:`mcp_tap.gate.segments`).

A segment is taken from its manifest only when everything verify could learn from the
manifest holds: the bundle is signed and ``bundle.json``'s signature verifies, the manifest
is well formed and its signature verifies under the bundle's key, it names this bundle and
this segment, its sequence numbers follow the records before it without a hole and its
``prevSegmentChainHead`` is their chain head, the segment file has the size the manifest
states, the tallies count the manifest's records and place their gap records inside them,
and the caller accepts the tallies. The manifest's signature covers its chain head, file
hash and tallies, so what the tallies say is what the writer attested for those bytes; the
records themselves are not read (that is ``verify`` and ``gate --full``).

Anything else, and the segment is read as usual (the caller then gets its records), so a
bundle with a damaged or unsigned manifest gives exactly the problems verify reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcp_tap.errors import BundleFormatError
from mcp_tap.evidence.format import upgrade_manifest
from mcp_tap.evidence.reader import SegmentFiles, check_manifest_format, read_manifest
from mcp_tap.evidence.signing import signature_valid

if TYPE_CHECKING:
    from mcp_tap.evidence.passes import VerifyState

SealedConsumer = Callable[[str, Mapping[str, Any] | None], bool]
"""Given a sealed segment's name and its manifest's ``tallies`` (None: its signed manifest
carries none), whether it takes them in place of the segment's records (False: the records
are read and handed on as usual)."""


def take_sealed(v: VerifyState, files: SegmentFiles, consumer: SealedConsumer) -> bool:
    """Account for one segment from its signed manifest, if it can stand for the records
    (see the module docstring); False when the segment must be read."""
    manifest = _signed_manifest(v, files)
    if manifest is None:
        return False
    tallies = manifest.get("tallies")
    if not isinstance(tallies, dict):
        consumer(files.name, None)  # told, so it can say why the segment is read
        return False
    first, count, last = manifest.get("firstSeq"), manifest.get("count"), manifest.get("lastSeq")
    head, link = manifest.get("chainHead"), manifest.get("prevSegmentChainHead")
    if (type(first) is not int or type(count) is not int
            or count < 0 or last != first + count - 1 or first != v.max_seq + 1
            or link != v.head or link != v.previous_chain_head or not isinstance(head, str)
            or (count == 0 and head != link) or manifest.get("segment") != files.number
            or manifest.get("bundleId") != v.bundle_id or tallies.get("records") != count
            or type(tallies.get("exchanges")) is not int):
        return False
    gaps = tallies.get("gaps")
    if not isinstance(gaps, list) or not all(
            isinstance(g, list) and len(g) == 3 and type(g[0]) is int and first <= g[0] <= last
            for g in gaps):
        return False
    assert files.path is not None  # the caller checked: a missing file is a problem
    try:
        if files.path.stat().st_size != manifest.get("bytes"):
            return False
    except OSError:
        return False
    name = files.name
    if not consumer(name, tallies):
        return False
    v.segment_files += 1
    v.records += count
    v.exchanges += tallies["exchanges"]
    for seq, lost, reason in gaps:
        v.gap(name, seq, {"kind": "gap", "seq": seq, "lost": lost, "reason": reason})
    if count:
        v.max_seq, v.head = last, head
    v.previous_chain_head = head
    return True


def _signed_manifest(v: VerifyState, files: SegmentFiles) -> dict[str, Any] | None:
    """The segment's manifest, upgraded, if the bundle and it are signed and verify."""
    if v.public_key is None or not v.signatures_ok or v.out_of_order:
        return None
    if files.manifest_path is None or files.path is None:
        return None
    try:
        raw = read_manifest(files.manifest_path)
        check_manifest_format(raw, files.manifest_path, v.format)
    except BundleFormatError:
        return None
    if not signature_valid(v.public_key, raw):
        return None
    return upgrade_manifest(raw, v.format)


__all__ = ["SealedConsumer", "take_sealed"]
