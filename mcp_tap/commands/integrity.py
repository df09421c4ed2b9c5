"""Every command that reads evidence says whether it verifies.

``report``, ``export``, ``diff``, ``replay`` and ``sdk-diff`` read records; on a bundle that
does not verify (a record altered, deleted or unreadable, a segment that is not evidence
at all) what they print would look like an answer about the service. So each verifies its
bundles first (:func:`check_integrity`): unless the user passes ``--allow-unverified`` a
bundle that fails is an error naming it and its first problem (exit 2, nothing written);
with it, the command reads what it can (leniently) and says so first, on stderr and in its
output (the report's first card).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mcp_tap.errors import InputError
from mcp_tap.evidence import LOSS_KINDS, VerifyReport, verify_bundles
from mcp_tap.outputs import Outcome

__all__ = ["ALLOW_FLAG", "Integrity", "add_allow_unverified", "check_integrity", "marked"]

ALLOW_FLAG = "--allow-unverified"


def add_allow_unverified(parser: argparse.ArgumentParser) -> None:
    """Add ``--allow-unverified`` to ``parser``."""
    parser.add_argument(
        ALLOW_FLAG, action="store_true", dest="allow_unverified",
        help="read evidence that does not verify (records read leniently; the output "
             "says it is unverified) instead of refusing it")


def _first(report: VerifyReport) -> str:
    errors = [p for p in report.errors if p.kind not in LOSS_KINDS]
    return " ".join((errors[0].message if errors else "no problem").split())


@dataclass(frozen=True, slots=True)
class Integrity:
    """The verification of a command's bundles: which failed, and how to read them."""

    reports: tuple[VerifyReport, ...]

    @property
    def failed(self) -> tuple[VerifyReport, ...]:
        """The bundles that do not verify for another reason than stated loss (a gap, an
        abrupt end: the records there are still the ones written, and the loss is stated)."""
        return tuple(r for r in self.reports if not r.intact)

    @property
    def ok(self) -> bool:
        """Whether every bundle verifies."""
        return not self.failed

    @property
    def lenient(self) -> bool:
        """Whether the records must be read leniently (some bundle failed, and the user
        allowed that): a malformed line is then skipped, not an error."""
        return not self.ok

    def banner(self) -> str:
        """One line saying which bundles do not verify ("" when all do)."""
        failed = self.failed
        if not failed:
            return ""
        first = failed[0]
        return (f"UNVERIFIED EVIDENCE: {len(failed)} of {len(self.reports)} bundle(s) do not "
                f"verify ({first.path}: {len(first.errors)} error(s), first: "
                f"{_first(first)}); what follows is read from it anyway")


def marked(outcome: Outcome, integrity: Integrity) -> Outcome:
    """``outcome`` saying first, in every format, that its evidence does not verify (the
    text's first line, the headline, a fact, and ``unverified`` in a JSON object's data);
    unchanged when it all verifies."""
    banner = integrity.banner()
    if not banner:
        return outcome
    data = ({**outcome.data, "unverified": banner} if isinstance(outcome.data, dict)
            else outcome.data)
    return replace(outcome, headline=f"UNVERIFIED, {outcome.headline}", data=data,
                   text=f"{banner}\n{outcome.text}",
                   facts={"evidence": "UNVERIFIED", **outcome.facts})


def check_integrity(bundles: Sequence[Path], *, allow: bool) -> Integrity:
    """Verify ``bundles``; refuse them (:class:`InputError`) unless all verify or ``allow``.

    With ``allow`` and a failed bundle, the banner goes to stderr at once, before any
    output, so it is the first thing the user sees.
    """
    integrity = Integrity(tuple(verify_bundles(bundles)))
    failed = integrity.failed
    if failed and not allow:
        first = failed[0]
        raise InputError(
            f"{first.path}: evidence does not verify ({len(first.errors)} error(s), first: "
            f"{_first(first)}); run `mcp-tap verify {first.path}`, or pass {ALLOW_FLAG} "
            "to read it anyway")
    if failed:
        sys.stderr.write(f"mcp-tap: warning: {integrity.banner()}\n")
    return integrity
