"""The admin listener under load it does not serve: methods, paths, bodies, waiting gate
requests and the optional bearer token, over real HTTP on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from served_app import served

from mcp_tap.errors import InputError
from mcp_tap.evidence import EvidenceWriter
from mcp_tap.proxy.admin import MAX_BODY_BYTES, admin_app
from mcp_tap.proxy.canary import CanaryAnalysis
from mcp_tap.proxy.metrics import Metrics
from mcp_tap.proxy.options import GateOptions
from mcp_tap.proxy.options.loading import load_options

REPO_POLICY = Path(__file__).resolve().parents[2] / "config" / "policy.toml"


async def _ready() -> list[str]:
    return []


@asynccontextmanager
async def serving(tmp_path: Path, *, token: str | None = None, waiters: int = 64,
                  rate: float = 1000.0) -> AsyncIterator[str]:
    """The admin application (with a real gate on a small real bundle) on a loopback port."""
    bundle = tmp_path / "bundle"
    with EvidenceWriter(bundle) as writer:
        writer.submit({"kind": "exchange", "hop": "tap", "method": "tools/list"})
    canary = CanaryAnalysis(GateOptions(policy=str(REPO_POLICY)), bundle)
    app = admin_app(Metrics(), _ready, canary, token=token, max_gate_waiters=waiters,
                    rate=rate)
    async with served(app) as base:
        yield base


async def test_methods_and_paths_it_does_not_serve(tmp_path: Path) -> None:
    """404 for a path no route serves; 405 with Allow for a method a route does not."""
    async with serving(tmp_path) as base, aiohttp.ClientSession() as client:
        async with client.get(f"{base}/nothing-here") as answer:
            assert answer.status == 404
        async with client.post(f"{base}/metrics", data=b"x") as answer:
            assert answer.status == 405
            assert set(answer.headers["Allow"].split(",")) >= {"GET"}
        async with client.get(f"{base}/gate/flagger") as answer:
            assert answer.status == 405
            assert answer.headers["Allow"] == "POST"
        async with client.delete(f"{base}/gate") as answer:
            assert answer.status == 405


async def test_body_past_the_limit_is_413(tmp_path: Path) -> None:
    """A Flagger webhook body past the limit is refused, not read."""
    async with serving(tmp_path) as base, aiohttp.ClientSession() as client, \
            client.post(f"{base}/gate/flagger", data=b"x" * (MAX_BODY_BYTES + 1)) as answer:
        assert answer.status == 413


async def test_waiting_gate_requests_are_bounded(tmp_path: Path) -> None:
    """With two slots, six concurrent /gate requests while the first evaluation starts: two
    wait for it (and get the decision), four get 503 with Retry-After at once."""
    async with serving(tmp_path, waiters=2) as base, aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=180)) as client:

        async def ask() -> tuple[int, str | None]:
            async with client.get(f"{base}/gate") as answer:
                await answer.read()
                return answer.status, answer.headers.get("Retry-After")

        answers = await asyncio.gather(*(ask() for _ in range(6)))
    assert sorted(answers, key=str).count((503, "1")) == 4, answers
    assert [a for a in answers if a[1] is None] == [(200, None)] * 2, answers


async def test_requests_past_the_rate_wait_and_get_429(tmp_path: Path) -> None:
    """At two requests a second (a burst of two), four quick /metrics: two answered, two
    slowed down and refused with 429 and Retry-After; the probes are never limited."""
    async with serving(tmp_path, rate=2.0) as base, aiohttp.ClientSession() as client:
        statuses = []
        for _ in range(4):
            async with client.get(f"{base}/metrics") as answer:
                statuses.append((answer.status, answer.headers.get("Retry-After")))
        for _ in range(5):
            async with client.get(f"{base}/healthz") as answer:
                statuses.append((answer.status, None))
    assert statuses[:2] == [(200, None)] * 2
    assert (429, "1") in statuses[2:4]
    assert statuses[4:] == [(200, None)] * 5


async def test_bearer_token(tmp_path: Path) -> None:
    """With a token every route but the probes needs it; the probes stay open."""
    async with serving(tmp_path, token="t0ken-for-test") as base, \
            aiohttp.ClientSession() as client:
        async with client.get(f"{base}/metrics") as answer:
            assert answer.status == 401
            assert answer.headers["WWW-Authenticate"] == "Bearer"
        async with client.get(f"{base}/metrics",
                              headers={"Authorization": "Bearer wrong"}) as answer:
            assert answer.status == 401
        async with client.get(f"{base}/metrics",
                              headers={"Authorization": "Bearer t0ken-for-test"}) as answer:
            assert answer.status == 200
        for probe in ("/healthz", "/readyz"):
            async with client.get(f"{base}{probe}") as answer:
                assert answer.status == 200


def test_token_env_must_be_set(tmp_path: Path) -> None:
    """A token_env naming an unset variable is bad input, not an open listener."""
    config = tmp_path / "tap.toml"
    config.write_text('[admin]\ntoken_env = "TAP_ADMIN_TOKEN"\n'
                      '[[hop]]\nlisten = "127.0.0.1:1"\nupstream = "http://127.0.0.1:2"\n')
    with pytest.raises(InputError, match="token_env names TAP_ADMIN_TOKEN, which is not set"):
        load_options(str(config), env={})
    opts = load_options(str(config), env={"TAP_ADMIN_TOKEN": "x"})
    assert opts.admin.token_env == "TAP_ADMIN_TOKEN"
