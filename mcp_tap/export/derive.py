"""Re-redact a bundle with a stricter policy into a new bundle that says what it came from.

The source bundle must verify (a derived bundle would otherwise launder damage into a
fresh, valid chain). Every record is copied in order through a
:class:`~mcp_tap.core.redaction.Redactor` built from the stricter
:class:`~mcp_tap.core.redaction.RedactionPolicy` (the default denylist is always part of
it, so nothing the capture hid comes back): request and answer headers, bodies, SSE event
data, request targets (query and path parameters, as the live tap redacts them), tap error
reasons, and finding messages (scrubbed of every value the policy removes); URLs in a
hop-comparison's ``box`` and in findings lose their userinfo and query. A view whose
body changed loses its ``bodyDigest``: that is a SHA-256 of the bytes that held what is
now hidden, and an unkeyed digest of a secret is not allowed to reach disk either. Gap
records are copied as they are, so the losses of the capture stay stated.

The new bundle is written by :class:`~mcp_tap.evidence.EvidenceWriter` (its own chain,
manifests and ``closed`` summary), and its ``bundle.json`` carries ``derivedFrom``: the
source bundle's directory name, creation time, chain head, record count and losses, and
the policy applied.
"""

from __future__ import annotations

import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mcp_tap.core.redaction import RedactionPolicy, Redactor, strip_url_secrets
from mcp_tap.errors import InputError
from mcp_tap.evidence import EvidenceWriter, iter_records, verify_bundle
from mcp_tap.evidence.reader import read_bundle_meta
from mcp_tap.files import read_file
from mcp_tap.proxy.options import redaction_policy
from mcp_tap.proxy.options.redaction import REDACTION_TABLES
from mcp_tap.tables import check_tables

_VIEWS: Final = ("ingress", "origin", "egress")
_HEADER_KEYS: Final = ("headers", "forwardedHeaders")
_WRITER_OWNED: Final = ("seq", "prev", "digest")


@dataclass(frozen=True, slots=True)
class Derived:
    """The outcome of a derivation: the new bundle and what changed on the way."""

    path: Path
    records: int
    changed: int
    digests_dropped: int
    derived_from: dict[str, Any]


def load_policy_file(path: str) -> RedactionPolicy:
    """Read the ``[redaction]`` table of a TOML file (a proxy config file works as is)."""
    raw = read_file(path, "policy file")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    if "redaction" not in data:
        raise InputError(f"{path}: has no [redaction] table (extra_keys, [[redaction.argument]])")
    # Only the redaction tables are read (a proxy config's other tables are its own).
    check_tables({"redaction": data["redaction"]},
                 {"": frozenset({"redaction"}), **REDACTION_TABLES}, path)
    return redaction_policy(data["redaction"])


def _pairs(value: Any) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        return []
    return [(str(p[0]), str(p[1])) for p in value if isinstance(p, list | tuple) and len(p) == 2]


def _body_messages(view: Mapping[str, Any]) -> list[Any]:
    messages: list[Any] = []
    body = view.get("body")
    if body is not None:
        messages.append(body)
    for event in view.get("sse") or []:
        if isinstance(event, dict) and event.get("data") is not None:
            messages.append(event["data"])
    return messages


