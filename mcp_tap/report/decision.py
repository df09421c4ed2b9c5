"""The decision card: the action, the policy and rollback target it rests on, and for each
blocking reason what was measured, the threshold, and what must change to move it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_tap.core.catalog import CATALOG
from mcp_tap.report.markup import e, party_of, rule_link
from mcp_tap.report.model import ReportData
from mcp_tap.report.records import number, obj, text

_SOURCE_OF = {"gate.conformance": "conformance", "gate.hop": "hop", "gate.sdk": "sdk",
              "gate.integrity": "integrity", "gate.health": "health",
              "gate.rollback": "rollback"}
_SECTION_OF = {"conformance": "#rules", "hop": "#hops", "health": "#health",
               "integrity": "#summary"}


@dataclass(frozen=True, slots=True)
class Change:
    """One blocking reason: where it comes from, what was measured, the threshold, and what
    would have to change (markup, already escaped)."""

    source: str
    reason: str
    measured: str
    threshold: str
    change: str


def _source(rule: str) -> str:
    for prefix, source in _SOURCE_OF.items():
        if rule == prefix or rule.startswith(prefix + "."):
            return source
    return "other"


def _caused_by(rule: str) -> str:
    """Who a rule's findings are caused by (the catalog's boundary), so a client's own
    malformed request is never read as the server failing."""
    entry = CATALOG.get(rule)
    return party_of(str(entry.boundary)) if entry is not None else "unknown"


def _num(value: Any, fmt: str = "g") -> str:
    found = number(value)
    return "?" if found is None else format(found, fmt)


def _health(rule: str, details: Mapping[str, Any], window: Mapping[str, Any]) -> tuple[str, str,
                                                                                         str]:
    samples = number(window.get("samples")) or 0.0
    if rule == "gate.health.samples":
        have, need = number(details.get("samples")) or 0.0, number(details.get("minimum")) or 0.0
        return (f"{have:g} samples", f"at least {need:g} samples",
                f"{max(0.0, need - have):g} more requests in the window")
    if rule == "gate.health.error-rate":
        rate, cap = number(details.get("errorRate")) or 0.0, number(details.get("maximum")) or 0.0
        errors = number(details.get("errors")) or 0.0
        allowed = math.floor(cap * samples + 1e-9)
        return (f"error rate {rate:.4f} ({errors:g} errors in {samples:g} samples)",
                f"at most {cap:.4f} (\u2264 {allowed} errors in {samples:g} samples)",
                f"{max(0.0, errors - allowed):g} fewer errors, or more healthy samples "
                '(<a href="#health-errors">the errors</a>)')
    if rule in ("gate.health.latency", "gate.health.sse-first-event"):
        name = text(details.get("percentile")) or "p95"
        what = "latency" if rule == "gate.health.latency" else "SSE first-event latency"
        if details.get("latencyMs") is None:
            return ("not measured", f"{name} {what} measured", "exchanges with timings")
        return (f"{name} {what} {_num(details.get('latencyMs'), '.1f')} ms",
                f"at most {_num(details.get('maximum'), '.1f')} ms",
                f"{name} {what} down to the maximum")
    if rule == "gate.health.duration":
        return (f"{_num(details.get('seconds'), '.1f')} s observed",
                f"at least {_num(details.get('minimum'), '.1f')} s",
                "a longer observation window")
    if rule == "gate.health.baseline" and "candidate" in details:
        measure = text(details.get("measure"))
        return (f"{measure} {_num(details.get('candidate'), '.4g')} "
                f"(baseline {_num(details.get('baseline'), '.4g')})",
                f"at most +{_num(details.get('maxIncrease'), '.4g')} over the baseline",
                f"{measure} back within the allowed increase")
    return ("-", "-", "see the message")


def changes(decision: Mapping[str, Any]) -> list[Change]:
    """What would change the decision: one entry per reason, in the gate's order."""
    window = obj(obj(obj(decision.get("sources")).get("health")).get("window"))
    out: list[Change] = []
    reasons = decision.get("reasons")
    for raw in reasons if isinstance(reasons, list) else []:
        reason = obj(raw)
        rule = text(reason.get("rule"))
        details = obj(reason.get("details"))
        found = reason.get("findings")
        finding = text(found[0]) if isinstance(found, list) and found else ""
        source = _source(rule)
        message = e(reason.get("message"))
        count = _num(details.get("count"))
        if rule == "gate.conformance" and "case" in details:
            measured = f"report {e(details.get('report'))} case {e(details.get('case'))} failed"
            threshold = "every case passes"
            change = (f"{rule_link(finding)} stops failing in that case" if finding
                      else "the case passes")
        elif rule == "gate.conformance" and finding:
            hops = obj(details.get("hops"))
            split = (" (" + ", ".join(f"{e(h or '?')} {e(n)}" for h, n in hops.items()) + ")"
                     if hops else "")
            measured = f"{count} finding(s){split}, caused by {e(_caused_by(finding))}"
            threshold = "0 findings (the policy blocks the rule)"
            change = f"{rule_link(finding)} stops failing, or the policy allows it"
        elif rule == "gate.hop" and finding:
            measured = f"{count} finding(s) at {e(details.get('box'))}"
            threshold = "0 findings (every hop.* finding blocks)"
            change = f"the box stops changing what it forwards ({rule_link(finding)})"
        elif rule == "gate.sdk":
            measured = (f"{count} difference(s)" if finding
                        else f"{_num(details.get('rejected'))} result(s) rejected")
            threshold = "0 outside sdk.allow_fields"
            change = "the typed SDK view keeps the fields, or the policy allows them"
        elif source == "health":
            measured, threshold, change = _health(rule, details, window)
        elif source == "integrity":
            measured, threshold = message, "every bundle verifies, nothing lost"
            change = "re-record or repair the evidence (see the bundles)"
        elif source == "rollback":
            measured, threshold = message, "valid fields, attested by a trusted signer"
            change = "fix or re-attest the rollback evidence (mcp-tap attest)"
        elif rule.endswith(".empty"):
            measured, threshold, change = message, "evidence to judge", "record traffic"
        else:
            measured, threshold, change = message, "-", "-"
        out.append(Change(source, rule, measured, threshold, change))
    return out


