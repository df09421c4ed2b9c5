"""The hop-comparison record's change values are redacted like the exchange records: a
secret that changed is shown as a keyed pseudonym on each side, never as itself."""

from __future__ import annotations

from typing import Any

import orjson

from mcp_tap.core.headers import HeaderMap
from mcp_tap.core.hops import HopThresholds, HopView
from mcp_tap.core.redaction import Redactor
from mcp_tap.core.redaction.policy import RedactionPolicy
from mcp_tap.proxy.correlate import Correlator, Pending
from mcp_tap.proxy.hoprecord import ChangeRenderer, RedactedSides, comparison_record

TRACE = "0af7651916cd43dd8448eb211c80319c"
REDACTOR = Redactor(RedactionPolicy(), pseudonym_key=b"k" * 32)


def _pending(hop: str, at: float, token: str, password: str, depth: int = 0) -> Pending:
    deep: Any = "x"
    for _ in range(depth):
        deep = [deep]
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "login", "arguments": {"user": "ann", "password": password,
                                                         "deep": deep}}}
    headers = HeaderMap((("Authorization", f"Bearer {token}"), ("Mcp-Name", "login")))
    view = HopView(hop, headers, message, 200, (), forwarded_headers=headers)
    redacted = REDACTOR.walk_plain(message).value
    return Pending(f"{hop}-x", view, at, "http://gw", "mcp-gateway", TRACE, False, at + 1,
                   RedactedSides(redacted, ()))


def test_changed_secrets_are_keyed_pseudonyms_and_deep_values_a_note() -> None:
    correlator = Correlator(HopThresholds())
    assert correlator.offer(_pending("origin", 1.1, "gw-token-2", "hunter3", 40), 2.0) is None
    pair = correlator.offer(_pending("edge", 1.0, "client-token-1", "hunter2"), 2.1)
    assert pair is not None
    record = comparison_record(pair, TRACE, ChangeRenderer(REDACTOR), [])
    text = orjson.dumps(record).decode()
    for secret in ("gw-token-2", "client-token-1", "hunter2", "hunter3"):
        assert secret not in text
    changes = {c["path"]: c for c in record["changes"]}
    password = changes["/params/arguments/password"]
    assert (password["class"], password["meaning"]) == ("param-changed", "recorded")
    assert password["before"].startswith("[REDACTED:") and password["after"].startswith(
        "[REDACTED:")
    assert password["before"] != password["after"]
    token = changes["header:authorization"]
    assert (token["class"], token["meaning"]) == ("credentials", "expected")
    assert token["before"] != token["after"]
    assert changes["/params/arguments/deep"]["after"] == "[a value nested deeper than 32 levels]"
