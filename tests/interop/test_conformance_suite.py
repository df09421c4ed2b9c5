"""The official MCP conformance suite as a transparency check.

``@modelcontextprotocol/conformance@0.2.0-alpha.12`` (``server --suite all --spec-version
2026-07-28``, on Node.js 22) runs against the real SDK server (``mcp==2.3.0``, the demo
origin) twice: directly, and through an in-process tap. A transparent tap changes no
verdict: the same check ids with the same status, check by check, including the failures
(the demo origin has none of the suite's fixture tools, prompts and resources). And the
tap's evidence holds one exchange record per HTTP request the suite made (counted inside
the suite's own Node process), in a bundle that verifies.

Node and the suite are installed into ``.cache/conformance`` (``python tests/support/conformance.py
install``, which ``.ci/run`` runs first; the test installs them itself otherwise). If that
fails the test fails, unless ``MCP_TAP_SKIP_CONFORMANCE=1`` says to skip.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from conformance import (
    SKIP_ENV,
    SUITE_PACKAGE,
    Installation,
    InstallError,
    SuiteRun,
    ensure_installed,
    read_verdicts,
    run_suite,
)
from peers import run_origin
from taps import exchanges, hop_url, running_tap, tap_options

from mcp_tap.evidence import verify_bundle


@pytest.fixture(scope="module")
def suite() -> Installation:
    """Node 22 and the conformance suite, installed into the cache dir if not there yet."""
    try:
        return ensure_installed()
    except InstallError as exc:
        problem = str(exc)
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SUITE_PACKAGE} could not be installed ({SKIP_ENV}=1): {problem}")
    pytest.fail(
        f"{SUITE_PACKAGE} could not be installed (set {SKIP_ENV}=1 to skip instead): {problem}",
        pytrace=False,
    )


def _describe(run: SuiteRun, key: str) -> str:
    check = run.checks.get(key)
    if check is None:
        return "absent"
    why = check.get("errorMessage") or ""
    return f"{check.get('status')}{f' ({why})' if why else ''}"


def _differences(direct: SuiteRun, tapped: SuiteRun) -> list[str]:
    keys = sorted(set(direct.verdicts) | set(tapped.verdicts))
    return [
        f"{key}: direct {_describe(direct, key)} / through the tap {_describe(tapped, key)}"
        for key in keys
        if direct.verdicts.get(key) != tapped.verdicts.get(key)
    ]


async def test_conformance_verdicts_are_identical_through_the_tap(
    suite: Installation, tmp_path: Path
) -> None:
    # A fresh origin for each run, so nothing one run leaves in the server's state can
    # reach the other; both runs at once, to keep the test short.
    with run_origin() as direct_url, run_origin() as tapped_url:
        opts = tap_options(tmp_path / "evidence", upstream=tapped_url.removesuffix("/mcp"))
        async with running_tap(opts) as tap:
            direct, tapped = await asyncio.gather(
                asyncio.to_thread(run_suite, suite, direct_url, work_dir=tmp_path / "direct"),
                asyncio.to_thread(run_suite, suite, hop_url(tap), work_dir=tmp_path / "tapped"),
            )
        recorded = exchanges(tap)
        bundle = tap.bundle_dir

    # The suite really ran: all its scenarios, over a hundred checks, both outcomes.
    assert direct.scenarios and sorted(direct.scenarios) == sorted(tapped.scenarios)
    assert len(direct.verdicts) >= 100, direct.output[-2000:]
    assert {"SUCCESS", "FAILURE"} <= set(direct.verdicts.values())

    # The transparency check: every check id, every verdict, identical.
    differences = _differences(direct, tapped)
    assert not differences, "verdicts differ through the tap:\n" + "\n".join(differences)
    assert direct.returncode == tapped.returncode

    # The suite made the same requests both ways, and the tap recorded every one of them.
    def shape(run: SuiteRun) -> Counter[tuple[str, str]]:
        return Counter((r["via"], r["method"]) for r in run.requests)

    assert len(tapped.requests) > 0
    assert shape(direct) == shape(tapped)
    assert len(recorded) == len(tapped.requests)
    assert Counter(r["ingress"]["httpMethod"] for r in recorded) == Counter(
        r["method"] for r in tapped.requests
    )
    assert all(r["tapError"] is None for r in recorded), [
        (r["method"], r["tapError"]) for r in recorded if r["tapError"] is not None
    ]
    assert all(r["origin"] is not None for r in recorded)

    report = verify_bundle(bundle)
    assert report.ok, report.to_json()
    assert report.records >= len(recorded)


def _write_checks(root: Path, scenario: str, checks: list[dict[str, str]]) -> None:
    folder = root / f"server-{scenario}-2026-12-02T17-59-47-257Z"
    folder.mkdir(parents=True)
    (folder / "checks.json").write_text(json.dumps(checks))


def test_read_verdicts_keys_checks_by_scenario_and_numbers_repeats(tmp_path: Path) -> None:
    _write_checks(
        tmp_path,
        "http-header-validation",
        [
            {"id": "sep-2243-server-reject-error-code", "status": "SUCCESS"},
            {"id": "wire-schema-valid", "status": "SUCCESS"},
            {"id": "sep-2243-server-reject-error-code", "status": "FAILURE"},
        ],
    )
    _write_checks(tmp_path, "tools-list", [{"id": "wire-schema-valid", "status": "WARNING"}])
    verdicts, checks, scenarios = read_verdicts(tmp_path)
    assert scenarios == ["http-header-validation", "tools-list"]
    assert verdicts == {
        "http-header-validation/sep-2243-server-reject-error-code": "FAILURE",
        "http-header-validation/sep-2243-server-reject-error-code#2": "SUCCESS",
        "http-header-validation/wire-schema-valid": "SUCCESS",
        "tools-list/wire-schema-valid": "WARNING",
    }
    assert checks["tools-list/wire-schema-valid"]["status"] == "WARNING"


def test_read_verdicts_rejects_an_unexpected_layout(tmp_path: Path) -> None:
    (tmp_path / "somewhere").mkdir()
    (tmp_path / "somewhere" / "checks.json").write_text("[]")
    with pytest.raises(ValueError, match="unexpected results directory"):
        read_verdicts(tmp_path)
