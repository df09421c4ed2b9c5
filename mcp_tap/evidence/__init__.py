"""Evidence bundles: the on-disk record of every exchange, its writer, reader and verifier.

See :mod:`mcp_tap.evidence.format` for the layout and versioning,
:mod:`mcp_tap.evidence.writer` for how records reach the disk without blocking traffic, and
:mod:`mcp_tap.evidence.verify` for what ``mcp-tap verify`` checks.
"""

from mcp_tap.evidence.format import (
    FORMAT_VERSION,
    MIGRATIONS,
    Migration,
    answer_is_whole,
    check_format,
    manifest_name,
    record_digest,
    segment_name,
    supported_formats,
)
from mcp_tap.evidence.reader import (
    Bundle,
    SegmentInfo,
    find_all_bundles,
    find_bundles,
    iter_records,
    read_bundle,
)
from mcp_tap.evidence.verify import LOSS_KINDS, Problem, VerifyReport, verify_bundle, verify_bundles
from mcp_tap.evidence.writer import EvidenceWriter

__all__ = [
    "FORMAT_VERSION",
    "LOSS_KINDS",
    "MIGRATIONS",
    "Bundle",
    "EvidenceWriter",
    "Migration",
    "Problem",
    "SegmentInfo",
    "VerifyReport",
    "answer_is_whole",
    "check_format",
    "find_all_bundles",
    "find_bundles",
    "iter_records",
    "manifest_name",
    "read_bundle",
    "record_digest",
    "segment_name",
    "supported_formats",
    "verify_bundle",
    "verify_bundles",
]
