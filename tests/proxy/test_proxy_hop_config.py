"""``[[hop]]`` tables: ``box`` says what the upstream is, and any other key is an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_tap.cli import main
from mcp_tap.errors import InputError
from mcp_tap.proxy.options import TapOptions, load_options

TWO_HOPS = (
    '[[hop]]\nname = "edge"\nlisten = "127.0.0.1:0"\nupstream = "http://127.0.0.1:9000"\n{edge}'
    '[[hop]]\nname = "origin"\nlisten = "127.0.0.1:0"\nupstream = "http://127.0.0.1:9100"\n'
)


def _load(tmp_path: Path, edge: str) -> TapOptions:
    config = tmp_path / "tap.toml"
    config.write_text(TWO_HOPS.format(edge=edge), encoding="utf-8")
    return load_options(str(config), env={})


def test_box_defaults_to_http_and_takes_mcp_gateway(tmp_path: Path) -> None:
    plain = _load(tmp_path, "").hops
    assert [(h.name, h.box) for h in plain] == [("edge", "http"), ("origin", "http")]
    gateway = _load(tmp_path, 'box = "mcp-gateway"\n').hops
    assert [(h.name, h.box) for h in gateway] == [("edge", "mcp-gateway"), ("origin", "http")]


@pytest.mark.parametrize(
    ("edge", "expected"),
    [
        ('boxx = "mcp-gateway"\n', "unknown key hop.boxx in [[hop]] #0"),
        ("upstream_timeout = 3\n", "unknown key hop.upstream_timeout in [[hop]] #0"),
        ('box = "gateway"\n', "[[hop]] #0 box must be one of http, mcp-gateway, got 'gateway'"),
    ],
    ids=["typo", "unknown", "box-value"],
)
def test_unknown_hop_key_or_box_is_one_line_input_error(
    tmp_path: Path, edge: str, expected: str
) -> None:
    with pytest.raises(InputError) as caught:
        _load(tmp_path, edge)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_cli_rejects_an_unknown_hop_key_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("MCP_TAP_"):
            monkeypatch.delenv(name)
    config = tmp_path / "tap.toml"
    config.write_text(TWO_HOPS.format(edge='bx = "http"\n'), encoding="utf-8")
    assert main(["proxy", "--config", str(config)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("mcp-tap: error: ") and err.count("\n") == 1
    assert "unknown key hop.bx in [[hop]] #0" in err
