"""Fuzzing the JSON-RPC judge (the long run: bench/fuzz_judge.py).

Generated exchanges in both eras (``tests/support/fuzz_judge_inputs.py``) through
:func:`mcp_tap.core.exchange.judge`, and harmless variants of the transcripts corpus's
golden cases, which must stay clean.
"""

from __future__ import annotations

import random

import pytest
from fuzz_judge_inputs import GOLDEN, check_findings, judge_golden, judge_random
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tap.core.exchange import Exchange, judge
from mcp_tap.core.findings import Boundary, Finding, Strength
from mcp_tap.core.headers import HeaderMap

_SEEDS = st.integers(min_value=0, max_value=2**64 - 1)


class TestGeneratedExchanges:
    """Generated and mutated JSON-RPC exchanges never break the judge."""

    @settings(max_examples=400, deadline=None)
    @given(seed=_SEEDS)
    def test_findings_are_catalog_rules_at_catalog_strength(self, seed: int) -> None:
        """No exception; every finding is a catalog rule at its catalog strength for the
        era (must or should), with a one-line message."""
        judge_random(random.Random(seed))

    def test_a_deep_batch_in_an_sse_body(self) -> None:
        """A batch 3,000 levels deep, answered over SSE with a broken event, is judged."""
        deep = b"[" * 3000 + b"1" + b"]" * 3000
        body = b'[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":' + deep + b"}]"
        result = judge(Exchange(
            HeaderMap.of({"Accept": "application/json, text/event-stream",
                          "Content-Type": "application/json"}),
            body, 200, HeaderMap.of({"Content-Type": "text/event-stream"}),
            b'data: {"jsonrpc":"2.0","id":1,"result":{}}\n\ndata: {'))
        check_findings(result)
        assert result.findings

    def test_the_check_rejects_a_wrong_strength(self) -> None:
        """The property can fail: a finding at a strength the catalog does not give it."""
        result = judge(Exchange(HeaderMap(), b"not json"))
        (parse,) = [f for f in result.findings if f.rule == "request.parse"]
        assert parse.strength is Strength.MUST
        forged = Finding(parse.rule, parse.code, Boundary.REQUEST, "x", "", Strength.SHOULD)
        wrong = type(result)(result.era, result.request, (forged,), None, ())
        with pytest.raises(AssertionError, match="strength should but the catalog says must"):
            check_findings(wrong)


class TestGoldenVariants:
    """Meaning-preserving changes to golden cases give no finding."""

    def test_there_are_golden_cases_in_both_eras(self) -> None:
        """The corpus feeds the property with cases of both eras, over JSON and SSE."""
        assert len(GOLDEN) >= 40
        assert {str(c.era) for c in GOLDEN} == {"modern", "legacy"}
        assert any(isinstance(c.response_body, dict) and "sse" in c.response_body
                   for c in GOLDEN)

    @settings(max_examples=400, deadline=None)
    @given(seed=_SEEDS)
    def test_harmless_variants_stay_clean(self, seed: int) -> None:
        """Key order, JSON whitespace, another request id (integer or string, mirrored in
        the answer) and header-name case change nothing."""
        judge_golden(random.Random(seed))
