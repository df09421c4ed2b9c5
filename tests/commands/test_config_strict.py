"""Strict configuration: an unknown key in any table of the proxy config or the gate policy
is one line naming the key and the file, exit 2. One test walks every table each file's
mapping of allowed keys declares (so a table added there is walked too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_tap.cli import main
from mcp_tap.gate.policy import POLICY_TABLES
from mcp_tap.proxy.options.loading import CONFIG_TABLES

# Where each table sits in a TOML file, and what it needs besides the stray key (the
# required keys of an array table, so only the stray key is wrong).
_HEADERS = {
    "hop": ("[[hop]]", 'name = "edge"\nlisten = "127.0.0.1:1"\nupstream = "http://127.0.0.1:2"\n'),
    "redaction.argument": ("[[redaction.argument]]",
                           'method = "tools/call"\nargument = "pin"\n'),
}
_STRAY = "surely_not_a_key"


def _document(table: str, arrays: bool = True) -> str:
    if not table:
        return f"{_STRAY} = 1\n"
    header, body = _HEADERS.get(table, (f"[{table}]", "")) if arrays else (f"[{table}]", "")
    return f"{header}\n{body}{_STRAY} = 1\n"


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], path: Path,
             table: str) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # pragma: no cover - argparse
        code = exc.code if isinstance(exc.code, int) else -1
    _out, err = capsys.readouterr()
    assert code == 2, err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("mcp-tap: "), err
    dotted = f"{table}.{_STRAY}" if table else _STRAY
    assert f"{path}: unknown key {dotted} in " in err, err


@pytest.mark.parametrize("table", sorted(t for t, keys in CONFIG_TABLES.items()
                                         if keys is not None))
def test_proxy_config_tables(table: str, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """``proxy --config`` refuses an unknown key in every table, before listening."""
    config = tmp_path / "tap.toml"
    config.write_text(_document(table))
    _refused(["proxy", "--config", str(config)], capsys, config, table)


@pytest.mark.parametrize("table", sorted(t for t, keys in POLICY_TABLES.items()
                                         if keys is not None))
def test_gate_policy_tables(table: str, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """``gate --policy`` refuses an unknown key in every table, before reading evidence."""
    policy = tmp_path / "policy.toml"
    policy.write_text(_document(table, arrays=False))  # the policy's [hop] is one table
    _refused(["gate", "--policy", str(policy), str(tmp_path)], capsys, policy, table)


@pytest.mark.parametrize("table", ["redaction", "redaction.argument"])
def test_redact_policy_tables(table: str, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """``redact --policy`` refuses an unknown key in its redaction tables."""
    policy = tmp_path / "redact.toml"
    policy.write_text(_document(table) if table != "redaction" else
                      f"[redaction]\n{_STRAY} = 1\n")
    _refused(["redact", "--policy", str(policy), "--out", str(tmp_path / "out"),
              str(tmp_path)], capsys, policy, table)


def test_free_form_key_ring_is_not_walked() -> None:
    """The one free-form table (signer name -> key) is declared as such, not forgotten."""
    assert POLICY_TABLES["rollback.ed25519_keys"] is None
    assert all(keys is not None for keys in CONFIG_TABLES.values())