class _RecordRedactor:
    """Applies one :class:`Redactor` to whole evidence records."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.digests_dropped = 0

    def _body(self, body: Any) -> Any:
        if isinstance(body, dict) and set(body) == {"raw"} and isinstance(body["raw"], str):
            return {"raw": self.redactor.redact_text(body["raw"])}
        return self.redactor.redact_message(body)

    def _view(self, view: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        out = dict(view)
        for key in _HEADER_KEYS:
            if key in view:
                out[key] = [list(p) for p in self.redactor.redact_headers(_pairs(view[key]))]
        body_changed = False
        if view.get("body") is not None:
            out["body"] = self._body(view["body"])
            body_changed = out["body"] != view["body"]
        if isinstance(view.get("sse"), list):
            events = []
            for event in view["sse"]:
                if isinstance(event, dict) and event.get("data") is not None:
                    data = event["data"]
                    new = (self.redactor.redact_text(data) if isinstance(data, str)
                           else self.redactor.redact_message(data))
                    body_changed = body_changed or new != data
                    events.append({**event, "data": new})
                else:
                    events.append(event)
            out["sse"] = events
        return out, body_changed

    def record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A redacted copy of ``record`` without the writer-owned keys."""
        out = {k: v for k, v in record.items() if k not in _WRITER_OWNED}
        if record.get("kind") != "exchange":
            if isinstance(out.get("box"), str):
                # A hop-comparison names the box by its upstream URL, whose userinfo (or
                # query) a tap before this one wrote in full.
                out["box"] = strip_url_secrets(out["box"])
            return self._scrub_findings(out, [])
        header_lists: list[list[tuple[str, str]]] = []
        messages: list[Any] = []
        changed_views: set[str] = set()
        for name in _VIEWS:
            view = record.get(name)
            if not isinstance(view, dict):
                continue
            header_lists += [_pairs(view.get(key)) for key in _HEADER_KEYS]
            messages += _body_messages(view)
            out[name], body_changed = self._view(view)
            if name == "ingress" and body_changed:
                # An Mcp-Param-* header may mirror an argument the body just lost.
                for key in _HEADER_KEYS:
                    if key in out[name]:
                        out[name][key] = self.redactor.redact_mirrored(out[name][key],
                                                                       view.get("body"))
            if isinstance(view.get("path"), str):
                # The request target's query and path parameters, as the live tap does.
                out[name]["path"] = self.redactor.redact_url(view["path"])
            if body_changed:
                changed_views.add(name)
        if "origin" in changed_views and isinstance(out.get("egress"), dict):
            changed_views.add("egress")  # egress carries the origin's bytes (sameAsOrigin)
        for name in changed_views:
            if isinstance(out.get(name), dict) and out[name].get("bodyDigest"):
                out[name] = {**out[name], "bodyDigest": None}
                self.digests_dropped += 1
        secrets = self.redactor.removed_values(header_lists, messages)
        return self._scrub_findings(out, secrets)

    def _scrub_findings(self, out: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
        findings = out.get("findings")
        if isinstance(findings, list):
            out["findings"] = [self._finding(f, secrets) if isinstance(f, dict) else f
                               for f in findings]
        tap_error = out.get("tapError")
        if isinstance(tap_error, dict) and isinstance(tap_error.get("reason"), str):
            reason = self.redactor.redact_reason(tap_error["reason"])
            out["tapError"] = {**tap_error, "reason": self.redactor.scrub(reason, secrets)}
        return out

    def _finding(self, finding: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
        """A finding with its message scrubbed and URLs in its text cut to what may show
        (a hop finding's ``where`` names the box by its upstream URL)."""
        out = {**finding, "message": self.redactor.scrub(
            strip_url_secrets(str(finding.get("message", ""))), secrets)}
        if isinstance(finding.get("where"), str):
            out["where"] = strip_url_secrets(finding["where"])
        return out


def _policy_json(policy: RedactionPolicy) -> dict[str, Any]:
    return {
        "extraKeys": sorted(policy.extra_keys),
        "arguments": [{"method": p.method, "tool": p.tool, "argument": p.argument}
                      for p in policy.argument_policies],
    }


def derive(source: Path, policy: RedactionPolicy, out: Path,
           *, clock: Any = time.time) -> Derived:
    """Write ``out``: the bundle at ``source`` redacted again with ``policy``.

    Raises :class:`InputError` when the source does not verify or ``out`` already holds a
    bundle.
    """
    report = verify_bundle(source)
    if not report.ok:
        first = report.errors[0].message if report.errors else "it does not verify"
        raise InputError(f"{source}: does not verify ({len(report.errors)} problem(s), first: "
                         f"{first}); run mcp-tap verify")
    _, meta = read_bundle_meta(source)
    closed = meta.get("closed")
    closed = closed if isinstance(closed, dict) else {}
    head = closed.get("chainHead")
    derived_from = {
        "bundle": source.resolve().name,
        "createdAt": meta.get("createdAt"),
        # verify walked the chain: its head and count are the bundle's, closed or not
        "chainHead": head if isinstance(head, str) else report.chain_head,
        "records": report.records,
        "lost": closed.get("lost", 0),
        "closed": bool(closed),
        "policy": _policy_json(policy),
        "derivedAt": clock(),
    }
    redactor = _RecordRedactor(Redactor(policy))
    changed = copied = 0
    writer = EvidenceWriter(out, clock=clock, meta={"derivedFrom": derived_from})
    # Inline: each record is written as it is submitted, so memory stays flat in the
    # source's size (one record at a time from the streaming reader, no queue to fill).
    writer.start(inline=True)
    try:
        for record in iter_records(source):
            copy = redactor.record(record)
            if copy != {k: v for k, v in record.items() if k not in _WRITER_OWNED}:
                changed += 1
            copied += 1
            if not writer.submit(copy):
                raise InputError(f"{out}: could not write a record of the derived bundle")
    finally:
        writer.close()
    if writer.lost or writer.lost_disk or writer.lost_invalid:
        raise InputError(f"{out}: the derived bundle lost records (disk: {writer.lost_disk}); "
                         "it is incomplete")
    return Derived(out, copied, changed, redactor.digests_dropped, derived_from)