def _outcome(action: str, decision: Mapping[str, Any]) -> str:
    sources = obj(decision.get("sources"))
    failing = [name for name, s in sources.items() if not obj(s).get("passed")]
    if action == "promote":
        return ("Every source passed and the rollback target is verified. Any blocking "
                "finding or health threshold crossed would make it <b>rollback</b>.")
    if action == "rollback":
        return (f"{e(', '.join(failing))} failed and the rollback target is verified: return "
                "traffic to it. Clearing every reason below would make it <b>promote</b>.")
    if action == "hold":
        then = "rollback" if failing else "promote"
        return ("The rollback target is not verified, so the gate will not guess: hold. With "
                f"a verified target it would be <b>{then}</b>.")
    return "The gate's action is not one this page knows."


def _rollback_target(rollback: Mapping[str, Any]) -> str:
    if not rollback.get("given"):
        return '<span class="badge bad">none given</span>'
    version = text(rollback.get("previousVersion"))
    signer = text(rollback.get("signer"))
    algorithm = text(rollback.get("algorithm"))
    ready = bool(rollback.get("ready"))
    parts = [f'version <b class="mono" id="rollback-version">{e(version or "?")}</b>']
    parts.append(f'attested by <b class="mono" id="rollback-signer">{e(signer or "?")}</b>'
                 + (f" ({e(algorithm)})" if algorithm else ""))
    state = ('<span class="badge ok">verified</span>' if ready
             else '<span class="badge bad">NOT VERIFIED</span>')
    return f"{state} " + ", ".join(parts)


def _sources(decision: Mapping[str, Any]) -> str:
    sources = obj(decision.get("sources"))
    chips = []
    for name, raw in sources.items():
        passed = bool(obj(raw).get("passed"))
        target = _SECTION_OF.get(name)
        label = f"{e(name)}: {'pass' if passed else 'fail'}"
        chip = f'<span class="badge {"ok" if passed else "bad"}">{label}</span>'
        chips.append(f'<a class="chip" href="{target}">{chip}</a>' if target else chip)
    return " ".join(chips)


def decision_section(data: ReportData) -> str:
    """The decision card (or, without a gate decision, the conformance verdict only)."""
    decision = data.decision
    if decision is None:
        note = f'<p class="note">{e(data.decision_note)}</p>' if data.decision_note else ""
        failing = data.exchanges - data.clean_exchanges
        verdict = (f"{data.clean_exchanges} of {data.exchanges} exchanges without findings, "
                   f"{failing} with findings")
        return (
            '<section id="decision"><h2>Decision</h2>'
            '<p><span class="badge neutral">no gate decision</span> '
            "no gate decision (run <code>mcp-tap gate</code>, or pass <code>--policy</code> "
            "and <code>--rollback</code> to this report). Conformance verdicts only: "
            f"{e(verdict)}.</p>{note}</section>"
        )
    action = text(decision.get("action")) or "unknown"
    css = {"promote": "ok", "rollback": "bad", "hold": "warn"}.get(action, "neutral")
    policy = (f'<code id="policy-file">{e(Path(data.policy_path).name)}</code> '
              if data.policy_path else "")
    digest = text(decision.get("policyDigest"))
    policy += f'<span class="muted">sha256</span> <span class="mono">{e(digest)}</span>'
    rows = [
        f'<tr><td class="src">{e(c.source)}</td><td><code>{e(c.reason)}</code></td>'
        f"<td>{c.measured}</td><td>{c.threshold}</td><td>{c.change}</td></tr>"
        for c in changes(decision)
    ]
    reasons = (
        '<table class="changes"><thead><tr><th>source</th><th>reason</th><th>measured</th>'
        "<th>threshold</th><th>to change it</th></tr></thead><tbody>"
        + "".join(rows) + "</tbody></table>"
    ) if rows else '<p class="muted">No reason: every source passed.</p>'
    return (
        '<section id="decision"><h2>Decision</h2>'
        f'<div class="verdict"><span class="badge action {css}" id="action">{e(action)}</span>'
        f'<p class="outcome">{_outcome(action, decision)}</p></div>'
        '<dl class="facts">'
        f"<dt>Policy</dt><dd>{policy}</dd>"
        f"<dt>Rollback target</dt><dd>{_rollback_target(obj(decision.get('rollback')))}</dd>"
        f"<dt>Sources</dt><dd>{_sources(decision)}</dd></dl>"
        f"<h3>What would change the decision</h3>{reasons}"
        f'<p class="muted mono small">evidence digest {e(decision.get("evidenceDigest"))}</p>'
        "</section>"
    )
