"""SARIF 2.1.0: one reporting rule per catalog rule, one result per failed check.

Each catalog rule is a ``reportingDescriptor`` (id, summary as short description and help,
the rule's boundary and JSON-RPC code as properties) whose default level follows its
strength: a MUST is ``error``, a SHOULD ``warning``. A failed check is a result of its rule
(or of ``mcp-tap.check`` when the failure is no rule's) located in the evidence: the bundle
segment file and line as the physical location, the exchange as the logical location.
The tests validate the output against the official SARIF 2.1.0 JSON schema.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from mcp_tap.outputs.model import Check, Outcome
from mcp_tap.outputs.printable import json_safe
from mcp_tap.version import __version__

SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"
VERSION: Final = "2.1.0"
RULES_DOC: Final = "docs/rules.md"
# The rule of a failed check that is no catalog rule's (a case that expected a rejection).
CHECK_RULE: Final = "mcp-tap.check"


def level_of(strength: str) -> str:
    """The SARIF level of a rule strength: MUST is an error, SHOULD a warning."""
    return "warning" if strength == "should" else "error"


def _descriptors(own: tuple[tuple[str, str], ...] = ()) -> list[dict[str, Any]]:
    from mcp_tap.core.catalog import RULES
    from mcp_tap.core.citations import citations

    descriptors = []
    for rule in RULES:
        # Rules gain a strength on another branch; until then every rule is a MUST.
        strength = str(getattr(rule, "strength", "must"))
        descriptors.append({
            "id": rule.id,
            "name": rule.id,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": f"{rule.id} ({rule.boundary}): {rule.summary}"},
            "help": {"text": f"{rule.summary}. See {RULES_DOC} for the rule and its spec "
                             "section.",
                     "markdown": f"`{rule.id}`: {rule.summary}. See [{RULES_DOC}]"
                                 f"({RULES_DOC})."},
            "defaultConfiguration": {"level": level_of(strength)},
            "properties": {"boundary": str(rule.boundary), "code": rule.code,
                           "strength": strength},
            # Where the rule comes from, a public address (the specification's section).
            **({"helpUri": public[0]} if (public := [
                c.url for c in citations(rule.cite) if c.url and not c.local]) else {}),
        })
    for rule_id, summary in own:
        descriptors.append({
            "id": rule_id,
            "name": rule_id,
            "shortDescription": {"text": summary},
            "help": {"text": summary},
            "defaultConfiguration": {"level": "error"},
        })
    descriptors.append({
        "id": CHECK_RULE,
        "name": CHECK_RULE,
        "shortDescription": {"text": "a check failed without breaking one catalog rule"},
        "help": {"text": "A case or check did not meet its expectation (for example a "
                         "rejection that never came); the message says which."},
        "defaultConfiguration": {"level": "error"},
    })
    return descriptors


def _locations(check: Check) -> list[dict[str, Any]]:
    locations = []
    for loc in check.locations:
        physical: dict[str, Any] = {"artifactLocation": {"uri": loc.path}}
        if loc.line is not None and loc.line > 0:
            physical["region"] = {"startLine": loc.line}
        entry: dict[str, Any] = {"physicalLocation": physical}
        if loc.exchange:
            entry["logicalLocations"] = [{"fullyQualifiedName": loc.exchange,
                                          "kind": "object"}]
        if loc.seq is not None:
            entry["properties"] = {"seq": loc.seq}
        locations.append(entry)
    return locations


def _result(check: Check, index: dict[str, int]) -> dict[str, Any]:
    rule = check.rule if check.rule in index else CHECK_RULE
    result: dict[str, Any] = {
        "ruleId": rule,
        "ruleIndex": index[rule],
        "level": level_of(check.strength),
        "message": {"text": check.message or check.name},
        "properties": {"check": check.name, "group": check.group},
    }
    if check.rule and check.rule != rule:
        result["properties"]["rule"] = check.rule
    locations = _locations(check)
    if locations:
        result["locations"] = locations
    return result


def sarif_log(outcome: Outcome) -> dict[str, Any]:
    """Return ``outcome`` as a SARIF 2.1.0 log object."""
    rules = _descriptors(outcome.rules)
    index = {d["id"]: i for i, d in enumerate(rules)}
    failed = [c for c in outcome.checks if not c.passed and not c.skipped]
    return {
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": "mcp-tap",
                "version": __version__,
                "rules": rules,
            }},
            "automationDetails": {"id": f"mcp-tap/{outcome.command}/"},
            "invocations": [{"executionSuccessful": True,
                             "properties": {"outcome": outcome.headline, **outcome.facts}}],
            "results": [_result(c, index) for c in failed],
        }],
    }


def render_sarif(outcome: Outcome) -> str:
    """Render ``outcome`` as a SARIF 2.1.0 JSON document."""
    # JSON escapes C0 controls; C1 and bidi controls are escaped too (json_safe).
    return json_safe(orjson.dumps(sarif_log(outcome), option=orjson.OPT_INDENT_2).decode()) + "\n"
