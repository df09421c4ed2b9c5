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
_EXCHANGE = re.compile(rb'"exchangeId":"([^"\\]{1,200})"')


def locate(bundles: Sequence[Path], digests: Iterable[str]) -> dict[str, Location]:
    """Map each of ``digests`` found in ``bundles`` to its segment file, line and seq.

    Digests not found (a damaged bundle, a report's evidence) are simply absent. A file
    that cannot be read is skipped: locating is a courtesy of the output, not a check.
    """
    return _locate(bundles, digests, _DIGEST, "digest")


def locate_exchanges(bundles: Sequence[Path], exchange_ids: Iterable[str]
                     ) -> dict[str, Location]:
    """Map each of ``exchange_ids`` found in ``bundles`` to its exchange record's place.

    As :func:`locate`, keyed by the record's ``exchangeId`` (the first record found wins:
    name the bundles in the order to search them).
    """
    return _locate(bundles, exchange_ids, _EXCHANGE, "exchangeId")


def _locate(bundles: Sequence[Path], keys: Iterable[str], pattern: re.Pattern[bytes],
            field: str) -> dict[str, Location]:
    from mcp_tap.evidence.reader import list_segments

    wanted = set(keys)
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
                _scan(files.path, wanted, found, pattern, field)
    return found


def _scan(path: Path, wanted: set[str], found: dict[str, Location],
          pattern: re.Pattern[bytes], field: str) -> None:
    try:
        with path.open("rb") as file:
            for number, raw in enumerate(file, 1):
                hits = [m.decode("utf-8", "replace") for m in pattern.findall(raw)]
                hits = [h for h in hits if h in wanted and h not in found]
                if not hits:
                    continue
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                own = record.get(field) if isinstance(record, dict) else None
                if isinstance(own, str) and own in hits:
                    seq = record.get("seq")
                    exchange = record.get("exchangeId")
                    found[own] = Location(
                        path=str(path), line=number,
                        seq=seq if type(seq) is int else None,
                        exchange=exchange if isinstance(exchange, str) else own)
                    if not wanted - found.keys():
                        return
    except OSError:
        return
