"""The [evidence] shipping options: what is accepted, and the one-line refusals (store
credentials in the config file above all, whose value is never echoed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_tap.errors import InputError
from mcp_tap.proxy.options import load_options
from mcp_tap.proxy.options.shipping import ship_options

FLAGS = {"listen": "127.0.0.1:0", "upstream": "http://127.0.0.1:9"}
SECRET = "wJalrXUtnFEMI-not-a-real-secret"


def _load(tmp_path: Path, evidence: str, env: dict[str, str] | None = None) -> object:
    config = tmp_path / "tap.toml"
    config.write_text(f"[evidence]\n{evidence}\n")
    return load_options(str(config), env=env or {}, **FLAGS)


def test_ship_with_a_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TAP_POD", "pod-7")
    options = load_options(None, env={"MCP_TAP_EVIDENCE_RELEASE": "v2",
                                      "MCP_TAP_EVIDENCE_RETENTION": "7d"},
                           ship="s3://evidence/canary", **FLAGS)
    ship = ship_options(options.evidence)
    assert ship is not None
    assert (str(ship.root), ship.release, ship.pod) == ("s3://evidence/canary", "v2", "pod-7")
    assert (ship.retention_s, ship.lock_mode) == (7 * 86400, "COMPLIANCE")
    assert ship_options(load_options(None, env={}, **FLAGS).evidence) is None


@pytest.mark.parametrize("key", ["aws_secret_access_key", "aws_access_key_id",
                                 "secret_key", "session_token", "AWS_SECRET_ACCESS_KEY"])
def test_a_credential_in_the_config_is_refused_without_its_value(
        tmp_path: Path, key: str) -> None:
    with pytest.raises(InputError) as caught:
        _load(tmp_path, f'ship = "s3://evidence/canary"\nrelease = "v2"\n{key} = "{SECRET}"')
    message = str(caught.value)
    assert f"[evidence] {key}: store credentials are never read from the config file" in message
    assert SECRET not in message and "\n" not in message


@pytest.mark.parametrize(("evidence", "message"), [
    ('ship = "s3://evidence/canary"', "[evidence] ship needs a release label"),
    ('ship = "s3://evidence/canary"\nrelease = "../x"', "invalid key segment"),
    ('ship = "/tmp/evidence"\nrelease = "v2"', "[evidence] ship must be s3://BUCKET/PREFIX"),
    (f'ship = "s3://AKIA:{SECRET}@evidence/x"\nrelease = "v2"',
     "[evidence] ship must be s3://BUCKET/PREFIX"),
    ('ship = "s3://evidence/canary"\nrelease = "v2"\nretention = "a week"',
     "[evidence] retention must be a duration"),
    ('ship = "s3://evidence/canary"\nrelease = "v2"\nlock_mode = "STRICT"',
     "[evidence] lock_mode must be one of COMPLIANCE, GOVERNANCE"),
    ('ship = "s3://evidence/canary"\nrelease = "v2"\nspool_max_bytes = 0',
     "[evidence] spool_max_bytes must be an integer above 0"),
    ('shipping = "s3://evidence/canary"', "unknown"),
])
def test_bad_shipping_options_are_one_line(tmp_path: Path, evidence: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        _load(tmp_path, evidence)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert SECRET not in str(caught.value)


def test_shipping_needs_the_recording_process(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r'needs \[recording\] mode = "process"'):
        _load(tmp_path, 'ship = "s3://evidence/canary"\nrelease = "v2"',
              env={"MCP_TAP_RECORDING_MODE": "inline"})


def test_shipping_metrics_and_readyz_from_the_counters() -> None:
    """The shipper's counters, as the recording process reports them, become the ship
    families at /metrics and the shipping member of /readyz; without shipping, neither."""
    from mcp_tap.evidence.shipping import LOCK_ABSENT, shipping_status
    from mcp_tap.proxy.metrics import Metrics

    counters = {"written": 10, "ship_enabled": 1, "ship_segments": 3, "ship_bytes": 4096,
                "ship_failures": 2, "ship_dropped_segments": 1, "ship_dropped_bytes": 900,
                "ship_dropped_records": 7, "ship_spool_bytes": 1200, "ship_spool_segments": 2,
                "ship_failing": 1, "ship_lock": LOCK_ABSENT}
    metrics = Metrics()
    metrics.evidence(lambda: counters)
    text = metrics.render()
    for line in ("mcptap_evidence_shipped_segments_total 3.0",
                 "mcptap_evidence_ship_failures_total 2.0",
                 "mcptap_evidence_ship_dropped_records_total 7.0",
                 "mcptap_evidence_spool_bytes 1200.0", "mcptap_evidence_ship_failing 1.0"):
        assert line in text.splitlines(), line
    status = shipping_status(counters)
    assert status is not None
    assert (status["failing"], status["segmentsWaiting"], status["recordsNotShipped"]) == (
        True, 2, 7)
    assert status["objectLock"] == "bucket without Object Lock" and len(status["notes"]) == 3
    plain = Metrics()
    plain.evidence(lambda: {"written": 10})
    assert "ship" not in plain.render() and shipping_status({"written": 10}) is None
