"""Find where records are in the evidence: segment file, line and ``seq`` of a record digest.

The gate's reasons name example records by digest (stable, machine-independent); CI
outputs need a place a person can open. One pass over the segment lines finds them: a
line is parsed only when it holds a wanted digest, so the pass costs little more than
reading the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import orjson

from mcp_tap.errors import InputError
from mcp_tap.outputs import Location

_DIGEST = re.compile(rb'"digest":"([0-9a-f]{64})"')


def locate(bundles: Sequence[Path], digests: Iterable[str]) -> dict[str, Location]:
    """Map each of ``digests`` found in ``bundles`` to its segment file, line and seq.

    Digests not found (a damaged bundle, a report's evidence) are simply absent. A file
    that cannot be read is skipped: locating is a courtesy of the output, not a check.
    """
    from mcp_tap.evidence.reader import list_segments

    wanted = set(digests)
    found: dict[str, Location] = {}
    for bundle in bundles:
        if not wanted - found.keys():
            break
        try:
            segments = list_segments(bundle)
        except InputError:
            continue
        for files in segments:
            if files.path is not None:
                _scan(files.path, wanted, found)
    return found


def _scan(path: Path, wanted: set[str], found: dict[str, Location]) -> None:
    try:
        with path.open("rb") as file:
            for number, raw in enumerate(file, 1):
                hits = [m.decode() for m in _DIGEST.findall(raw)]
                hits = [h for h in hits if h in wanted and h not in found]
                if not hits:
                    continue
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                own = record.get("digest") if isinstance(record, dict) else None
                if isinstance(own, str) and own in hits:
                    seq = record.get("seq")
                    exchange = record.get("exchangeId")
                    found[own] = Location(
                        path=str(path), line=number,
                        seq=seq if type(seq) is int else None,
                        exchange=exchange if isinstance(exchange, str) else own)
    except OSError:
        return
