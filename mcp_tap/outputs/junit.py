"""JUnit XML: one ``<testsuite>`` per command run, one ``<testcase>`` per check.

The shape is the common JUnit schema CI servers read (Jenkins, GitLab, GitHub test
reporters); the tests validate it against the published ``JUnit.xsd``. A failed check is a
``<failure>`` whose message is the finding and whose text names the evidence (bundle
segment, line, record seq, exchange). Every value goes through
:func:`~mcp_tap.outputs.printable.printable` first: XML 1.0 has no way to write most control
characters, so a tool name holding one would make the document malformed.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from mcp_tap.outputs.model import Check, Outcome
from mcp_tap.outputs.printable import printable
from mcp_tap.version import __version__


def _where(check: Check) -> str:
    lines = []
    for loc in check.locations:
        parts = [loc.path]
        if loc.line is not None:
            parts.append(f"line {loc.line}")
        if loc.seq is not None:
            parts.append(f"seq {loc.seq}")
        if loc.exchange:
            parts.append(f"exchange {loc.exchange}")
        lines.append(printable("evidence: " + ", ".join(parts)))
    return "\n".join(lines)


def _case(suite: ET.Element, check: Check) -> None:
    case = ET.SubElement(suite, "testcase", name=printable(check.name or "-"),
                         classname=printable(check.group or "mcp-tap"), time="0")
    if check.skipped:
        ET.SubElement(case, "skipped", message=printable(check.message))
    elif not check.passed:
        failure = ET.SubElement(case, "failure", message=printable(check.message),
                                type=printable(check.rule or "mcp-tap.failed"))
        failure.text = "\n".join(t for t in (printable(check.detail), _where(check)) if t)


def render_junit(outcome: Outcome) -> str:
    """Render ``outcome`` as a JUnit XML document."""
    checks = outcome.checks
    root = ET.Element("testsuites")
    suite = ET.SubElement(
        root, "testsuite",
        name=printable(f"mcp-tap {outcome.command}"),
        package="mcp-tap",
        id="0",
        timestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        hostname=socket.gethostname() or "localhost",
        tests=str(len(checks)),
        failures=str(sum(1 for c in checks if not c.passed and not c.skipped)),
        errors="0",
        skipped=str(sum(1 for c in checks if c.skipped)),
        time="0",
    )
    properties = ET.SubElement(suite, "properties")
    facts = {"mcp-tap.version": __version__, "mcp-tap.outcome": outcome.headline,
             **outcome.facts}
    for name, value in facts.items():
        ET.SubElement(properties, "property", name=printable(name), value=printable(value))
    for check in checks:
        _case(suite, check)
    ET.SubElement(suite, "system-out").text = printable(outcome.headline)
    ET.SubElement(suite, "system-err")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
